// The forms of Kazeia's f32-arithmetic decoder kernels: a register-ops type V for each (AVX-512 and
// AVX2 on x86-64, NEON on ARM64), each compiled for its target with the product tiles over it
// (kernels/gemm_fma_tiles.inc). Whatever a kernel computes through V's fused multiply-adds and adds
// in a fixed order comes out with the same bits in every form. Shared by the products
// (kernels/gemm_fma.cpp) and the Winograd convolutions (kernels/winograd_conv.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ggml.h"
#include "kernels/gemv_common.h"

// the forms: AVX-512 and AVX2 on x86-64, NEON on ARM64 (all give the same bits)
#if defined(KAZEIA_X86) || defined(KAZEIA_ARM64)
#define KAZEIA_FMA_PRODUCTS 1
#endif

#ifdef KAZEIA_FMA_PRODUCTS
namespace kazeia::fma_products {

constexpr int64_t k_chunk_columns = 96;
constexpr int64_t k_widen_columns = 24;   // a chunk of laid-out weights with this many columns widens them first
constexpr int64_t k_cached_weight_bytes = 256 * 1024;   // laid-out weights up to this size as f32 stay in cache whole
constexpr int64_t k_fused_weight_bytes = 2 * 1024 * 1024;   // Winograd's U up to this size stays in cache beside its tiles
constexpr int64_t k_fused_tile_bytes = 512 * 1024;   // a thread's group of Winograd tiles, transformed and multiplied
constexpr int64_t k_pairs_weight_bytes = 32 * 1024 * 1024;   // a transposed convolution's U in Winograd's F(2, 2) at most

// Where a launch's columns come from: column t's tap k starts at base + t * column_values + k *
// tap_step and holds tap_values values (one tap: the whole column; a convolution: its channels).
struct column_source {
    const float * base;
    int64_t column_values;
    int64_t tap_step;
    int taps;
    int64_t tap_values;
};

// what is added to each output: bias [rows] and residual [rows, n], either may be absent
struct output_terms {
    const float * bias;
    const float * residual;
};

struct launch {
    const ggml_tensor * w;
    column_source columns;
    output_terms add;
    float * y;
    int64_t n;
    bool laid;   // w in panels, laid out at load (fma_panels)
};

}  // namespace kazeia::fma_products
#endif  // KAZEIA_FMA_PRODUCTS

#ifdef KAZEIA_X86
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")
namespace kazeia::fma_products::avx512 {

struct V {
    static constexpr int lanes = 16, max_panels = 4, tile_columns = 6;   // 4 x 6 sums in 24 of 32 registers
    using F = __m512;
    static F zero() { return _mm512_setzero_ps(); }
    static F load(const float * p) { return _mm512_loadu_ps(p); }
    static F bcast(const float * p) { return _mm512_set1_ps(*p); }
    static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static void store(float * p, F v) { _mm512_storeu_ps(p, v); }
    template <typename T> static F widen(const T * p) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
        if constexpr (std::is_same_v<T, ggml_bf16_t>) {   // bf16: the high half of an f32
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        } else {
            return _mm512_cvtph_ps(h);
        }
    }
    static F widen(const uint8_t * p, ggml_type type) {
        return type == GGML_TYPE_F16 ? widen(reinterpret_cast<const ggml_fp16_t *>(p)) : widen(reinterpret_cast<const ggml_bf16_t *>(p));
    }
    static void pack_block(const uint8_t * rows, size_t stride, ggml_type type, float * out) {
        alignas(64) float wide[16 * 16];
        for (int r = 0; r < 16; ++r) _mm512_store_ps(wide + 16 * r, widen(rows + r * stride, type));
        __m512i v[16];
        transpose_16x16(reinterpret_cast<const uint8_t *>(wide), 64, v);
        for (int i = 0; i < 16; ++i) _mm512_storeu_si512(out + 16 * i, v[i]);
    }
};

#include "kernels/gemm_fma_tiles.inc"

}  // namespace kazeia::fma_products::avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace kazeia::fma_products::avx2 {

