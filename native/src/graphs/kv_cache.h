// One sequence's attention keys and values for every layer of a Qwen3 stack, in a backend buffer:
// the state a session carries from step to step (the weights are shared and read-only).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"

namespace kazeia {

class kv_cache {
public:
    // Attention reads keys in multiples of this, so a sequence's sums do not depend on how large
    // its cache happens to be (a cache grows in the same steps).
    static constexpr int64_t k_bucket = 64;

    // `buft`: where it lives (null: CPU memory).
    kv_cache(int n_layers, int64_t kv_dim, ggml_backend_buffer_type_t buft = nullptr);
    ~kv_cache();
    kv_cache(const kv_cache &) = delete;
    kv_cache & operator=(const kv_cache &) = delete;

    // (Re)allocates for at least `n_ctx` positions, rounded up to a whole bucket; keeps a cache that
    // is large enough. A CPU cache is zeroed as its positions come into use (ensure_zero), so that
    // a thousand-position cache does not fault in all its pages before the first frame; one in
    // another device's memory is zeroed at once.
    void reserve(int64_t n_ctx);
    int64_t capacity() const { return n_ctx_; }
    int64_t kv_dim() const { return kv_dim_; }
    size_t bytes() const;
    // Changes with every allocation: graphs that bound this cache's tensors know when to rebuild.
    uint64_t id() const { return id_; }

    ggml_tensor * k(size_t layer) const { return k_[layer]; }   // [kv_dim, n_ctx]
    ggml_tensor * v(size_t layer) const { return v_[layer]; }   // [n_ctx, kv_dim]: values transposed for the product

    // Cells of the transposed value cache that positions [pos0, pos0 + n) write, row by row.
    std::vector<int64_t> value_cells(int64_t pos0, int64_t n) const;
    // Keys a query at `pos` attends over in a graph reused across positions: whole buckets.
    static int64_t keys_for(int64_t pos) { return (pos + k_bucket) / k_bucket * k_bucket; }

    // Before a graph reads positions [0, n) (the masked ones included) and writes [0, written):
    // positions not yet written read as zeros.
    void prepare(int64_t n, int64_t written);
    // Forget the sequence: every position reads as zero again (only the written ones are cleared).
    void clear();

private:
    void zero(int64_t p0, int64_t p1);

    int n_layers_;
    int64_t kv_dim_;
    ggml_backend_buffer_type_t buft_;
    ggml_context * ctx_ = nullptr;
    ggml_backend_buffer_t buf_ = nullptr;
    std::vector<ggml_tensor *> k_, v_;
    int64_t n_ctx_ = 0;
    uint64_t id_ = 0;
    int64_t written_ = 0;   // positions a sequence may have written
    int64_t zeroed_ = 0;    // positions [written_, zeroed_) are zero; beyond, not yet cleared
};

// Caches of finished sequences, handed out again cleared. A new cache for a request at the default
// frame limit (about a thousand positions: 250 MB for the 0.6B talker) cost 120-160 ms of
// allocation and page faults before its first frame; a reused one costs clearing what was written.
class kv_cache_pool : public std::enable_shared_from_this<kv_cache_pool> {
public:
    kv_cache_pool(int n_layers, int64_t kv_dim, ggml_backend_buffer_type_t buft, size_t keep = 2)
        : n_layers_(n_layers), kv_dim_(kv_dim), buft_(buft), keep_(keep) {}

    struct give_back {
        std::shared_ptr<kv_cache_pool> pool;
        void operator()(kv_cache * c) const;
    };
    using handle = std::unique_ptr<kv_cache, give_back>;

    // A zeroed cache of at least n_ctx positions: the smallest kept one that is large enough, else
    // a kept one grown, else a new one.
    handle take(int64_t n_ctx);

private:
    int n_layers_;
    int64_t kv_dim_;
    ggml_backend_buffer_type_t buft_;
    size_t keep_;
    std::mutex m_;
    std::vector<std::unique_ptr<kv_cache>> idle_;
};

}  // namespace kazeia
