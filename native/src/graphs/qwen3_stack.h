// Qwen3 decoder layers (RMSNorm, q/k norm, rotate-half RoPE, GQA, SwiGLU): the body of both the
// talker (28 layers) and the code predictor (5 layers). Weights only: each sequence's keys and
// values live in its own kv_cache, passed to every build, so one set of weights serves many
// sessions, and one launch can advance several sequences (each product reads the weights once).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "graphs/kv_cache.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "kazeia/hparams.h"

namespace kazeia {

class model;

// In the order of k_qwen3_layer_tensors (kazeia/tensor_table.h).
struct qwen3_layer_weights {
    ggml_tensor *attn_norm, *wq, *wk, *wv, *wo, *q_norm, *k_norm, *ffn_norm, *w_gate, *w_up, *w_down;
};

// One sequence's rows within a launch: columns [col, col + n) of the input, attending over keys
// [0, n_kv) of its own cache through `mask` (F32 [n_kv, n]). Its keys and values are written at
// positions [pos0, pos0 + n) (a graph built for those positions), or, when k_rows (I64 [n]) and
// v_cells (I64 [n * kv_dim], kv_cache::value_cells) are given, where those inputs say (a graph
// reused at any position).
struct attention_segment {
    kv_cache * cache = nullptr;
    int64_t col = 0, n = 1;
    ggml_tensor * mask = nullptr;
    int64_t n_kv = 0;
    int64_t pos0 = 0;
    ggml_tensor * k_rows = nullptr;
    ggml_tensor * v_cells = nullptr;
};

class qwen3_stack {
public:
    // prefix: "talker." or "cp."; binds <prefix>blk.N.* and <prefix>output_norm.weight;
    // `place` may swap a weight for a copy elsewhere (weights/weight_copies.h: a faster layout, an
    // accelerator's memory); `cpu`: the stage computes on the CPU backend, so products may use
    // Kazeia's kernels
    qwen3_stack(const model & m, const std::string & prefix, const transformer_hparams & hp,
                const std::function<ggml_tensor *(ggml_tensor *)> & place = {}, bool cpu = false);

    // x: [hidden, N] with N = the segments' rows; pos: I32 [N]. Writes every segment's keys and
    // values into its cache and returns the final-norm hidden states [hidden, N]. `per_column`:
    // every product gives each column exactly what it gives that column alone (one-column
    // arithmetic), so a sequence's numbers do not depend on what shares its launch; a launch that
    // may be batched, and the same launch alone, must both ask for it. Without it, several columns
    // of one sequence (a prompt) take the fastest multi-column product. `last_row_only` (one
    // segment): returns [hidden, 1], the last row's state; the last layer's output projection and
    // MLP run on that row alone (a prompt's other rows only feed the cache).
    ggml_tensor * build(ggml_context * ctx, ggml_cgraph * gf, ggml_tensor * x, ggml_tensor * pos,
                        const std::vector<attention_segment> & segments, bool per_column,
                        bool last_row_only = false) const;

    int n_layers() const { return int(layers_.size()); }
    int64_t kv_dim() const { return int64_t(hp_.n_kv_heads) * hp_.head_dim; }
    const transformer_hparams & hparams() const { return hp_; }

private:
    transformer_hparams hp_;
    std::string network_;   // "talker" or "cp": the names its intermediates carry
    bool cpu_ = false;
    std::vector<qwen3_layer_weights> layers_;
    ggml_tensor * output_norm_ = nullptr;
};

// Causal mask rows for n queries at positions [pos0, pos0 + n) over keys [0, pos0 + n).
std::vector<float> causal_mask(int64_t pos0, int64_t n);
// One query at `pos` over keys [0, n_kv): the rest masked out.
std::vector<float> step_mask(int64_t pos, int64_t n_kv);

}  // namespace kazeia
