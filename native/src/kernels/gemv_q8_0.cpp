#include "kernels/gemv_q8_0.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/gemv_common.h"

namespace kazeia {
namespace {

constexpr int64_t k_block = 32;

struct block_q8 {   // ggml's block_q8_0
    uint16_t d;     // fp16 scale
    int8_t qs[k_block];
};
static_assert(sizeof(block_q8) == 34, "q8_0 block layout");

#ifdef KAZEIA_X86
// |w| . (x signed like w) = w . x, as u8 x s8 pairs summed into 32-bit lanes
#define KAZEIA_GEMV_ROW(DOT, BLK, ACC)                                                                     \
    {                                                                                                 \
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>((BLK).qs));           \
        const __m256i dot = DOT(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq));                   \
        ACC = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss((BLK).d) * db), _mm256_cvtepi32_ps(dot), ACC);  \
    }
// One row against one quantised column (qv, dv): four blocks in flight; OUT = the dot product.
// The one-column and the several-column kernels both use it, so a column's sum is the same whichever
// ran it.
#define KAZEIA_GEMV_DOT(DOT, OUT)                                                                     \
    {                                                                                                 \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;                     \
        int64_t b = 0;                                                                                \
        for (; b + 4 <= nb; b += 4) {                                                                 \
            __m256i xq;                                                                               \
            float db;                                                                                 \
            xq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qv + b * k_block));             \
            db = dv[b];                                                                               \
            KAZEIA_GEMV_ROW(DOT, row[b], acc0)                                                        \
            xq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qv + (b + 1) * k_block));       \
            db = dv[b + 1];                                                                           \
            KAZEIA_GEMV_ROW(DOT, row[b + 1], acc1)                                                    \
            xq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qv + (b + 2) * k_block));       \
            db = dv[b + 2];                                                                           \
            KAZEIA_GEMV_ROW(DOT, row[b + 2], acc2)                                                    \
            xq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qv + (b + 3) * k_block));       \
            db = dv[b + 3];                                                                           \
            KAZEIA_GEMV_ROW(DOT, row[b + 3], acc3)                                                    \
        }                                                                                             \
        for (; b < nb; ++b) {                                                                         \
            const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qv + b * k_block)); \
            const float db = dv[b];                                                                   \
            KAZEIA_GEMV_ROW(DOT, row[b], acc0)                                                        \
        }                                                                                             \
        OUT = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));            \
    }
// rows [r0, r1) against `cols` columns (quantised one after another); y is [cols][rows]. Each weight
// row is read from memory once for all columns (the later columns find it in L1).
#define KAZEIA_GEMV_BODY(DOT)                                                                         \
    for (int64_t r = r0; r < r1; ++r) {                                                               \
        const block_q8 * row = w + r * nb;                                                            \
        for (int64_t c = 0; c < cols; ++c) {                                                          \
            const int8_t * qv = q + c * nb * k_block;                                                 \
            const float * dv = d + c * nb;                                                            \
            KAZEIA_GEMV_DOT(DOT, y[c * rows + r])                                                     \
        }                                                                                             \
    }

__attribute__((target("avx2,fma,f16c"))) inline __m256i dot_avx2(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
__attribute__((target("avx2,fma,f16c,avx512vl,avx512vnni"))) inline __m256i dot_vnni(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

__attribute__((target("avx2,fma,f16c")))
void rows_avx2(const block_q8 * w, const int8_t * q, const float * d, float * y, int64_t nb, int64_t r0, int64_t r1,
               int64_t rows, int64_t cols) {
    KAZEIA_GEMV_BODY(dot_avx2)
}
__attribute__((target("avx2,fma,f16c,avx512vl,avx512vnni")))
void rows_vnni(const block_q8 * w, const int8_t * q, const float * d, float * y, int64_t nb, int64_t r0, int64_t r1,
               int64_t rows, int64_t cols) {
    KAZEIA_GEMV_BODY(dot_vnni)
}
#undef KAZEIA_GEMV_BODY
#undef KAZEIA_GEMV_DOT
#undef KAZEIA_GEMV_ROW

// The columns of a batch with VNNI: each weight block is loaded once per C columns, which are kept
// as x + 128 (unsigned) so the block needs no per-column sign handling: (x + 128) . w - 128 sum(w)
// is x . w exactly, lane by lane, so every float sum is the one-column kernel's.
template <int C>
__attribute__((target("avx2,fma,f16c,avx512vl,avx512vnni"))) inline void block_vnni(
    const block_q8 & blk, const uint8_t * const * xu, const float * const * dv, int64_t b, __m256 * acc) {
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk.qs));
    const __m256i corr = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(char(0x80)), wq);
    const float dw = _cvtsh_ss(blk.d);
    for (int c = 0; c < C; ++c) {
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xu[c] + b * k_block));
        const __m256i dot = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), xq, wq), corr);
        acc[4 * c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dv[c][b]), _mm256_cvtepi32_ps(dot), acc[4 * c]);
    }
}

