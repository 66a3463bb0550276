#include "kernels/gemm_bf16.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv_launch.h"
#include "kernels/gemv_common.h"

namespace kazeia {
namespace {

#ifdef KAZEIA_X86
constexpr int64_t k_lanes = 16;
constexpr int k_max_panels = 4;        // 64 rows per tile
constexpr int k_tile_columns = 6;      // 4 x 6 accumulators
constexpr int64_t k_chunk_columns = 96;

bool cpu_has_bf16() {
    static const bool yes = cpu_allows(cpu_level::avx512, {"avx512bf16"});
    return yes;
}

struct scratch {
    std::vector<uint32_t> panels;    // per panel [K / 2][16]: two bf16 of one row per word
    std::vector<uint32_t> columns;   // per column [K / 2]
    int64_t tile = -1;
};

// rows [r0, r0 + 16 n_panels) of w into lanes
__attribute__((target("avx512f,avx512bw,avx512vl")))
void pack_tile(const ggml_tensor * w, int64_t r0, int n_panels, scratch & t) {
    const int64_t k = w->ne[0], pairs = k / 2;
    t.panels.resize(size_t(k_max_panels * pairs * k_lanes));
    for (int p = 0; p < n_panels; ++p) {
        const auto * rows = static_cast<const uint8_t *>(w->data) + (r0 + p * k_lanes) * w->nb[1];
        auto * out = reinterpret_cast<__m512i *>(t.panels.data() + p * pairs * k_lanes);
        for (int64_t q0 = 0; q0 < pairs; q0 += 16) {   // 16 words (32 values) of 16 rows at a time
            __m512i v[16];
            transpose_16x16(rows + 4 * q0, w->nb[1], v);
            for (int i = 0; i < 16; ++i) _mm512_storeu_si512(out + q0 + i, v[i]);
        }
    }
}

// f32 -> bf16 (round to nearest even), the one conversion every column goes through
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
void convert_bf16(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
        _mm512_storeu_si512(y + i, reinterpret_cast<const __m512i &>(b));
    }
    if (i < n) {
        const __mmask16 lo = _cvtu32_mask16(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1);
        const __mmask16 hi = _cvtu32_mask16(n - i <= 16 ? 0u : (1u << (n - i - 16)) - 1);
        const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + i + 16), _mm512_maskz_loadu_ps(lo, x + i));
        _mm512_mask_storeu_epi16(y + i, _cvtu32_mask32((1u << (n - i)) - 1),
                                 reinterpret_cast<const __m512i &>(b));
    }
}

// columns [c0, c0 + n) of x as bf16 pairs; with taps, column t is x[:, t + k * dilation] for k in
// order (a causal convolution's im2col column, made here instead of in memory)
void pack_columns(const ggml_tensor * x, int64_t c0, int64_t n, int taps, int64_t dilation, scratch & t) {
    const int64_t channels = x->ne[0], pairs = taps * channels / 2;
    t.columns.resize(size_t(n * pairs));
    for (int64_t c = 0; c < n; ++c) {
        auto * dst = reinterpret_cast<uint16_t *>(t.columns.data() + c * pairs);
        for (int k = 0; k < taps; ++k) {
            const auto * src = reinterpret_cast<const float *>(static_cast<const char *>(x->data) +
                                                               (c0 + c + k * dilation) * x->nb[1]);
            convert_bf16(src, dst + k * channels, channels);
        }
    }
}

// Where a tile's columns come from: columns packed from f32 (one tap), or a bf16 tensor read in
// place, column t's tap k being x[:, t + k * dilation] (a causal convolution without im2col).
struct column_source {
    const uint32_t * base;
    int64_t column_words;   // words from one column to the next
    int64_t tap_words;      // words from one tap to the next
    int taps;
    int64_t tap_pairs;      // pairs of values per tap (the weight row holds taps x tap_pairs)
};

// what is added to each output: bias [rows] and residual [rows, n], either may be absent
struct output_terms {
    const float * bias;
    const float * residual;
};

