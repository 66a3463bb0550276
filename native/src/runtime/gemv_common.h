// What Kazeia's one-column product kernels share: the CPU check, a horizontal sum, and the custom
// op that runs a kernel when it applies (a weight of its type, one f32 column, whole blocks).
#pragma once

#include <cstdint>

#include "ggml.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KAZEIA_X86 1
#endif

namespace kazeia {

#ifdef KAZEIA_X86
inline bool cpu_has_avx2() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                            __builtin_cpu_supports("f16c");
    return yes;
}

__attribute__((target("avx2,fma,f16c"))) inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// A column as q8_0 blocks, as ggml quantises it (scale amax / 127 kept as fp16, values rounded to
// nearest even): k values -> k int8 in q and k / 32 scales in d.
void quantize_q8_0_column(const float * x, int64_t k, int8_t * q, float * d);
#endif

// dst = w x through `op` (a ggml custom op over rows) when w is `type` [K, N] with K a multiple of
// `block`, x contiguous f32 (one column, or with `any_columns` a 2-D [K, n]) and the CPU has AVX2;
// else nullptr (use ggml_mul_mat).
inline ggml_tensor * one_column_op(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_type type,
                                   int64_t block, ggml_custom_op_t op, bool any_columns = false) {
#ifndef KAZEIA_X86
    (void)ctx, (void)w, (void)x, (void)type, (void)block, (void)op, (void)any_columns;
    return nullptr;
#else
    if (w->type != type || x->type != GGML_TYPE_F32 || ggml_n_dims(w) > 2 || (x->ne[1] != 1 && !any_columns) ||
        x->ne[2] != 1 || x->ne[3] != 1 || x->ne[0] != w->ne[0] || w->ne[0] % block != 0 || !ggml_is_contiguous(w) ||
        !ggml_is_contiguous(x) || !cpu_has_avx2()) {
        return nullptr;
    }
    ggml_tensor * args[] = {w, x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, 2, op, GGML_N_TASKS_MAX, nullptr);
#endif
}

}  // namespace kazeia