template <int C>
__attribute__((target("avx2,fma,f16c,avx512vl,avx512vnni")))
void tile_vnni(const block_q8 * row, const uint8_t * const * xu, const float * const * dv, float * const * out,
               int64_t nb) {
    __m256 acc[4 * C];   // column c's four accumulators at 4c .. 4c + 3
    for (int i = 0; i < 4 * C; ++i) acc[i] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        for (int a = 0; a < 4; ++a) block_vnni<C>(row[b + a], xu, dv, b + a, acc + a);
    }
    for (; b < nb; ++b) block_vnni<C>(row[b], xu, dv, b, acc);
    for (int c = 0; c < C; ++c) {
        const __m256 * ac = acc + 4 * c;
        *out[c] = hsum(_mm256_add_ps(_mm256_add_ps(ac[0], ac[1]), _mm256_add_ps(ac[2], ac[3])));
    }
}

__attribute__((target("avx2,fma,f16c,avx512vl,avx512vnni")))
void columns_vnni(const block_q8 * w, const int8_t * q, const float * d, float * y, int64_t nb, int64_t r0, int64_t r1,
                  int64_t rows, int64_t cols) {
    thread_local std::vector<uint8_t> shifted;
    const int64_t k = nb * k_block;
    shifted.resize(size_t(k * cols));
    for (int64_t i = 0; i < k * cols; ++i) shifted[size_t(i)] = uint8_t(int(q[i]) + 128);
    for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c0 = 0; c0 < cols; c0 += 4) {
            const int n = int(std::min<int64_t>(4, cols - c0));
            const uint8_t * xu[4];
            const float * dv[4];
            float * out[4];
            for (int c = 0; c < n; ++c) {
                xu[c] = shifted.data() + (c0 + c) * k;
                dv[c] = d + (c0 + c) * nb;
                out[c] = y + (c0 + c) * rows + r;
            }
            switch (n) {
                case 4: tile_vnni<4>(w + r * nb, xu, dv, out, nb); break;
                case 3: tile_vnni<3>(w + r * nb, xu, dv, out, nb); break;
                case 2: tile_vnni<2>(w + r * nb, xu, dv, out, nb); break;
                default: tile_vnni<1>(w + r * nb, xu, dv, out, nb); break;
            }
        }
    }
}

bool has_vnni() {
    static const bool yes = cpu_allows(cpu_level::avx512, {"avx512vnni"});
    return yes;
}
// tests pin the AVX2 path to check it on CPUs that have VNNI
std::atomic<bool> g_avx2_only{false};

void gemv_rows(const block_q8 * w, const int8_t * q, const float * d, float * y, int64_t nb, int64_t r0, int64_t r1,
               int64_t rows, int64_t cols) {
    if (has_vnni() && !g_avx2_only.load(std::memory_order_relaxed)) {
        if (cols > 1) return columns_vnni(w, q, d, y, nb, r0, r1, rows, cols);
        return rows_vnni(w, q, d, y, nb, r0, r1, rows, cols);
    }
    rows_avx2(w, q, d, y, nb, r0, r1, rows, cols);
}

void gemv_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t k = w->ne[0], rows = w->ne[1], nb = k / k_block, cols = x->ne[1];
    // every thread quantises the (short) columns itself: a custom op has no barrier to share them
    thread_local std::vector<int8_t> q;
    thread_local std::vector<float> d;
    q.resize(size_t(k * cols));
    d.resize(size_t(nb * cols));
    for (int64_t c = 0; c < cols; ++c) {
        quantize_q8_0_column(reinterpret_cast<const float *>(static_cast<const char *>(x->data) + c * x->nb[1]), k,
                             q.data() + c * k, d.data() + c * nb);
    }
    // one contiguous run of rows per thread: a single linear stream the prefetchers follow
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    gemv_rows(static_cast<const block_q8 *>(w->data), q.data(), d.data(), static_cast<float *>(dst->data), nb, r0, r1,
              rows, cols);
}
#endif  // KAZEIA_X86

}  // namespace

#ifdef KAZEIA_X86
// The vector as q8_0 blocks, as ggml quantises it: scale amax / 127 (kept as fp16), values
// x * 127 / amax rounded to nearest even.
__attribute__((target("avx2,fma,f16c")))
void quantize_q8_0_column(const float * x, int64_t k, int8_t * q, float * d) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < k / 32; ++b) {
        const float * xb = x + b * 32;
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int i = 0; i < 4; ++i) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, v[i]));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float mx = _mm_cvtss_f32(m);
        const __m256 inv = _mm256_set1_ps(mx != 0.0f ? 127.0f / mx : 0.0f);
        __m256i n[4];
        for (int i = 0; i < 4; ++i) {
            n[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        // pack 32 int32 -> 32 int8 in order (packs interleave 128-bit lanes; permute restores it)
        const __m256i p16a = _mm256_packs_epi32(n[0], n[1]), p16b = _mm256_packs_epi32(n[2], n[3]);
        const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + b * 32), p8);
        d[b] = _cvtsh_ss(_cvtss_sh(mx / 127.0f, 0));
    }
}

#endif  // KAZEIA_X86

ggml_tensor * gemv_q8_0(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, bool any_columns) {
#ifdef KAZEIA_X86
    return one_column_op(ctx, w, x, GGML_TYPE_Q8_0, k_block, gemv_op, any_columns);
#else
    return one_column_op(ctx, w, x, GGML_TYPE_Q8_0, k_block, nullptr, any_columns);
#endif
}

void use_avx2_only(bool yes) {
#ifdef KAZEIA_X86
    g_avx2_only = yes;
#else
    (void)yes;
#endif
}

}  // namespace kazeia