struct V {
    static constexpr int lanes = 8, max_panels = 2, tile_columns = 6;   // 2 x 6 sums, 2 weights, 1 column value
    using F = __m256;
    static F zero() { return _mm256_setzero_ps(); }
    static F load(const float * p) { return _mm256_loadu_ps(p); }
    static F bcast(const float * p) { return _mm256_set1_ps(*p); }
    static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static void store(float * p, F v) { _mm256_storeu_ps(p, v); }
    template <typename T> static F widen(const T * p) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
        if constexpr (std::is_same_v<T, ggml_bf16_t>) {
            return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        } else {
            return _mm256_cvtph_ps(h);
        }
    }
    static F widen(const uint8_t * p, ggml_type type) {
        return type == GGML_TYPE_F16 ? widen(reinterpret_cast<const ggml_fp16_t *>(p)) : widen(reinterpret_cast<const ggml_bf16_t *>(p));
    }
    // 8 x 8 transpose: 2 x 2 within pairs, 2 x 2 pairs within each 128-bit lane, then the lanes
    static void pack_block(const uint8_t * rows, size_t stride, ggml_type type, float * out) {
        F r[8], t[8], s[8];
        for (int i = 0; i < 8; ++i) r[i] = widen(rows + i * stride, type);
        for (int i = 0; i < 8; i += 2) {
            t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int i = 0; i < 8; i += 4) {
            s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
            s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
            s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
            s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
        }
        for (int i = 0; i < 4; ++i) {
            _mm256_storeu_ps(out + 8 * i, _mm256_permute2f128_ps(s[i], s[i + 4], 0x20));
            _mm256_storeu_ps(out + 8 * (i + 4), _mm256_permute2f128_ps(s[i], s[i + 4], 0x31));
        }
    }
};

#include "kernels/gemm_fma_tiles.inc"

}  // namespace kazeia::fma_products::avx2
#pragma GCC pop_options
#endif  // KAZEIA_X86

#ifdef KAZEIA_ARM64
namespace kazeia::fma_products::neon {

struct V {
    static constexpr int lanes = 4, max_panels = 4, tile_columns = 6;   // 4 x 6 sums in 24 of 32 registers
    using F = float32x4_t;
    static F zero() { return vdupq_n_f32(0.0f); }
    static F load(const float * p) { return vld1q_f32(p); }
    static F bcast(const float * p) { return vld1q_dup_f32(p); }
    static F fmadd(F a, F b, F c) { return vfmaq_f32(c, a, b); }   // (fused: rounded once, as on x86)
    static F add(F a, F b) { return vaddq_f32(a, b); }
    static F sub(F a, F b) { return vsubq_f32(a, b); }
    static F mul(F a, F b) { return vmulq_f32(a, b); }
    static void store(float * p, F v) { vst1q_f32(p, v); }
    template <typename T> static F widen(const T * p) {
        const uint16x4_t h = vld1_u16(reinterpret_cast<const uint16_t *>(p));
        if constexpr (std::is_same_v<T, ggml_bf16_t>) {   // bf16: the high half of an f32
            return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
        } else {
            return vcvt_f32_f16(vreinterpret_f16_u16(h));   // (FCVTL: ARMv8.0, exact)
        }
    }
    static F widen(const uint8_t * p, ggml_type type) {
        return type == GGML_TYPE_F16 ? widen(reinterpret_cast<const ggml_fp16_t *>(p)) : widen(reinterpret_cast<const ggml_bf16_t *>(p));
    }
    // 4 x 4 transpose: pairs of 32-bit values, then pairs of 64-bit halves
    static void pack_block(const uint8_t * rows, size_t stride, ggml_type type, float * out) {
        F r[4];
        for (int i = 0; i < 4; ++i) r[i] = widen(rows + i * stride, type);
        const F t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
        const F t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
        auto lo = [](F a, F b) { return vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(a), vreinterpretq_f64_f32(b))); };
        auto hi = [](F a, F b) { return vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(a), vreinterpretq_f64_f32(b))); };
        vst1q_f32(out + 0, lo(t0, t2));
        vst1q_f32(out + 4, lo(t1, t3));
        vst1q_f32(out + 8, hi(t0, t2));
        vst1q_f32(out + 12, hi(t1, t3));
    }
};

#include "kernels/gemm_fma_tiles.inc"

}  // namespace kazeia::fma_products::neon
#endif  // KAZEIA_ARM64

#ifdef KAZEIA_FMA_PRODUCTS
namespace kazeia::fma_products {

// the form this process runs: the widest the level in force allows (0: none)
inline int form_lanes() {
#ifdef KAZEIA_X86
    static const int lanes = cpu_allows(cpu_level::avx512) ? avx512::V::lanes : cpu_allows(cpu_level::avx2) ? avx2::V::lanes : 0;
#else
    static const int lanes = cpu_allows(cpu_level::neon) ? neon::V::lanes : 0;
#endif
    return lanes;
}

// fn(V{}) with the register-ops type V of the form this process runs: a generic lambda reaches that
// form's kernels by argument-dependent lookup (each takes its V first)
template <typename Fn>
inline decltype(auto) with_form(Fn && fn) {
#ifdef KAZEIA_X86
    if (form_lanes() == avx512::V::lanes) return fn(avx512::V{});
    return fn(avx2::V{});
#else
    return fn(neon::V{});
#endif
}

// this thread's share of one launch, in the form this process runs
inline void launch_share(const launch & l, int ith, int nth) {
    with_form([&](auto v) { launch_share(v, l, ith, nth); });
}

}  // namespace kazeia::fma_products
#endif  // KAZEIA_FMA_PRODUCTS
