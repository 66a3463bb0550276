#include "kernels/gemv_k_quants.h"

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ggml-cpu.h"

#include "kernels/gemv_common.h"

namespace kazeia {
namespace {

constexpr int64_t k_qk = 256;

struct block_q6k {        // ggml's block_q6_K
    uint8_t ql[k_qk / 2];  // low 4 bits
    uint8_t qh[k_qk / 4];  // high 2 bits
    int8_t scales[k_qk / 16];
    uint16_t d;            // fp16
};
static_assert(sizeof(block_q6k) == 210, "q6_K block layout");

struct block_q5k {         // ggml's block_q5_K
    uint16_t d, dmin;      // fp16
    uint8_t scales[12];    // 6-bit scales and mins of the 8 sub-blocks of 32 (scale_min_k4)
    uint8_t qh[k_qk / 8];  // fifth bits
    uint8_t qs[k_qk / 2];  // low 4 bits
};
static_assert(sizeof(block_q5k) == 176, "q5_K block layout");

struct block_q8k {        // ggml's block_q8_K
    float d;
    int8_t qs[k_qk];
    int16_t bsums[k_qk / 16];
};
static_assert(sizeof(block_q8k) == 292, "q8_K block layout");

#ifdef KAZEIA_X86
// byte shuffles that spread scales 2j and 2j+1 over 8 lanes each (j = 0..7)
alignas(16) const int8_t k_spread[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},         {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},         {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},         {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13},
    {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

// One 256-value weight block against C columns' blocks: per column, the sum over its 16-value
// groups of scale * (q6 - 32) . q8, as 8 int32 lanes. The block is unpacked once for all C; the -32
// of every weight comes off through q8_K's group sums.
template <int C>
__attribute__((target("avx2,fma,f16c"))) inline void block_dot(const block_q6k & w, const block_q8k * const * x,
                                                                 __m256i * sum, __m256i *) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i *>(w.scales));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
    for (int c = 0; c < C; ++c) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x[c]->bsums));
        sum[c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 5));
    }
    for (int half = 0; half < 2; ++half) {
        const uint8_t * ql = w.ql + 64 * half;
        const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql));
        const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql + 32));
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w.qh + 32 * half));
        const __m256i q[4] = {
            _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4)),
            _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4)),
        };
        for (int j = 0; j < 4; ++j) {   // 32 values: groups 8 half + 2j and the next
            const __m128i pick = _mm_load_si128(reinterpret_cast<const __m128i *>(k_spread[4 * half + j]));
            const __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, pick));
            for (int c = 0; c < C; ++c) {
                const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x[c]->qs + 128 * half + 32 * j));
                sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[j], xq), s));   // u6 x s8
            }
        }
    }
}

// The same for q5_K (weights d sc q - dmin m, q = 0..31): per column, the sum over its 32-value
// sub-blocks of sc * q . q8 as 8 int32 lanes, and in mins[c] m * (each 16-value group's sum of q8
// values, from q8_K's group sums) as 8 int32 lanes, which the caller scales by dmin.
template <int C>
__attribute__((target("avx2,fma,f16c"))) inline void block_dot(const block_q5k & w, const block_q8k * const * x,
                                                                 __m256i * sum, __m256i * mins) {
    // the 12 scale bytes -> 8 scales and 8 mins (scale_min_k4 for all eight sub-blocks at once)
    uint32_t u[4];
    std::memcpy(u, w.scales, 12);
    constexpr uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
    u[3] = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);
    const uint32_t m_lo = u[1] & low6;
    u[1] = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);
    u[2] = m_lo;
    u[0] &= low6;
    const uint8_t * sc = reinterpret_cast<const uint8_t *>(u);   // sc[0..7], then the mins
    const __m128i m8 = _mm_cvtsi64_si128(int64_t(uint64_t(u[2]) | uint64_t(u[3]) << 32));
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));   // each min for both its groups
    for (int c = 0; c < C; ++c) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x[c]->bsums));
        mins[c] = _mm256_madd_epi16(m16, bsums);
        sum[c] = _mm256_setzero_si256();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w.qh));
    for (int chunk = 0; chunk < 4; ++chunk) {   // 64 values: sub-blocks 2 chunk (low nibbles) and 2 chunk + 1
        const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w.qs + 32 * chunk));
        const __m256i q[2] = {
            _mm256_or_si256(_mm256_and_si256(l, m4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * chunk), one), 4)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * chunk + 1), one), 4)),
        };
        for (int h = 0; h < 2; ++h) {
            const __m256i s = _mm256_set1_epi16(int16_t(sc[2 * chunk + h]));
            for (int c = 0; c < C; ++c) {
                const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x[c]->qs + 64 * chunk + 32 * h));
                sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[h], xq), s));   // u5 x s8
            }
        }
    }
}

