#include "runtime/gemm_bf16.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/gemv_common.h"

namespace kazeia {
namespace {

#ifdef KAZEIA_X86
constexpr int64_t k_lanes = 16;
constexpr int k_max_panels = 4;        // 64 rows per tile
constexpr int k_tile_columns = 6;      // 4 x 6 accumulators
constexpr int64_t k_chunk_columns = 96;

bool cpu_has_bf16() {
    static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
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

// columns [c0, c0 + n) of x as bf16 pairs (round to nearest even, as ggml converts them)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
void pack_columns(const ggml_tensor * x, int64_t c0, int64_t n, scratch & t) {
    const int64_t k = x->ne[0], pairs = k / 2;
    t.columns.resize(size_t(n * pairs));
    for (int64_t c = 0; c < n; ++c) {
        const auto * src = reinterpret_cast<const float *>(static_cast<const char *>(x->data) + (c0 + c) * x->nb[1]);
        auto * dst = t.columns.data() + c * pairs;
        for (int64_t i = 0; i < k; i += 32) {
            const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
            _mm512_storeu_si512(dst + i / 2, reinterpret_cast<const __m512i &>(b));
        }
    }
}

template <int C, int P>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
void tile_product(const scratch & t, int64_t pairs, int64_t c, float * y, int64_t rows, int64_t r0, int64_t col0) {
    const uint32_t * w[P];
    const uint32_t * x[C];
    for (int p = 0; p < P; ++p) w[p] = t.panels.data() + p * pairs * k_lanes;
    for (int j = 0; j < C; ++j) x[j] = t.columns.data() + (c + j) * pairs;
    __m512 acc[P][C];
    for (int p = 0; p < P; ++p) {
        for (int j = 0; j < C; ++j) acc[p][j] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < pairs; ++i) {
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
    for (int j = 0; j < C; ++j) {
        for (int p = 0; p < P; ++p) _mm512_storeu_ps(y + (col0 + c + j) * rows + r0 + p * k_lanes, acc[p][j]);
    }
}

template <int C, int P>
void tile_columns(const scratch & t, int64_t pairs, int64_t c, int64_t n, float * y, int64_t rows, int64_t r0,
                  int64_t col0) {
    if constexpr (C > 1) {
        if (n < C) return tile_columns<C - 1, P>(t, pairs, c, n, y, rows, r0, col0);
    }
    tile_product<C, P>(t, pairs, c, y, rows, r0, col0);
}

template <int P>
void chunk_product(const scratch & t, int64_t pairs, int64_t n, float * y, int64_t rows, int64_t r0, int64_t col0) {
    for (int64_t c = 0; c < n; c += k_tile_columns) {
        tile_columns<k_tile_columns, P>(t, pairs, c, std::min<int64_t>(k_tile_columns, n - c), y, rows, r0, col0);
    }
}

void gemm_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t rows = w->ne[1], pairs = w->ne[0] / 2, n = x->ne[1];
    const int64_t tiles = (rows + k_max_panels * k_lanes - 1) / (k_max_panels * k_lanes);
    const int64_t chunks = (n + k_chunk_columns - 1) / k_chunk_columns;
    const int64_t tasks = tiles * chunks;
    thread_local scratch t;
    t.tile = -1;
    float * y = static_cast<float *>(dst->data);
    // a contiguous run of (row tile, column chunk) tasks per thread, tile by tile: each thread
    // rearranges the tiles it serves once
    for (int64_t task = tasks * ith / nth; task < tasks * (ith + 1) / nth; ++task) {
        const int64_t tile = task / chunks, chunk = task % chunks;
        const int64_t r0 = tile * k_max_panels * k_lanes;
        const int panels = int(std::min<int64_t>(k_max_panels, (rows - r0) / k_lanes));
        if (tile != t.tile) {
            pack_tile(w, r0, panels, t);
            t.tile = tile;
        }
        const int64_t col0 = chunk * k_chunk_columns, cols = std::min(k_chunk_columns, n - col0);
        pack_columns(x, col0, cols, t);
        switch (panels) {
            case 4: chunk_product<4>(t, pairs, cols, y, rows, r0, col0); break;
            case 3: chunk_product<3>(t, pairs, cols, y, rows, r0, col0); break;
            case 2: chunk_product<2>(t, pairs, cols, y, rows, r0, col0); break;
            default: chunk_product<1>(t, pairs, cols, y, rows, r0, col0); break;
        }
    }
}
#endif  // KAZEIA_X86

}  // namespace

ggml_tensor * gemm_bf16(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
#ifdef KAZEIA_X86
    if (w->type != GGML_TYPE_BF16 || ggml_n_dims(w) > 2 || w->ne[1] % k_lanes != 0 || w->ne[0] % 32 != 0 ||
        !ggml_is_contiguous(w) || !cpu_has_bf16()) {
        return nullptr;
    }
    if (!ggml_is_contiguous(x)) x = ggml_cont(ctx, x);
    if (x->type != GGML_TYPE_F32 || x->ne[0] != w->ne[0] || x->ne[2] != 1 || x->ne[3] != 1) return nullptr;
    ggml_tensor * args[] = {w, x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, 2, gemm_op, GGML_N_TASKS_MAX, nullptr);
#else
    (void)ctx, (void)w, (void)x;
    return nullptr;
#endif
}

}  // namespace kazeia