template <int C, int P>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
void tile_product(const scratch & t, const column_source & src, int64_t c, float * y, int64_t rows, int64_t r0,
                  const output_terms & add) {
    const int64_t pairs = int64_t(src.taps) * src.tap_pairs;
    __m512 acc[P][C];
    for (int p = 0; p < P; ++p) {
        for (int j = 0; j < C; ++j) acc[p][j] = _mm512_setzero_ps();
    }
    // taps in order, pairs in order within a tap: the order of one flat (im2col) row
    for (int tap = 0; tap < src.taps; ++tap) {
        const uint32_t * w[P];
        const uint32_t * x[C];
        for (int p = 0; p < P; ++p) w[p] = t.panels.data() + (p * pairs + tap * src.tap_pairs) * k_lanes;
        for (int j = 0; j < C; ++j) x[j] = src.base + (c + j) * src.column_words + tap * src.tap_words;
        for (int64_t i = 0; i < src.tap_pairs; ++i) {
            __m512bh wv[P];
            for (int p = 0; p < P; ++p) {
                const __m512i raw = _mm512_loadu_si512(w[p] + i * k_lanes);
                wv[p] = reinterpret_cast<const __m512bh &>(raw);
            }
            for (int j = 0; j < C; ++j) {
                const __m512i xb = _mm512_set1_epi32(int(x[j][i]));
                const __m512bh xv = reinterpret_cast<const __m512bh &>(xb);
                for (int p = 0; p < P; ++p) acc[p][j] = _mm512_dpbf16_ps(acc[p][j], wv[p], xv);
            }
        }
    }
    // (acc + bias) + residual: the order of the separate ggml adds this replaces
    for (int p = 0; p < P; ++p) {
        const __m512 bias = add.bias ? _mm512_loadu_ps(add.bias + r0 + p * k_lanes) : _mm512_setzero_ps();
        for (int j = 0; j < C; ++j) {
            const int64_t at = (c + j) * rows + r0 + p * k_lanes;
            __m512 v = add.bias ? _mm512_add_ps(acc[p][j], bias) : acc[p][j];
            if (add.residual) v = _mm512_add_ps(_mm512_loadu_ps(add.residual + at), v);
            _mm512_storeu_ps(y + at, v);
        }
    }
}

template <int C, int P>
void tile_columns(const scratch & t, const column_source & src, int64_t c, int64_t n, float * y, int64_t rows,
                  int64_t r0, const output_terms & add) {
    if constexpr (C > 1) {
        if (n < C) return tile_columns<C - 1, P>(t, src, c, n, y, rows, r0, add);
    }
    tile_product<C, P>(t, src, c, y, rows, r0, add);
}

// columns [col0, col0 + n); src.base points at column col0
template <int P>
void chunk_product(const scratch & t, const column_source & src, int64_t col0, int64_t n, float * y, int64_t rows,
                   int64_t r0, const output_terms & add) {
    output_terms at = add;
    if (at.residual) at.residual += col0 * rows;
    for (int64_t c = 0; c < n; c += k_tile_columns) {
        tile_columns<k_tile_columns, P>(t, src, c, std::min<int64_t>(k_tile_columns, n - c), y + col0 * rows, rows, r0,
                                        at);
    }
}

