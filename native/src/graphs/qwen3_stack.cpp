#include "graphs/qwen3_stack.h"

#include <cmath>
#include <iterator>
#include <stdexcept>

#include "graphs/blocks.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "kazeia/tensor_table.h"
#include "kernels/prefill_attention.h"
#include "kernels/products.h"

namespace kazeia {

qwen3_stack::qwen3_stack(const model & m, const std::string & prefix, const transformer_hparams & hp,
                         const std::function<ggml_tensor *(ggml_tensor *)> & place, bool cpu)
    : hp_(hp), network_(prefix.substr(0, prefix.size() - 1)), cpu_(cpu) {
    auto w = [&](const std::string & name) {
        ggml_tensor * t = m.require(name, "transformer " + prefix);
        return place ? place(t) : t;
    };
    static_assert(sizeof(qwen3_layer_weights) == std::size(k_qwen3_layer_tensors) * sizeof(ggml_tensor *),
                  "qwen3_layer_weights holds k_qwen3_layer_tensors, in its order");
    for (int i = 0; i < hp.n_layers; ++i) {
        const std::string p = prefix + "blk." + std::to_string(i) + ".";
        ggml_tensor * t[std::size(k_qwen3_layer_tensors)];
        for (size_t j = 0; j < std::size(k_qwen3_layer_tensors); ++j) t[j] = w(p + k_qwen3_layer_tensors[j].gguf);
        layers_.push_back({t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10]});
    }
    output_norm_ = w(prefix + "output_norm.weight");
}

ggml_tensor * qwen3_stack::build(ggml_context * ctx, ggml_cgraph * gf, ggml_tensor * x, ggml_tensor * pos,
                                 const std::vector<attention_segment> & segments, bool per_column, bool last_row_only) const {
    const auto & t = hp_;
    const int64_t n_all = x->ne[1];
    const bool several = segments.size() > 1;
    const size_t f = sizeof(float);
    const int64_t kvd = kv_dim();
    for (const attention_segment & s : segments) {
        if (!s.cache || s.n_kv > s.cache->capacity() || s.col + s.n > n_all) throw std::logic_error("bad attention segment");
    }
    if (last_row_only && several) throw std::logic_error("last_row_only takes one sequence");
    auto mm = [&](ggml_tensor * w, ggml_tensor * a) { return product(ctx, w, a, cpu_, per_column); };
    for (size_t il = 0; il < layers_.size(); ++il) {
        const auto & l = layers_[il];
        // attention block: q/k RMS-normed per head before RoPE, as Qwen3 does
        ggml_tensor * h = rms_norm(ctx, x, l.attn_norm, t.norm_eps);
        const std::vector<ggml_tensor *> qkv = products(ctx, {l.wq, l.wk, l.wv}, h, cpu_, per_column);
        ggml_tensor * q = ggml_reshape_3d(ctx, qkv[0], t.head_dim, t.n_heads, n_all);
        ggml_tensor * k = ggml_reshape_3d(ctx, qkv[1], t.head_dim, t.n_kv_heads, n_all);
        ggml_tensor * v = qkv[2];   // [kv_dim, N]
        q = rope_neox(ctx, rms_norm(ctx, q, l.q_norm, t.norm_eps), pos, t.head_dim, t.rope_theta);
        k = rope_neox(ctx, rms_norm(ctx, k, l.k_norm, t.norm_eps), pos, t.head_dim, t.rope_theta);
        k = ggml_reshape_2d(ctx, k, kvd, n_all);
        ggml_tensor * o = nullptr;   // [hd * H, N], the segments' outputs side by side
        for (const attention_segment & s : segments) {
            // this sequence's columns (the whole tensors when it is alone)
            ggml_tensor * qs = several ? ggml_view_3d(ctx, q, t.head_dim, t.n_heads, s.n, q->nb[1], q->nb[2], s.col * q->nb[2]) : q;
            ggml_tensor * ks = several ? ggml_view_2d(ctx, k, kvd, s.n, k->nb[1], s.col * k->nb[1]) : k;
            ggml_tensor * vs = several ? ggml_view_2d(ctx, v, kvd, s.n, v->nb[1], s.col * v->nb[1]) : v;
            ggml_tensor * kc = s.cache->k(il);
            ggml_tensor * vc = s.cache->v(il);
            // keys and values stored before the reads below
            if (s.k_rows) {
                ggml_build_forward_expand(gf, ggml_set_rows(ctx, kc, ks, s.k_rows));
                // the transposed value cache as one-element rows: each value lands in its own cell
                ggml_tensor * cells = ggml_reshape_2d(ctx, vc, 1, ggml_nelements(vc));
                ggml_build_forward_expand(gf, ggml_set_rows(ctx, cells, ggml_reshape_2d(ctx, vs, 1, ggml_nelements(vs)), s.v_cells));
            } else {
                ggml_tensor * k_dst = ggml_view_2d(ctx, kc, kvd, s.n, kc->nb[1], s.pos0 * kc->nb[1]);
                ggml_tensor * v_dst = ggml_view_2d(ctx, vc, s.n, kvd, vc->nb[1], s.pos0 * sizeof(float));
                ggml_build_forward_expand(gf, ggml_cpy(ctx, ks, k_dst));
                ggml_build_forward_expand(gf, ggml_cpy(ctx, ggml_transpose(ctx, vs), v_dst));
            }
            ggml_tensor * keys = ggml_view_3d(ctx, kc, t.head_dim, s.n_kv, t.n_kv_heads, kc->nb[1], t.head_dim * f, 0);
            ggml_tensor * vals = ggml_view_3d(ctx, vc, s.n_kv, t.head_dim, t.n_kv_heads, vc->nb[1], vc->nb[1] * t.head_dim, 0);
            // a prompt's rows on the CPU: one op (kernels/prefill_attention.h)
            ggml_tensor * os = cpu_ && !per_column && !several && s.n > 1 ? prefill_attention(ctx, qs, keys, vals, s.mask)
                                                                         : nullptr;
            if (!os) os = attention(ctx, qs, keys, vals, s.mask);
            o = o ? ggml_concat(ctx, o, os, 1) : os;
        }
        if (last_row_only && il + 1 == layers_.size() && n_all > 1) {
            // every row's keys and values are stored above; past here only the last row is read
            o = ggml_view_2d(ctx, o, o->ne[0], 1, o->nb[1], (n_all - 1) * o->nb[1]);
            x = ggml_view_2d(ctx, x, x->ne[0], 1, x->nb[1], (n_all - 1) * x->nb[1]);
        }
        x = named(residual(ctx, x, mm(l.wo, o)), network_.c_str(), int(il), "attn_out");

        h = rms_norm(ctx, x, l.ffn_norm, t.norm_eps);
        const std::vector<ggml_tensor *> gate_up = products(ctx, {l.w_gate, l.w_up}, h, cpu_, per_column);
        ggml_tensor * ffn = mm(l.w_down, ggml_swiglu_split(ctx, gate_up[0], gate_up[1]));   // silu(gate) * up
        x = named(residual(ctx, x, ffn), network_.c_str(), int(il), "ffn_out");
    }
    return rms_norm(ctx, x, output_norm_, t.norm_eps);
}

std::vector<float> causal_mask(int64_t pos0, int64_t n) {
    return attention_mask(pos0, n, 0, pos0 + n, pos0 + n);
}

std::vector<float> step_mask(int64_t pos, int64_t n_kv) {
    return attention_mask(pos, 1, 0, n_kv, n_kv);
}

}  // namespace kazeia
