// Qwen3 decoder layers (RMSNorm, q/k norm, rotate-half RoPE, GQA, SwiGLU) with a KV cache in a
// backend buffer: the body of both the talker (28 layers) and the code predictor (5 layers).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "kazeia/hparams.h"

namespace kazeia {

class model;

struct qwen3_layer_weights {
    ggml_tensor *attn_norm, *wq, *wk, *wv, *wo, *q_norm, *k_norm, *ffn_norm, *w_gate, *w_up, *w_down;
};

class qwen3_stack {
public:
    // prefix: "talker." or "cp."; binds <prefix>blk.N.* and <prefix>output_norm.weight;
    // `place` may swap a weight for a copy elsewhere (runtime/weight_copies.h: a faster layout, an
    // accelerator's memory); `cpu`: the stage computes on the CPU backend, so one-column products
    // may use Kazeia's kernel; `cache_buft`: where the KV cache lives (null: CPU memory)
    qwen3_stack(const model & m, const std::string & prefix, const transformer_hparams & hp,
                const std::function<ggml_tensor *(ggml_tensor *)> & place = {}, bool cpu = false,
                ggml_backend_buffer_type_t cache_buft = nullptr);
    ~qwen3_stack();
    qwen3_stack(const qwen3_stack &) = delete;
    qwen3_stack & operator=(const qwen3_stack &) = delete;

    // (Re)allocates the KV cache for `n_ctx` positions (keeps it when large enough).
    void reserve(int64_t n_ctx);
    int64_t capacity() const { return n_ctx_; }

    // x: [hidden, n] rows at positions [pos0, pos0 + n); pos: I32 [n]; mask: F32 [pos0 + n, n].
    // Writes the rows' keys and values into the cache and returns the final-norm hidden states.
    ggml_tensor * build(ggml_context * ctx, ggml_cgraph * gf, ggml_tensor * x, ggml_tensor * pos, ggml_tensor * mask,
                        int64_t pos0) const;

    // The same for a graph reused at any position: the cache rows come from inputs, not from the
    // graph's shape. k_rows: I64 [n] (positions); v_cells: I64 [n * kv_dim] (value_cells());
    // mask: F32 [n_kv, n] over keys [0, n_kv), n_kv fixed when the graph is built.
    ggml_tensor * build_indexed(ggml_context * ctx, ggml_cgraph * gf, ggml_tensor * x, ggml_tensor * pos,
                                ggml_tensor * mask, ggml_tensor * k_rows, ggml_tensor * v_cells, int64_t n_kv) const;
    // Cells of the transposed value cache that positions [pos0, pos0 + n) write, row by row.
    std::vector<int64_t> value_cells(int64_t pos0, int64_t n) const;
    int64_t kv_dim() const { return int64_t(hp_.n_kv_heads) * hp_.head_dim; }

    const transformer_hparams & hparams() const { return hp_; }

private:
    // one layer reading keys [0, n_kv) of the cache, after `store` wrote this call's keys and values
    template <typename Store>
    ggml_tensor * build_layers(ggml_context * ctx, ggml_tensor * x, ggml_tensor * pos,
                               ggml_tensor * mask, int64_t n_kv, const Store & store) const;

    transformer_hparams hp_;
    bool cpu_ = false;
    ggml_backend_buffer_type_t cache_buft_ = nullptr;
    std::vector<qwen3_layer_weights> layers_;
    ggml_tensor * output_norm_ = nullptr;
    ggml_context * cache_ctx_ = nullptr;
    ggml_backend_buffer_t cache_buf_ = nullptr;
    std::vector<ggml_tensor *> k_cache_;   // [kv_dim, n_ctx]
    std::vector<ggml_tensor *> v_cache_;   // [n_ctx, kv_dim]: values stored transposed for the product
    int64_t n_ctx_ = 0;
};

// Causal mask rows for n queries at positions [pos0, pos0 + n) over keys [0, pos0 + n).
std::vector<float> causal_mask(int64_t pos0, int64_t n);

}  // namespace kazeia
