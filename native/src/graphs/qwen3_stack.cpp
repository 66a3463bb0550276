#include "graphs/qwen3_stack.h"

#include <cmath>
#include <stdexcept>

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "runtime/gemv_q8_0.h"

namespace kazeia {

qwen3_stack::qwen3_stack(const model & m, const std::string & prefix, const transformer_hparams & hp,
                         const std::function<ggml_tensor *(ggml_tensor *)> & place, bool cpu,
                         ggml_backend_buffer_type_t cache_buft)
    : hp_(hp), cpu_(cpu), cache_buft_(cache_buft) {
    auto w = [&](const std::string & name) {
        ggml_tensor * t = m.tensor(name);
        if (!t) throw model_error("missing tensor " + name);
        return place ? place(t) : t;
    };
    for (int i = 0; i < hp.n_layers; ++i) {
        const std::string p = prefix + "blk." + std::to_string(i) + ".";
        layers_.push_back({w(p + "attn_norm.weight"), w(p + "attn_q.weight"), w(p + "attn_k.weight"),
                           w(p + "attn_v.weight"), w(p + "attn_output.weight"), w(p + "attn_q_norm.weight"),
                           w(p + "attn_k_norm.weight"), w(p + "ffn_norm.weight"), w(p + "ffn_gate.weight"),
                           w(p + "ffn_up.weight"), w(p + "ffn_down.weight")});
    }
    output_norm_ = w(prefix + "output_norm.weight");
}

qwen3_stack::~qwen3_stack() {
    if (cache_buf_) ggml_backend_buffer_free(cache_buf_);
    if (cache_ctx_) ggml_free(cache_ctx_);
}

void qwen3_stack::reserve(int64_t n_ctx) {
    if (n_ctx <= n_ctx_) return;
    if (cache_buf_) ggml_backend_buffer_free(cache_buf_);
    if (cache_ctx_) ggml_free(cache_ctx_);
    k_cache_.clear();
    v_cache_.clear();
    ggml_init_params params{ggml_tensor_overhead() * (2 * layers_.size() + 1), nullptr, true};
    cache_ctx_ = ggml_init(params);
    const int64_t kv_dim = int64_t(hp_.n_kv_heads) * hp_.head_dim;
    for (size_t i = 0; i < layers_.size(); ++i) {
        k_cache_.push_back(ggml_new_tensor_2d(cache_ctx_, GGML_TYPE_F32, kv_dim, n_ctx));
        v_cache_.push_back(ggml_new_tensor_2d(cache_ctx_, GGML_TYPE_F32, n_ctx, kv_dim));
    }
    cache_buf_ = ggml_backend_alloc_ctx_tensors_from_buft(cache_ctx_, cache_buft_ ? cache_buft_ : ggml_backend_cpu_buffer_type());
    if (!cache_buf_) {
        n_ctx_ = 0;
        throw std::runtime_error("cannot allocate a KV cache of " + std::to_string(n_ctx) + " positions");
    }
    ggml_backend_buffer_clear(cache_buf_, 0);
    n_ctx_ = n_ctx;
}

template <typename Store>
ggml_tensor * qwen3_stack::build_layers(ggml_context * ctx, ggml_tensor * x, ggml_tensor * pos,
                                        ggml_tensor * mask, int64_t n_kv, const Store & store) const {
    const auto & t = hp_;
    const int64_t n = x->ne[1];
    if (n_kv > n_ctx_) throw std::logic_error("KV cache too small");
    const size_t f = sizeof(float);
    for (size_t il = 0; il < layers_.size(); ++il) {
        const auto & l = layers_[il];
        // attention block: q/k RMS-normed per head before RoPE, as Qwen3 does
        ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, x, t.norm_eps), l.attn_norm);
        ggml_tensor * q = ggml_reshape_3d(ctx, product(ctx, l.wq, h, cpu_), t.head_dim, t.n_heads, n);
        ggml_tensor * k = ggml_reshape_3d(ctx, product(ctx, l.wk, h, cpu_), t.head_dim, t.n_kv_heads, n);
        ggml_tensor * v = product(ctx, l.wv, h, cpu_);   // [kv_dim, n]
        q = ggml_mul(ctx, ggml_rms_norm(ctx, q, t.norm_eps), l.q_norm);
        k = ggml_mul(ctx, ggml_rms_norm(ctx, k, t.norm_eps), l.k_norm);
        q = ggml_rope_ext(ctx, q, pos, nullptr, t.head_dim, GGML_ROPE_TYPE_NEOX, 0, t.rope_theta, 1.0f, 0.0f, 1.0f,
                          0.0f, 0.0f);
        k = ggml_rope_ext(ctx, k, pos, nullptr, t.head_dim, GGML_ROPE_TYPE_NEOX, 0, t.rope_theta, 1.0f, 0.0f, 1.0f,
                          0.0f, 0.0f);
        ggml_tensor * kc = k_cache_[il];
        ggml_tensor * vc = v_cache_[il];
        store(ggml_reshape_2d(ctx, k, kv_dim(), n), v, kc, vc);   // expanded before the reads below

