// Graph blocks every transformer here shares (the talker's and code predictor's Qwen3 layers, the
// speech decoder's and the audio encoder's transformers), in the shape of llama.cpp's graph
// builders: norms, rotate-half RoPE, attention and its masks, the feed-forward block, residual
// branches with LayerScale, and the names intermediates carry for dumps and profiles.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"

namespace kazeia {

// x normalised by its RMS over the first axis, times `weight`.
inline ggml_tensor * rms_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, float eps) {
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, eps), weight);
}

// x normalised over the first axis (mean and variance), times `weight`, plus `bias`.
inline ggml_tensor * layer_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias, float eps) {
    return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, eps), weight), bias);
}

// The feed-forward block: down(act(gate x) * up x) when gated (SwiGLU: act = silu), else
// down(act(up x)); `mm` makes the products (ggml_mul_mat, or a stage's own). (The Qwen3 stack makes
// its gate and up products in one op that reads x once, and joins them with ggml_swiglu_split.)
enum class ffn_activation { silu, gelu_erf };

template <typename Product>
ggml_tensor * feed_forward(ggml_context * ctx, ggml_tensor * x, ggml_tensor * up, ggml_tensor * gate, ggml_tensor * down,
                           ffn_activation act, const Product & mm) {
    auto activate = [&](ggml_tensor * t) { return act == ffn_activation::silu ? ggml_silu(ctx, t) : ggml_gelu_erf(ctx, t); };
    ggml_tensor * h = gate ? activate(mm(ctx, gate, x)) : nullptr;   // (made first: the graph's order fixed)
    ggml_tensor * u = mm(ctx, up, x);
    return mm(ctx, down, gate ? ggml_mul(ctx, h, u) : activate(u));
}

// x + branch, the branch scaled per channel first when the network has a LayerScale (else null).
inline ggml_tensor * residual(ggml_context * ctx, ggml_tensor * x, ggml_tensor * branch, ggml_tensor * scale = nullptr) {
    return ggml_add(ctx, x, scale ? ggml_mul(ctx, branch, scale) : branch);
}

// Names an intermediate "<network>.blk.<layer>.<what>" (llama.cpp's cb(cur, name, il)), so dumps and
// node profiles can tell every layer's tensors apart.
inline ggml_tensor * named(ggml_tensor * t, const char * network, int layer, const char * what) {
    ggml_format_name(t, "%s.blk.%d.%s", network, layer, what);
    return t;
}

// Rotate-half (NEOX) RoPE of x [head_dim, heads, n] at positions `pos` (I32 [n]).
inline ggml_tensor * rope_neox(ggml_context * ctx, ggml_tensor * x, ggml_tensor * pos, int head_dim, float theta) {
    return ggml_rope_ext(ctx, x, pos, nullptr, head_dim, GGML_ROPE_TYPE_NEOX, 0, theta, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
}

// softmax(q k / sqrt(head_dim) + mask) v for q [hd, H, n], keys [hd, n_kv, Hkv] and values
// [n_kv, hd, Hkv] (head-major; H a multiple of Hkv: grouped-query heads share theirs), mask
// [n_kv, n] -> [hd * H, n]. `mm` makes the two products (ggml_mul_mat, or a stage's own).
template <typename Product>
ggml_tensor * attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * keys, ggml_tensor * values,
                        ggml_tensor * mask, const Product & mm) {
    const int64_t hd = q->ne[0], heads = q->ne[1], n = q->ne[2];
    ggml_tensor * kq = mm(ctx, keys, ggml_permute(ctx, q, 0, 2, 1, 3));                 // [n_kv, n, H]
    kq = ggml_soft_max_ext(ctx, kq, mask, 1.0f / std::sqrt(float(hd)), 0.0f);
    ggml_tensor * kqv = mm(ctx, values, kq);                                           // [hd, n, H]
    ggml_tensor * o = ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3));             // [hd, H, n]
    return ggml_reshape_2d(ctx, o, hd * heads, n);
}

inline ggml_tensor * attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * keys, ggml_tensor * values,
                               ggml_tensor * mask) {
    return attention(ctx, q, keys, values, mask, ggml_mul_mat);
}

// The mask of n queries at positions q0, q0 + 1, ... over n_kv keys, key j at position k0 + j: 0 where
// the query may see the key (the key is one of the first `valid`, at a position >= 0, not after the
// query and, when window > 0, fewer than `window` positions before it), -inf elsewhere. [n][n_kv]
inline std::vector<float> attention_mask(int64_t q0, int64_t n, int64_t k0, int64_t n_kv, int64_t valid,
                                         int64_t window = 0) {
    std::vector<float> mask(size_t(n_kv) * size_t(n));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t qp = q0 + i;
        for (int64_t j = 0; j < n_kv; ++j) {
            const int64_t kp = k0 + j;
            const bool seen = j < valid && kp >= 0 && kp <= qp && (window <= 0 || qp - kp < window);
            mask[size_t(i) * size_t(n_kv) + size_t(j)] = seen ? 0.0f : -INFINITY;
        }
    }
    return mask;
}

}  // namespace kazeia
