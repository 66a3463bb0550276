#include "runtime/gemm_int8.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/gemv_common.h"

namespace kazeia {
namespace {

constexpr int64_t k_lanes = 16;            // weight rows per register
constexpr int64_t k_tile_rows = 2 * k_lanes;
constexpr int k_tile_columns = 6;          // columns per register tile: 2 x 6 int sums + 2 x 6 float sums

struct block_q8 {   // ggml's block_q8_0
    uint16_t d;
    int8_t qs[32];
};
static_assert(sizeof(block_q8) == 34, "q8_0 block layout");

struct block_q6k {   // ggml's block_q6_K
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
static_assert(sizeof(block_q6k) == 210, "q6_K block layout");

#ifdef KAZEIA_X86
__attribute__((target("f16c"))) inline float fp16(uint16_t h) {
    return _cvtsh_ss(h);
}

// One weight row as bytes w + 128 and one float scale per group (32 values for q8_0, 16 for q6_K).
__attribute__((target("avx2,fma,f16c"))) void unpack_q8_0(const void * src, int64_t k, uint8_t * out, float * scale) {
    const auto * row = static_cast<const block_q8 *>(src);
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    for (int64_t b = 0; b < k / 32; ++b) {
        scale[b] = fp16(row[b].d);
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row[b].qs));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 32 * b), _mm256_xor_si256(q, flip));
    }
}

// q6_K values are 6-bit q with w = q - 32, so w + 128 = q + 96 (the order is ggml's dequantisation's)
__attribute__((target("avx2,fma,f16c"))) void unpack_q6_k(const void * src, int64_t k, uint8_t * out, float * scale) {
    const auto * row = static_cast<const block_q6k *>(src);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), off = _mm256_set1_epi8(96);
    for (int64_t b = 0; b < k / 256; ++b) {
        const block_q6k & blk = row[b];
        const float d = fp16(blk.d);
        for (int g = 0; g < 16; ++g) scale[16 * b + g] = d * float(blk.scales[g]);
        for (int half = 0; half < 2; ++half) {
            const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk.ql + 64 * half));
            const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk.ql + 64 * half + 32));
            const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk.qh + 32 * half));
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4)),
                _mm256_or_si256(_mm256_and_si256(l1, m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4)),
            };
            for (int j = 0; j < 4; ++j) {
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 256 * b + 128 * half + 32 * j),
                                    _mm256_add_epi8(q[j], off));
            }
        }
    }
}

// The columns quantised once per launch and thread: q8_0 values, their scales (one per 32) and,
// per scale group of the weights, 128 x the sum of the values (what the unsigned weights add).
struct quantized_columns {
    std::vector<int8_t> q;
    std::vector<float> d;
    std::vector<int32_t> offset;
};

// 128 x the sum of each group of 16 or 32 values (as unsigned bytes q + 128, summed by vpsadbw)
__attribute__((target("avx2"))) void group_sums(const int8_t * q, int64_t k, int64_t group, int32_t * out) {
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    for (int64_t i = 0; i < k; i += 32) {
        const __m256i u = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + i)), flip);
        const __m256i s = _mm256_sad_epu8(u, _mm256_setzero_si256());   // four sums of 8 bytes
        const int64_t s0 = _mm256_extract_epi64(s, 0), s1 = _mm256_extract_epi64(s, 1);
        const int64_t s2 = _mm256_extract_epi64(s, 2), s3 = _mm256_extract_epi64(s, 3);
        if (group == 32) {
            out[i / 32] = int32_t(128 * (s0 + s1 + s2 + s3 - 32 * 128));
        } else {
            out[i / 16] = int32_t(128 * (s0 + s1 - 16 * 128));
            out[i / 16 + 1] = int32_t(128 * (s2 + s3 - 16 * 128));
        }
    }
}

