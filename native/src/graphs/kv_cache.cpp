#include "graphs/kv_cache.h"

#include <atomic>
#include <stdexcept>
#include <string>

#include "ggml-cpu.h"

namespace kazeia {

kv_cache::kv_cache(int n_layers, int64_t kv_dim, ggml_backend_buffer_type_t buft)
    : n_layers_(n_layers), kv_dim_(kv_dim), buft_(buft) {}

kv_cache::~kv_cache() {
    if (buf_) ggml_backend_buffer_free(buf_);
    if (ctx_) ggml_free(ctx_);
}

void kv_cache::reserve(int64_t n_ctx) {
    if (n_ctx <= n_ctx_) return;
    n_ctx = (n_ctx + k_bucket - 1) / k_bucket * k_bucket;
    if (buf_) ggml_backend_buffer_free(buf_);
    if (ctx_) ggml_free(ctx_);
    buf_ = nullptr;
    k_.clear();
    v_.clear();
    n_ctx_ = 0;
    ggml_init_params params{ggml_tensor_overhead() * (2 * size_t(n_layers_) + 1), nullptr, true};
    ctx_ = ggml_init(params);
    for (int i = 0; i < n_layers_; ++i) {
        k_.push_back(ggml_new_tensor_2d(ctx_, GGML_TYPE_F32, kv_dim_, n_ctx));
        v_.push_back(ggml_new_tensor_2d(ctx_, GGML_TYPE_F32, n_ctx, kv_dim_));
    }
    buf_ = ggml_backend_alloc_ctx_tensors_from_buft(ctx_, buft_ ? buft_ : ggml_backend_cpu_buffer_type());
    if (!buf_) throw std::runtime_error("cannot allocate a KV cache of " + std::to_string(n_ctx) + " positions");
    ggml_backend_buffer_clear(buf_, 0);
    n_ctx_ = n_ctx;
    static std::atomic<uint64_t> allocations{0};
    id_ = ++allocations;
}

size_t kv_cache::bytes() const { return buf_ ? ggml_backend_buffer_get_size(buf_) : 0; }

std::vector<int64_t> kv_cache::value_cells(int64_t pos0, int64_t n) const {
    std::vector<int64_t> cells(size_t(n * kv_dim_));
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t d = 0; d < kv_dim_; ++d) cells[size_t(i * kv_dim_ + d)] = pos0 + i + d * n_ctx_;
    }
    return cells;
}

}  // namespace kazeia