// src: [w, x, bias?, residual?]; x f32 [C, T] (packed per chunk) or bf16 [C, T] read in place
void gemm_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const output_terms add{dst->src[2] ? static_cast<const float *>(dst->src[2]->data) : nullptr,
                           dst->src[3] ? static_cast<const float *>(dst->src[3]->data) : nullptr};
    const int64_t rows = w->ne[1], pairs = w->ne[0] / 2, n = dst->ne[1];
    const bool in_place = x->type == GGML_TYPE_BF16;
    const int taps = int(w->ne[0] / x->ne[0]);
    const int64_t dilation = taps > 1 ? (x->ne[1] - n) / (taps - 1) : 0;
    // tiles of equal height (96 rows: two of 48, not 64 + 32, which left one thread half idle)
    const int64_t all_panels = rows / k_lanes;
    const int64_t tiles = (all_panels + k_max_panels - 1) / k_max_panels;
    const int64_t tile_panels = (all_panels + tiles - 1) / tiles;
    const int64_t chunks = (n + k_chunk_columns - 1) / k_chunk_columns;
    const int64_t tasks = tiles * chunks;
    thread_local scratch t;
    t.tile = -1;
    float * y = static_cast<float *>(dst->data);
    // a contiguous run of (row tile, column chunk) tasks per thread, tile by tile: each thread
    // rearranges the tiles it serves once
    for (int64_t task = tasks * ith / nth; task < tasks * (ith + 1) / nth; ++task) {
        const int64_t tile = task / chunks, chunk = task % chunks;
        const int64_t r0 = tile * tile_panels * k_lanes;
        const int panels = int(std::min<int64_t>(tile_panels, all_panels - tile * tile_panels));
        if (tile != t.tile) {
            pack_tile(w, r0, panels, t);
            t.tile = tile;
        }
        const int64_t col0 = chunk * k_chunk_columns, cols = std::min(k_chunk_columns, n - col0);
        column_source src;
        if (in_place) {
            const int64_t words = x->ne[0] / 2;
            src = {static_cast<const uint32_t *>(x->data) + col0 * words, words, dilation * words, taps, words};
        } else {
            pack_columns(x, col0, cols, taps, dilation, t);
            src = {t.columns.data(), pairs, 0, 1, pairs};
        }
        switch (panels) {
            case 4: chunk_product<4>(t, src, col0, cols, y, rows, r0, add); break;
            case 3: chunk_product<3>(t, src, col0, cols, y, rows, r0, add); break;
            case 2: chunk_product<2>(t, src, col0, cols, y, rows, r0, add); break;
            default: chunk_product<1>(t, src, col0, cols, y, rows, r0, add); break;
        }
    }
}

bool weight_applies(const ggml_tensor * w) {
    return w->type == GGML_TYPE_BF16 && ggml_n_dims(w) <= 2 && w->ne[1] % k_lanes == 0 && w->ne[0] % 32 == 0 &&
           ggml_is_contiguous(w) && cpu_has_bf16();
}
#endif  // KAZEIA_X86

}  // namespace

ggml_tensor * gemm_bf16(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
#ifdef KAZEIA_X86
    if (!weight_applies(w)) return nullptr;
    if (!ggml_is_contiguous(x)) x = ggml_cont(ctx, x);
    if (x->type != GGML_TYPE_F32 || x->ne[0] != w->ne[0] || x->ne[2] != 1 || x->ne[3] != 1) return nullptr;
    ggml_tensor * args[] = {w, x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, 2, gemm_op, GGML_N_TASKS_MAX, nullptr);
#else
    (void)ctx, (void)w, (void)x;
    return nullptr;
#endif
}

bool gemm_bf16_available() {
#ifdef KAZEIA_X86
    return cpu_has_bf16();
#else
    return false;
#endif
}

bool conv_bf16_applies(const ggml_tensor * w, int64_t channels) {
#ifdef KAZEIA_X86
    const int64_t rows = w->ne[ggml_n_dims(w) - 1], row = ggml_nelements(w) / rows;
    return w->type == GGML_TYPE_BF16 && ggml_is_contiguous(w) && rows % k_lanes == 0 && row % 32 == 0 &&
           channels % 2 == 0 && row % channels == 0 && cpu_has_bf16();
#else
    (void)w, (void)channels;
    return false;
#endif
}

ggml_tensor * conv_bf16(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, int dilation, ggml_tensor * bias,
                        ggml_tensor * residual) {
    GGML_ASSERT(conv_bf16_applies(w, x->ne[0]) && (x->type == GGML_TYPE_BF16 || x->type == GGML_TYPE_F32) &&
                ggml_is_contiguous(x));
#ifdef KAZEIA_X86
    return causal_conv_op(ctx, w, x, dilation, bias, residual, gemm_op, nullptr);
#else
    (void)ctx, (void)dilation, (void)bias, (void)residual;
    return nullptr;   // (not reached: conv_bf16_applies is false without the x86 kernel)
#endif
}

void to_bf16(const float * x, uint16_t * y, int64_t n) {
#ifdef KAZEIA_X86
    if (cpu_has_bf16()) return convert_bf16(x, y, n);
#endif
    for (int64_t i = 0; i < n; ++i) y[i] = ggml_fp32_to_bf16(x[i]).bits;
}

}  // namespace kazeia
