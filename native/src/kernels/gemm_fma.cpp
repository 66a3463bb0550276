#include "kernels/gemm_fma.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/conv_launch.h"
#include "kernels/gemv_common.h"

// the forms: AVX-512 and AVX2 on x86-64, NEON on ARM64 (all give the same bits)
#if defined(KAZEIA_X86) || defined(KAZEIA_ARM64)
#define KAZEIA_FMA_PRODUCTS 1
#endif

#ifdef KAZEIA_FMA_PRODUCTS
namespace kazeia::fma_products {

constexpr int64_t k_chunk_columns = 96;
constexpr int64_t k_widen_columns = 24;   // a chunk of laid-out weights with this many columns widens them first

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

namespace kazeia {
namespace {

#ifdef KAZEIA_FMA_PRODUCTS
using namespace fma_products;

// the form this process runs: the widest the level in force allows (0: none)
int form_lanes() {
#ifdef KAZEIA_X86
    static const int lanes = cpu_allows(cpu_level::avx512) ? avx512::V::lanes : cpu_allows(cpu_level::avx2) ? avx2::V::lanes : 0;
#else
    static const int lanes = cpu_allows(cpu_level::neon) ? neon::V::lanes : 0;
#endif
    return lanes;
}

// whole groups of 16 rows and values in every form, so that all multiply the same weights (the
// narrower forms read 16 rows as two registers of 8 or four of 4)
bool shape_applies(ggml_type type, int64_t row, int64_t rows) {
    constexpr int64_t lanes = 16;
    return form_lanes() && (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) && rows % lanes == 0 && row % lanes == 0;
}

bool weight_applies(const ggml_tensor * w, int64_t row) {
    return shape_applies(w->type, row, w->ne[ggml_n_dims(w) - 1]) && ggml_is_contiguous(w);
}

// What a tensor laid out in panels has in its `extra` (as the lanes layout marks its own), and
// what a launch over one is handed as its userdata: a view (the 2-D reshape of a convolution's
// kernel) does not carry `extra`.
constexpr char k_panels_mark[] = "kazeia f32-product panels";
void * panels_userdata(const ggml_tensor * w) { return w->extra == k_panels_mark ? const_cast<char *>(k_panels_mark) : nullptr; }

// src: [w, x, bias?, residual?]; x f32 [C, T] read in place, taps = the weight's row / C
void product_op(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t n = dst->ne[1], channels = x->ne[0];
    const int taps = int(w->ne[0] / channels);
    const int64_t dilation = taps > 1 ? (x->ne[1] - n) / (taps - 1) : 0;
    const launch l{w,
                   {static_cast<const float *>(x->data), channels, dilation * channels, taps, channels},
                   {dst->src[2] ? static_cast<const float *>(dst->src[2]->data) : nullptr,
                    dst->src[3] ? static_cast<const float *>(dst->src[3]->data) : nullptr},
                   static_cast<float *>(dst->data),
                   n,
                   userdata == k_panels_mark};
#ifdef KAZEIA_X86
    if (form_lanes() == avx512::V::lanes) {
        avx512::launch_share(l, ith, nth);
    } else {
        avx2::launch_share(l, ith, nth);
    }
#else
    neon::launch_share(l, ith, nth);
#endif
}
#endif  // KAZEIA_FMA_PRODUCTS

}  // namespace

bool gemm_fma_available() {
#ifdef KAZEIA_FMA_PRODUCTS
    return form_lanes() > 0;
#else
    return false;
#endif
}

ggml_tensor * gemm_fma(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
#ifdef KAZEIA_FMA_PRODUCTS
    if (ggml_n_dims(w) > 2 || !weight_applies(w, w->ne[0])) return nullptr;
    if (!ggml_is_contiguous(x)) x = ggml_cont(ctx, x);
    if (x->type != GGML_TYPE_F32 || x->ne[0] != w->ne[0] || x->ne[2] != 1 || x->ne[3] != 1) return nullptr;
    ggml_tensor * args[] = {w, x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, 2, product_op, GGML_N_TASKS_MAX,
                          panels_userdata(w));
#else
    (void)ctx, (void)w, (void)x;
    return nullptr;
#endif
}

bool conv_fma_applies(const ggml_tensor * w, int64_t channels) {
#ifdef KAZEIA_FMA_PRODUCTS
    const int64_t rows = w->ne[ggml_n_dims(w) - 1], row = ggml_nelements(w) / rows;
    return weight_applies(w, row) && row % channels == 0;
#else
    (void)w, (void)channels;
    return false;
#endif
}

ggml_tensor * conv_fma(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, int dilation, ggml_tensor * bias,
                       ggml_tensor * residual) {
    GGML_ASSERT(conv_fma_applies(w, x->ne[0]) && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x));
#ifdef KAZEIA_FMA_PRODUCTS
    return causal_conv_op(ctx, w, x, dilation, bias, residual, product_op, panels_userdata(w));
#else
    (void)ctx, (void)dilation, (void)bias, (void)residual;
    return nullptr;   // (never reached: nothing applies)
#endif
}

bool is_fma_product(const ggml_tensor * t) {
#ifdef KAZEIA_FMA_PRODUCTS
    if (t->op != GGML_OP_CUSTOM) return false;
    ggml_custom_op_t fun;
    std::memcpy(&fun, t->op_params, sizeof fun);   // ggml_custom_4d's parameters begin with the function
    return fun == product_op;
#else
    (void)t;
    return false;
#endif
}

bool fma_panels_apply(ggml_type type, int64_t row, int64_t rows) {
#ifdef KAZEIA_FMA_PRODUCTS
    return shape_applies(type, row, rows);
#else
    (void)type, (void)row, (void)rows;
    return false;
#endif
}

std::vector<uint8_t> fma_panels(const std::vector<uint8_t> & bytes, ggml_type type, int64_t row, int64_t rows) {
#ifdef KAZEIA_FMA_PRODUCTS
    if (!fma_panels_apply(type, row, rows) || bytes.size() != size_t(row * rows) * 2) {
        throw std::invalid_argument("fma_panels: not a weight the f32 products lay out");
    }
#ifdef KAZEIA_X86
    return form_lanes() == avx512::V::lanes ? avx512::panels_of(bytes.data(), row, rows)
                                            : avx2::panels_of(bytes.data(), row, rows);
#else
    return neon::panels_of(bytes.data(), row, rows);
#endif
#else
    (void)bytes, (void)type, (void)row, (void)rows;
    throw std::invalid_argument("fma_panels: no f32 products on this CPU");
#endif
}

void mark_fma_panels(ggml_tensor * w) {
#ifdef KAZEIA_FMA_PRODUCTS
    w->extra = const_cast<char *>(k_panels_mark);
#else
    (void)w;
#endif
}

}  // namespace kazeia
