// What Kazeia's one-column product kernels share: the CPU check, a horizontal sum, and the custom
// op that runs a kernel when it applies (a weight of its type, one f32 column, whole blocks).
#pragma once

#include <cstdint>

#include "ggml.h"
#include "kazeia/cpu_level.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KAZEIA_X86 1
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>   // (Advanced SIMD is part of every AArch64 core: no target switch needed)
#define KAZEIA_ARM64 1
#endif

namespace kazeia {

// ggml's 6-bit scale and min of sub-block j of a q5_K / q4_K block (q: its 12 scale bytes)
inline void scale_min_k4(int j, const uint8_t * q, uint8_t & sc, uint8_t & m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#ifdef KAZEIA_X86
// (the level in force: KAZEIA_CPU=generic turns every AVX2 kernel off)
inline bool cpu_has_avx2() {
    static const bool yes = cpu_allows(cpu_level::avx2);
    return yes;
}

__attribute__((target("avx2,fma,f16c"))) inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// 16 rows x 16 four-byte words -> 16 registers, word i of every row in register i (a 16 x 16
// transpose of 32-bit elements: 4 x 4 within each 128-bit lane, then 4 x 4 lanes)
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void transpose_16x16(const uint8_t * src, int64_t stride,
                                                                          __m512i * dst) {
    __m512i v[16];
    for (int g = 0; g < 4; ++g) {   // rows 4g .. 4g + 3
        const uint8_t * r = src + 4 * g * stride;
        const __m512i a = _mm512_loadu_si512(r), b = _mm512_loadu_si512(r + stride);
        const __m512i c = _mm512_loadu_si512(r + 2 * stride), d = _mm512_loadu_si512(r + 3 * stride);
        const __m512i t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
        const __m512i t2 = _mm512_unpacklo_epi32(c, d), t3 = _mm512_unpackhi_epi32(c, d);
        // v[4g + j], lane L: word 4L + j of rows 4g .. 4g + 3
        v[4 * g + 0] = _mm512_unpacklo_epi64(t0, t2);
        v[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
        v[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3);
        v[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
    }
    for (int j = 0; j < 4; ++j) {
        const __m512i x0 = _mm512_shuffle_i32x4(v[j], v[4 + j], 0x44), x1 = _mm512_shuffle_i32x4(v[j], v[4 + j], 0xEE);
        const __m512i x2 = _mm512_shuffle_i32x4(v[8 + j], v[12 + j], 0x44);
        const __m512i x3 = _mm512_shuffle_i32x4(v[8 + j], v[12 + j], 0xEE);
        dst[0 + j] = _mm512_shuffle_i32x4(x0, x2, 0x88);
        dst[4 + j] = _mm512_shuffle_i32x4(x0, x2, 0xDD);
        dst[8 + j] = _mm512_shuffle_i32x4(x1, x3, 0x88);
        dst[12 + j] = _mm512_shuffle_i32x4(x1, x3, 0xDD);
    }
}

// A column as q8_0 blocks, as ggml quantises it (scale amax / 127 kept as fp16, values rounded to
// nearest even): k values -> k int8 in q and k / 32 scales in d.
void quantize_q8_0_column(const float * x, int64_t k, int8_t * q, float * d);
#endif

// dst = w x through `op` (a ggml custom op over rows) when w is `type` [K, N] with K a multiple of
// `block`, x contiguous f32 (one column, or with `any_columns` a 2-D [K, n]) and the CPU has AVX2;
// else nullptr (use ggml_mul_mat).
inline ggml_tensor * one_column_op(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_type type,
                                   int64_t block, ggml_custom_op_t op, bool any_columns = false,
                                   void * userdata = nullptr) {
#ifndef KAZEIA_X86
    (void)ctx, (void)w, (void)x, (void)type, (void)block, (void)op, (void)any_columns, (void)userdata;
    return nullptr;
#else
    if (w->type != type || x->type != GGML_TYPE_F32 || ggml_n_dims(w) > 2 || (x->ne[1] != 1 && !any_columns) ||
        x->ne[2] != 1 || x->ne[3] != 1 || x->ne[0] != w->ne[0] || w->ne[0] % block != 0 || !ggml_is_contiguous(w) ||
        !ggml_is_contiguous(x) || !cpu_has_avx2()) {
        return nullptr;
    }
    ggml_tensor * args[] = {w, x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, 2, op, GGML_N_TASKS_MAX, userdata);
#endif
}

}  // namespace kazeia