void quantize_columns(const ggml_tensor * x, int64_t group, quantized_columns & out) {
    const int64_t k = x->ne[0], n = x->ne[1], groups = k / group;
    out.q.resize(size_t(k * n));
    out.d.resize(size_t(k / 32 * n));
    out.offset.resize(size_t(groups * n));
    for (int64_t c = 0; c < n; ++c) {
        int8_t * q = out.q.data() + c * k;
        quantize_q8_0_column(reinterpret_cast<const float *>(static_cast<const char *>(x->data) + c * x->nb[1]), k, q,
                             out.d.data() + c * (k / 32));
        group_sums(q, k, group, out.offset.data() + c * groups);
    }
}

// A tile of 32 weight rows in lane order: for every 4 values, rows 0-15 then rows 16-31, 4 bytes each
// (one 64-byte register apiece); scales [group][32 rows].
struct tile_weights {
    std::vector<uint8_t> rows;     // [32][k], row-major, as unpacked
    std::vector<uint8_t> lanes;    // [k / 4][32][4]
    std::vector<float> scale;      // [groups][32]
    std::vector<float> row_scale;  // [32][groups], as unpacked
};

using unpack_fn = void (*)(const void *, int64_t, uint8_t *, float *);

// 16 rows x 16 four-byte words -> 16 registers, word i of every row in register i (a 16 x 16
// transpose of 32-bit elements: 4 x 4 within each 128-bit lane, then 4 x 4 lanes)
__attribute__((target("avx512f,avx512bw,avx512vl"))) void transpose_16x16(const uint8_t * src, int64_t stride,
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

__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
void load_tile(const char * w, size_t row_bytes, int64_t k, int64_t groups, unpack_fn unpack, tile_weights & t) {
    t.rows.resize(size_t(k_tile_rows * k));
    t.lanes.resize(size_t(k_tile_rows * k));
    t.scale.resize(size_t(groups * k_tile_rows));
    t.row_scale.resize(size_t(groups * k_tile_rows));
    for (int64_t r = 0; r < k_tile_rows; ++r) {
        unpack(w + r * row_bytes, k, t.rows.data() + r * k, t.row_scale.data() + r * groups);
    }
    auto * lanes = reinterpret_cast<__m512i *>(t.lanes.data());
    for (int64_t q0 = 0; q0 < k / 4; q0 += 16) {
        for (int half = 0; half < 2; ++half) {
            __m512i out[16];
            transpose_16x16(t.rows.data() + half * k_lanes * k + 4 * q0, k, out);
            for (int i = 0; i < 16; ++i) _mm512_storeu_si512(lanes + 2 * (q0 + i) + half, out[i]);
        }
    }
    for (int64_t g = 0; g < groups; ++g) {
        for (int64_t r = 0; r < k_tile_rows; ++r) t.scale[size_t(g * k_tile_rows + r)] = t.row_scale[size_t(r * groups + g)];
    }
}

// y[c][r0 .. r0 + 32) for C columns from c0: per scale group, exact integer sums, then one scaled
// float accumulation.
template <int C>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
void tile_product(const tile_weights & t, const quantized_columns & x, int64_t k, int64_t group, int64_t c0, float * y,
                  int64_t rows, int64_t r0) {
    const int64_t groups = k / group, quads = group / 4;
    const auto * lanes = reinterpret_cast<const __m512i *>(t.lanes.data());
    const int8_t * xq[C];
    const float * xd[C];
    const int32_t * xo[C];
    for (int c = 0; c < C; ++c) {
        xq[c] = x.q.data() + (c0 + c) * k;
        xd[c] = x.d.data() + (c0 + c) * (k / 32);
        xo[c] = x.offset.data() + (c0 + c) * groups;
    }
    __m512 acc[2][C];
    for (int c = 0; c < C; ++c) acc[0][c] = acc[1][c] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
        __m512i dot[2][C];
        for (int c = 0; c < C; ++c) dot[0][c] = dot[1][c] = _mm512_setzero_si512();
        for (int64_t i = 0; i < quads; ++i) {
            const int64_t quad = g * quads + i;
            const __m512i w0 = _mm512_loadu_si512(lanes + 2 * quad), w1 = _mm512_loadu_si512(lanes + 2 * quad + 1);
            for (int c = 0; c < C; ++c) {
                int32_t four;
                std::memcpy(&four, xq[c] + 4 * quad, 4);
                const __m512i xb = _mm512_set1_epi32(four);
                dot[0][c] = _mm512_dpbusd_epi32(dot[0][c], w0, xb);
                dot[1][c] = _mm512_dpbusd_epi32(dot[1][c], w1, xb);
            }
        }
        const __m512 s0 = _mm512_loadu_ps(t.scale.data() + g * k_tile_rows);
        const __m512 s1 = _mm512_loadu_ps(t.scale.data() + g * k_tile_rows + k_lanes);
        const int64_t block = g * group / 32;
        for (int c = 0; c < C; ++c) {
            const __m512i off = _mm512_set1_epi32(xo[c][g]);
            const __m512 xs = _mm512_set1_ps(xd[c][block]);
            acc[0][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(dot[0][c], off)), _mm512_mul_ps(s0, xs), acc[0][c]);
            acc[1][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(dot[1][c], off)), _mm512_mul_ps(s1, xs), acc[1][c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        _mm512_storeu_ps(y + (c0 + c) * rows + r0, acc[0][c]);
        _mm512_storeu_ps(y + (c0 + c) * rows + r0 + k_lanes, acc[1][c]);
    }
}

template <int C>
void tile_columns(const tile_weights & t, const quantized_columns & x, int64_t k, int64_t group, int64_t c0, int64_t n,
                  float * y, int64_t rows, int64_t r0) {
    if constexpr (C > 1) {
        if (n < C) return tile_columns<C - 1>(t, x, k, group, c0, n, y, rows, r0);
    }
    tile_product<C>(t, x, k, group, c0, y, rows, r0);
}

bool cpu_has_vnni512() {
    static const bool yes = cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    return yes;
}

void gemm_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t k = w->ne[0], rows = w->ne[1], n = x->ne[1];
    const bool q6 = w->type == GGML_TYPE_Q6_K;
    const int64_t group = q6 ? 16 : 32;
    // every thread quantises the columns itself (a custom op has no barrier to share them): K x n
    // values, a few per cent of the product's work at n = 8 and less beyond
    thread_local quantized_columns xq;
    thread_local tile_weights tile;
    quantize_columns(x, group, xq);
    const int64_t tiles = rows / k_tile_rows, t0 = tiles * ith / nth, t1 = tiles * (ith + 1) / nth;
    float * y = static_cast<float *>(dst->data);
    for (int64_t ti = t0; ti < t1; ++ti) {
        const int64_t r0 = ti * k_tile_rows;
        load_tile(static_cast<const char *>(w->data) + r0 * w->nb[1], w->nb[1], k, k / group,
                  q6 ? unpack_q6_k : unpack_q8_0, tile);
        for (int64_t c = 0; c < n; c += k_tile_columns) {
            tile_columns<k_tile_columns>(tile, xq, k, group, c, std::min<int64_t>(k_tile_columns, n - c), y, rows, r0);
        }
    }
}
#endif  // KAZEIA_X86

}  // namespace

bool gemm_int8_available() {
#ifdef KAZEIA_X86
    return cpu_has_vnni512();
#else
    return false;
#endif
}

ggml_tensor * gemm_int8(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
#ifdef KAZEIA_X86
    const int64_t block = w->type == GGML_TYPE_Q8_0 ? 32 : w->type == GGML_TYPE_Q6_K ? 256 : 0;
    if (block == 0 || w->ne[1] % k_tile_rows != 0 || w->ne[0] % 64 != 0 || x->ne[1] < 2 || !gemm_int8_available()) return nullptr;
    return one_column_op(ctx, w, x, w->type, block, gemm_op, /*any_columns=*/true);
#else
    (void)ctx, (void)w, (void)x;
    return nullptr;
#endif
}

}  // namespace kazeia