        ggml_tensor * keys = ggml_view_3d(ctx, kc, t.head_dim, n_kv, t.n_kv_heads, kc->nb[1], t.head_dim * f, 0);
        ggml_tensor * vals = ggml_view_3d(ctx, vc, n_kv, t.head_dim, t.n_kv_heads, vc->nb[1], vc->nb[1] * t.head_dim, 0);
        ggml_tensor * qp = ggml_permute(ctx, q, 0, 2, 1, 3);                           // [hd, n, H]
        ggml_tensor * kq = ggml_mul_mat(ctx, keys, qp);                                // [n_kv, n, H]
        kq = ggml_soft_max_ext(ctx, kq, mask, 1.0f / std::sqrt(float(t.head_dim)), 0.0f);
        ggml_tensor * kqv = ggml_mul_mat(ctx, vals, kq);                               // [hd, n, H]
        ggml_tensor * o = ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3));          // [hd, H, n]
        o = product(ctx, l.wo, ggml_reshape_2d(ctx, o, int64_t(t.head_dim) * t.n_heads, n), cpu_);
        x = ggml_add(ctx, x, o);

        h = ggml_mul(ctx, ggml_rms_norm(ctx, x, t.norm_eps), l.ffn_norm);
        ggml_tensor * gate = ggml_silu(ctx, product(ctx, l.w_gate, h, cpu_));
        ggml_tensor * up = product(ctx, l.w_up, h, cpu_);
        x = ggml_add(ctx, x, product(ctx, l.w_down, ggml_mul(ctx, gate, up), cpu_));
    }
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, t.norm_eps), output_norm_);
}

ggml_tensor * qwen3_stack::build(ggml_context * ctx, ggml_cgraph * gf, ggml_tensor * x, ggml_tensor * pos,
                                 ggml_tensor * mask, int64_t pos0) const {
    const int64_t n = x->ne[1];
    auto store = [&](ggml_tensor * k, ggml_tensor * v, ggml_tensor * kc, ggml_tensor * vc) {
        ggml_tensor * k_dst = ggml_view_2d(ctx, kc, kv_dim(), n, kc->nb[1], pos0 * kc->nb[1]);
        ggml_tensor * v_dst = ggml_view_2d(ctx, vc, n, kv_dim(), vc->nb[1], pos0 * sizeof(float));
        ggml_build_forward_expand(gf, ggml_cpy(ctx, k, k_dst));
        ggml_build_forward_expand(gf, ggml_cpy(ctx, ggml_transpose(ctx, v), v_dst));
    };
    return build_layers(ctx, x, pos, mask, pos0 + n, store);
}

ggml_tensor * qwen3_stack::build_indexed(ggml_context * ctx, ggml_cgraph * gf, ggml_tensor * x, ggml_tensor * pos,
                                         ggml_tensor * mask, ggml_tensor * k_rows, ggml_tensor * v_cells,
                                         int64_t n_kv) const {
    auto store = [&](ggml_tensor * k, ggml_tensor * v, ggml_tensor * kc, ggml_tensor * vc) {
        ggml_build_forward_expand(gf, ggml_set_rows(ctx, kc, k, k_rows));
        // the transposed value cache as one-element rows: each value lands in its own cell
        ggml_tensor * cells = ggml_reshape_2d(ctx, vc, 1, ggml_nelements(vc));
        ggml_build_forward_expand(gf, ggml_set_rows(ctx, cells, ggml_reshape_2d(ctx, v, 1, ggml_nelements(v)), v_cells));
    };
    return build_layers(ctx, x, pos, mask, n_kv, store);
}

std::vector<int64_t> qwen3_stack::value_cells(int64_t pos0, int64_t n) const {
    std::vector<int64_t> cells(size_t(n * kv_dim()));
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t d = 0; d < kv_dim(); ++d) cells[size_t(i * kv_dim() + d)] = pos0 + i + d * n_ctx_;
    }
    return cells;
}

std::vector<float> causal_mask(int64_t pos0, int64_t n) {
    const int64_t n_kv = pos0 + n;
    std::vector<float> mask(size_t(n_kv) * n);
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n_kv; ++j) mask[size_t(i) * n_kv + j] = j <= pos0 + i ? 0.0f : -INFINITY;
    }
    return mask;
}

}  // namespace kazeia