template <typename Block>
constexpr bool has_mins = std::is_same_v<Block, block_q5k>;

// y[c * rows + r] for rows [r0, r1) and C columns starting at `col`: each weight row is unpacked
// once per C columns. `Exact` (and one column): four accumulators per column, blocks taken in turn,
// so every column is summed as one column alone is (the columns of a batch); otherwise one
// accumulator per column (a prompt's rows: fewer registers, any order).
// (q5_K: minus dmin x the mins, summed per column in block order in one float)
template <typename Block, int C, bool Exact = false>
__attribute__((target("avx2,fma,f16c")))
void rows_avx2(const Block * w, const block_q8k * x, float * y, int64_t nb, int64_t rows, int64_t r0, int64_t r1,
               int64_t col) {
    constexpr int A = Exact || C == 1 ? 4 : 1;   // accumulators per column
    for (int64_t r = r0; r < r1; ++r) {
        const Block * row = w + r * nb;
        __m256 acc[C][A], min_acc[C];
        for (int c = 0; c < C; ++c) {
            for (int a = 0; a < A; ++a) acc[c][a] = _mm256_setzero_ps();
            min_acc[c] = _mm256_setzero_ps();
        }
        for (int64_t b = 0; b < nb; ++b) {
            const block_q8k * xs[C];
            for (int c = 0; c < C; ++c) xs[c] = x + (col + c) * nb + b;
            __m256i sum[C], mins[C];
            block_dot<C>(row[b], xs, sum, mins);
            const float dw = _cvtsh_ss(row[b].d);
            for (int c = 0; c < C; ++c) {
                __m256 & a = acc[c][b % A];
                a = _mm256_fmadd_ps(_mm256_set1_ps(dw * xs[c]->d), _mm256_cvtepi32_ps(sum[c]), a);
            }
            if constexpr (has_mins<Block>) {
                const float dmin = _cvtsh_ss(row[b].dmin);
                for (int c = 0; c < C; ++c) {
                    min_acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dmin * xs[c]->d), _mm256_cvtepi32_ps(mins[c]), min_acc[c]);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            y[(col + c) * rows + r] = (A == 4 ? hsum(_mm256_add_ps(_mm256_add_ps(acc[c][0], acc[c][A > 1 ? 1 : 0]),
                                                                   _mm256_add_ps(acc[c][A > 2 ? 2 : 0], acc[c][A > 3 ? 3 : 0])))
                                              : hsum(acc[c][0])) - (has_mins<Block> ? hsum(min_acc[c]) : 0.0f);
        }
    }
}

template <typename Block, bool Exact>
void gemv_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t k = w->ne[0], rows = w->ne[1], nb = k / k_qk, cols = x->ne[1];
    // every thread quantises the (few) columns itself, with ggml's routine: a custom op has no barrier
    thread_local std::vector<block_q8k> q;
    q.resize(size_t(nb * cols));
    const auto quantize = ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float;
    for (int64_t c = 0; c < cols; ++c) {
        quantize(reinterpret_cast<const float *>(static_cast<const char *>(x->data) + c * x->nb[1]), q.data() + c * nb, k);
    }
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    const auto * wq = static_cast<const Block *>(w->data);
    float * y = static_cast<float *>(dst->data);
    int64_t c = 0;
    for (; c + 4 <= cols; c += 4) rows_avx2<Block, 4, Exact>(wq, q.data(), y, nb, rows, r0, r1, c);
    for (; c < cols; ++c) rows_avx2<Block, 1>(wq, q.data(), y, nb, rows, r0, r1, c);
}
#endif  // KAZEIA_X86

}  // namespace

ggml_tensor * gemv_k_quant(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, bool same_per_column) {
#ifdef KAZEIA_X86
    if (w->type == GGML_TYPE_Q6_K) {
        return one_column_op(ctx, w, x, GGML_TYPE_Q6_K, k_qk,
                             same_per_column ? gemv_op<block_q6k, true> : gemv_op<block_q6k, false>, true);
    }
    if (w->type == GGML_TYPE_Q5_K) {
        return one_column_op(ctx, w, x, GGML_TYPE_Q5_K, k_qk,
                             same_per_column ? gemv_op<block_q5k, true> : gemv_op<block_q5k, false>, true);
    }
    return nullptr;
#else
    (void)ctx, (void)w, (void)x, (void)same_per_column;
    return nullptr;
#endif
}

}  // namespace kazeia
