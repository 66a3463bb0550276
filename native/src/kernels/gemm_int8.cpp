#include "kernels/gemm_int8.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "kernels/gemv_common.h"
#include "weights/panel_claims.h"

namespace kazeia {
namespace {

constexpr int64_t k_lanes = 16;            // weight rows per register
constexpr int k_tile_columns = 6;   // columns per register tile: 2 x 6 int sums + 2 x 6 float sums

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

// q6_K values are 6-bit q with w = q - 32: stored as q + `offset` (96 gives w + 128; the order is
// ggml's dequantisation's)
__attribute__((target("avx2,fma,f16c"))) void unpack_q6_k_values(const void * src, int64_t k, uint8_t * out, float * scale,
                                                                  int8_t offset) {
    const auto * row = static_cast<const block_q6k *>(src);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), off = _mm256_set1_epi8(offset);
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

void unpack_q6_k(const void * src, int64_t k, uint8_t * out, float * scale) {
    unpack_q6_k_values(src, k, out, scale, 96);
}

// The columns quantised once per launch and thread: q8_0 values, their scales (one per 32) and,
// per scale group of the weights, `bias` x the sum of the values: what weights stored unsigned
// (w + bias) add to each integer sum.
struct quantized_columns {
    std::vector<int8_t> q;
    std::vector<float> d;
    std::vector<int32_t> offset;
};

// bias x the sum of each group of 16 or 32 values (as unsigned bytes q + 128, summed by vpsadbw)
__attribute__((target("avx2"))) void group_sums(const int8_t * q, int64_t k, int64_t group, int32_t bias, int32_t * out) {
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    for (int64_t i = 0; i < k; i += 32) {
        const __m256i u = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + i)), flip);
        const __m256i s = _mm256_sad_epu8(u, _mm256_setzero_si256());   // four sums of 8 bytes
        const int64_t s0 = _mm256_extract_epi64(s, 0), s1 = _mm256_extract_epi64(s, 1);
        const int64_t s2 = _mm256_extract_epi64(s, 2), s3 = _mm256_extract_epi64(s, 3);
        if (group == 32) {
            out[i / 32] = int32_t(bias * (s0 + s1 + s2 + s3 - 32 * 128));
        } else {
            out[i / 16] = int32_t(bias * (s0 + s1 - 16 * 128));
            out[i / 16 + 1] = int32_t(bias * (s2 + s3 - 16 * 128));
        }
    }
}

void quantize_columns(const ggml_tensor * x, int64_t group, int32_t bias, quantized_columns & out) {
    const int64_t k = x->ne[0], n = x->ne[1], groups = k / group;
    out.q.resize(size_t(k * n));
    out.d.resize(size_t(k / 32 * n));
    out.offset.resize(size_t(groups * n));
    for (int64_t c = 0; c < n; ++c) {
        int8_t * q = out.q.data() + c * k;
        quantize_q8_0_column(reinterpret_cast<const float *>(static_cast<const char *>(x->data) + c * x->nb[1]), k, q,
                             out.d.data() + c * (k / 32));
        group_sums(q, k, group, bias, out.offset.data() + c * groups);
    }
}

// A panel: 16 weight rows in lane order. Per scale group of G values: G / 4 registers of 64 bytes
// (four values of each of the 16 rows), then the 16 rows' scales: fp16 in stored weights (a q8_0
// panel is then exactly as large as its 16 rows were), f32 in a scratch tile.
int64_t group_bytes(int64_t group, bool half_scales) {
    return group / 4 * 64 + (half_scales ? 32 : 64);
}

struct panel_view {
    const uint8_t * base;
    int64_t group_bytes;
    bool half_scales;
};

// 16 rows of bytes [16][k] and their scales [16][groups] (uint16 fp16 or float) -> one panel at dst
__attribute__((target("avx512f,avx512bw,avx512vl")))
void write_panel(const uint8_t * rows, int64_t k, int64_t group, const void * scales, bool half_scales, uint8_t * dst) {
    const int64_t groups = k / group, quads = group / 4, gb = group_bytes(group, half_scales);
    for (int64_t q0 = 0; q0 < k / 4; q0 += 16) {
        __m512i out[16];
        transpose_16x16(rows + 4 * q0, k, out);
        for (int i = 0; i < 16; ++i) {
            const int64_t q = q0 + i;
            _mm512_storeu_si512(dst + (q / quads) * gb + (q % quads) * 64, out[i]);
        }
    }
    const size_t scale_size = half_scales ? 2 : 4;
    for (int64_t g = 0; g < groups; ++g) {
        for (int64_t r = 0; r < k_lanes; ++r) {
            std::memcpy(dst + g * gb + quads * 64 + r * int64_t(scale_size),
                        static_cast<const uint8_t *>(scales) + (r * groups + g) * int64_t(scale_size), scale_size);
        }
    }
}

using unpack_fn = void (*)(const void *, int64_t, uint8_t *, float *);

// Scratch panels for row-layout weights (two per 32-row tile), rearranged once per tile.
struct scratch_tile {
    std::vector<uint8_t> rows;     // [16][k], as unpacked
    std::vector<float> scale;      // [16][groups], as unpacked
    std::vector<uint8_t> panels;   // up to two panels
};

void load_tile(const char * w, size_t row_bytes, int64_t k, int64_t group, int n_panels, unpack_fn unpack,
               scratch_tile & t, panel_view * views) {
    const int64_t groups = k / group, gb = group_bytes(group, false);
    t.rows.resize(size_t(k_lanes * k));
    t.scale.resize(size_t(k_lanes * groups));
    t.panels.resize(size_t(2 * groups * gb));
    for (int p = 0; p < n_panels; ++p) {
        for (int64_t r = 0; r < k_lanes; ++r) {
            unpack(w + (p * k_lanes + r) * row_bytes, k, t.rows.data() + r * k, t.scale.data() + r * groups);
        }
        uint8_t * dst = t.panels.data() + p * groups * gb;
        write_panel(t.rows.data(), k, group, t.scale.data(), false, dst);
        views[p] = {dst, gb, false};
    }
}

// The columns a tile multiplies: their q8_0 values, scales and group offsets.
template <int C>
struct column_refs {
    const int8_t * q[C];
    const float * d[C];
    const int32_t * offset[C];
    column_refs(const quantized_columns & x, int64_t k, int64_t groups, int64_t c0) {
        for (int c = 0; c < C; ++c) {
            q[c] = x.q.data() + (c0 + c) * k;
            d[c] = x.d.data() + (c0 + c) * (k / 32);
            offset[c] = x.offset.data() + (c0 + c) * groups;
        }
    }
};

// One scale group into the float sums: (exact integer sum - offset) x weight scale x column scale.
template <int C, int P>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
inline void add_group(__m512 (&acc)[P][C], const __m512i (&dot)[P][C], const __m512 (&s)[P], const column_refs<C> & cols,
                      int64_t g, int64_t block) {
    for (int c = 0; c < C; ++c) {
        const __m512i off = _mm512_set1_epi32(cols.offset[c][g]);
        const __m512 xs = _mm512_set1_ps(cols.d[c][block]);
        for (int p = 0; p < P; ++p) {
            acc[p][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(dot[p][c], off)), _mm512_mul_ps(s[p], xs),
                                        acc[p][c]);
        }
    }
}

template <int C, int P>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
inline void store_tile(const __m512 (&acc)[P][C], float * y, int64_t c0, int64_t rows, int64_t r0) {
    for (int c = 0; c < C; ++c) {
        for (int p = 0; p < P; ++p) _mm512_storeu_ps(y + (c0 + c) * rows + r0 + p * k_lanes, acc[p][c]);
    }
}

// y[c][r0 .. r0 + 16 P) for C columns from c0. A column's arithmetic does not depend on C, P or
// which thread runs it: per scale group, exact integer sums, then one multiply-add in group order.
template <int C, int P>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
void tile_product(const panel_view * panel, const quantized_columns & x, int64_t k, int64_t group, int64_t c0,
                  float * y, int64_t rows, int64_t r0) {
    const int64_t groups = k / group, quads = group / 4;
    const column_refs<C> cols(x, k, groups, c0);
    const int8_t * const * xq = cols.q;
    __m512 acc[P][C];
    for (int p = 0; p < P; ++p) {
        for (int c = 0; c < C; ++c) acc[p][c] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < groups; ++g) {
        const uint8_t * gp[P];
        for (int p = 0; p < P; ++p) gp[p] = panel[p].base + g * panel[p].group_bytes;
        // few columns: two integer sums per column and panel, so that more multiply-adds are in
        // flight (integers: the split does not change the result)
        constexpr int S = C * P <= 4 ? 2 : 1;
        __m512i dot[P][C], part[P][C][S];
        for (int p = 0; p < P; ++p) {
            for (int c = 0; c < C; ++c) {
                for (int h = 0; h < S; ++h) part[p][c][h] = _mm512_setzero_si512();
            }
        }
        for (int64_t i = 0; i < quads; ++i) {
            __m512i w[P];
            for (int p = 0; p < P; ++p) w[p] = _mm512_loadu_si512(gp[p] + i * 64);
            for (int c = 0; c < C; ++c) {
                int32_t four;
                std::memcpy(&four, xq[c] + 4 * (g * quads + i), 4);
                const __m512i xb = _mm512_set1_epi32(four);
                for (int p = 0; p < P; ++p) part[p][c][i % S] = _mm512_dpbusd_epi32(part[p][c][i % S], w[p], xb);
            }
        }
        for (int p = 0; p < P; ++p) {
            for (int c = 0; c < C; ++c) dot[p][c] = S == 2 ? _mm512_add_epi32(part[p][c][0], part[p][c][S - 1]) : part[p][c][0];
        }
        __m512 s[P];
        for (int p = 0; p < P; ++p) {
            const uint8_t * sp = gp[p] + quads * 64;
            s[p] = panel[p].half_scales ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(sp)))
                                        : _mm512_loadu_ps(reinterpret_cast<const float *>(sp));
        }
        add_group<C, P>(acc, dot, s, cols, g, g * group / 32);
    }
    store_tile<C, P>(acc, y, c0, rows, r0);
}

template <int C, int P>
void tile_columns(const panel_view * panel, const quantized_columns & x, int64_t k, int64_t group, int64_t c0,
                  int64_t n, float * y, int64_t rows, int64_t r0) {
    if constexpr (C > 1) {
        if (n < C) return tile_columns<C - 1, P>(panel, x, k, group, c0, n, y, rows, r0);
    }
    tile_product<C, P>(panel, x, k, group, c0, y, rows, r0);
}

// Every column against one or two panels.
void panels_product(const panel_view * panel, int n_panels, const quantized_columns & x, int64_t k, int64_t group,
                    int64_t n, float * y, int64_t rows, int64_t r0) {
    for (int64_t c = 0; c < n; c += k_tile_columns) {
        const int64_t nc = std::min<int64_t>(k_tile_columns, n - c);
        if (n_panels == 2) {
            tile_columns<k_tile_columns, 2>(panel, x, k, group, c, nc, y, rows, r0);
        } else {
            tile_columns<k_tile_columns, 1>(panel, x, k, group, c, nc, y, rows, r0);
        }
    }
}

// q6_K in lanes: per 16 rows and super-block of 256 values, the rows' fp16 d (32 bytes), then per
// group of 16 values: the four value registers' low nibbles two to a byte (128 bytes), their high
// bits four to a byte (64 bytes) and the rows' int8 group scales (16 bytes): 3360 bytes, exactly
// the 16 rows' q6_K blocks. Values are q = w + 32 (unsigned); 32 x the column's group sum comes off.
constexpr int64_t k_q6_group_bytes = 208, k_q6_super_bytes = 32 + 16 * k_q6_group_bytes;

template <int C, int P>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
void tile_product_q6(const uint8_t * const * panel, const quantized_columns & x, int64_t k, int64_t c0, float * y,
                     int64_t rows, int64_t r0) {
    const column_refs<C> cols(x, k, k / 16, c0);
    const int8_t * const * xq = cols.q;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    __m512 acc[P][C];
    for (int p = 0; p < P; ++p) {
        for (int c = 0; c < C; ++c) acc[p][c] = _mm512_setzero_ps();
    }
    for (int64_t sb = 0; sb < k / 256; ++sb) {
        __m512 d[P];
        for (int p = 0; p < P; ++p) {
            d[p] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(panel[p] + sb * k_q6_super_bytes)));
        }
        for (int64_t t = 0; t < 16; ++t) {
            const int64_t g = sb * 16 + t;
            __m512i q[P][4];
            __m512 s[P];
            for (int p = 0; p < P; ++p) {
                const uint8_t * gp = panel[p] + sb * k_q6_super_bytes + 32 + t * k_q6_group_bytes;
                const __m512i l0 = _mm512_loadu_si512(gp), l1 = _mm512_loadu_si512(gp + 64), h = _mm512_loadu_si512(gp + 128);
                q[p][0] = _mm512_or_si512(_mm512_and_si512(l0, m4), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
                q[p][1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4),
                                          _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
                q[p][2] = _mm512_or_si512(_mm512_and_si512(l1, m4), _mm512_and_si512(h, m30));
                q[p][3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                                          _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
                const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i *>(gp + 192));
                s[p] = _mm512_mul_ps(d[p], _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)));
            }
            constexpr int S = C * P <= 4 ? 2 : 1;   // as in tile_product
            __m512i dot[P][C], part[P][C][S];
            for (int p = 0; p < P; ++p) {
                for (int c = 0; c < C; ++c) {
                    for (int h = 0; h < S; ++h) part[p][c][h] = _mm512_setzero_si512();
                }
            }
            for (int j = 0; j < 4; ++j) {
                for (int c = 0; c < C; ++c) {
                    int32_t four;
                    std::memcpy(&four, xq[c] + 16 * g + 4 * j, 4);
                    const __m512i xb = _mm512_set1_epi32(four);
                    for (int p = 0; p < P; ++p) part[p][c][j % S] = _mm512_dpbusd_epi32(part[p][c][j % S], q[p][j], xb);
                }
            }
            for (int p = 0; p < P; ++p) {
                for (int c = 0; c < C; ++c) {
                    dot[p][c] = S == 2 ? _mm512_add_epi32(part[p][c][0], part[p][c][S - 1]) : part[p][c][0];
                }
            }
            add_group<C, P>(acc, dot, s, cols, g, g / 2);
        }
    }
    store_tile<C, P>(acc, y, c0, rows, r0);
}

// 16 rows of q6_K -> one lanes panel at dst (dst may be the rows' own memory)
__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
void pack_q6_k_panel(const uint8_t * src, int64_t k, uint8_t * dst, std::vector<uint8_t> & raw, std::vector<uint8_t> & values,
                     std::vector<float> & unused_scales) {
    const int64_t nb = k / 256;
    const size_t row_bytes = size_t(nb) * sizeof(block_q6k);
    raw.assign(src, src + k_lanes * row_bytes);
    values.resize(size_t(k_lanes * k));
    unused_scales.resize(size_t(k / 16));
    for (int64_t r = 0; r < k_lanes; ++r) {
        unpack_q6_k_values(raw.data() + r * row_bytes, k, values.data() + r * k, unused_scales.data(), 0);
    }
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x03);
    for (int64_t sb = 0; sb < nb; ++sb) {
        uint8_t * out = dst + sb * k_q6_super_bytes;
        for (int64_t r = 0; r < k_lanes; ++r) {
            block_q6k blk;
            std::memcpy(&blk, raw.data() + r * row_bytes + sb * sizeof(block_q6k), sizeof blk);
            std::memcpy(out + 2 * r, &blk.d, 2);
            for (int t = 0; t < 16; ++t) out[32 + t * k_q6_group_bytes + 192 + r] = uint8_t(blk.scales[t]);
        }
        for (int chunk = 0; chunk < 4; ++chunk) {   // 64 values: four groups
            __m512i v[16];
            transpose_16x16(values.data() + sb * 256 + chunk * 64, k, v);
            for (int u = 0; u < 4; ++u) {
                const __m512i * qv = v + 4 * u;
                uint8_t * gp = out + 32 + (chunk * 4 + u) * k_q6_group_bytes;
                __m512i lo[4], hi[4];
                for (int j = 0; j < 4; ++j) {
                    lo[j] = _mm512_and_si512(qv[j], m4);
                    hi[j] = _mm512_and_si512(_mm512_srli_epi16(qv[j], 4), m3);
                }
                _mm512_storeu_si512(gp, _mm512_or_si512(lo[0], _mm512_slli_epi16(lo[1], 4)));
                _mm512_storeu_si512(gp + 64, _mm512_or_si512(lo[2], _mm512_slli_epi16(lo[3], 4)));
                _mm512_storeu_si512(gp + 128, _mm512_or_si512(_mm512_or_si512(hi[0], _mm512_slli_epi16(hi[1], 2)),
                                                              _mm512_or_si512(_mm512_slli_epi16(hi[2], 4),
                                                                              _mm512_slli_epi16(hi[3], 6))));
            }
        }
    }
}

// q5_K in lanes: per 16 rows and super-block of 256 values, the rows' fp16 d and dmin (64 bytes);
// their 6-bit sub-block scales, then mins (per kind 128 values, value v = 16 x sub-block + row: low
// four bits of v and v + 64 in one byte, 64 bytes; top two bits of v, v + 32, v + 64 and v + 96 in
// one byte, 32 bytes); then per sub-block of 32 values the eight value registers' low nibbles two to
// a byte (256 bytes) and their fifth bits, a 64-bit mask per register (64 bytes): 2816 bytes, exactly the
// 16 rows' q5_K blocks. A weight is d sc q - dmin m with q in 0..31, so a sub-block adds
// d sc xs (q . x) - dmin m xs (the sum of its 32 values): the column's q8_0 blocks are the sub-blocks.
constexpr int64_t k_q5_sub_bytes = 320, k_q5_head_bytes = 64 + 2 * 96;
constexpr int64_t k_q5_super_bytes = k_q5_head_bytes + 8 * k_q5_sub_bytes;
static_assert(k_q5_super_bytes == 16 * 176, "a q5_K panel is as large as its 16 rows");

// One kind of 6-bit value of a super-block (scales or mins: 96 bytes at src) as 128 bytes at out,
// sub-block j's 16 rows at out + 16 j.
__attribute__((target("avx512f,avx512bw,avx512vl,avx2")))
inline void six_bit_values(const uint8_t * src, uint8_t * out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x03);
    const __m512i lo = _mm512_loadu_si512(src);
    const __m256i top = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + 64));
    const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(top), top, 1);
    // 16-bit shifts: the two bits kept of each byte only ever come from that byte
    const __m512i t0 = _mm512_and_si512(_mm512_srlv_epi16(both, _mm512_set_epi64(0x0002000200020002, 0x0002000200020002,
        0x0002000200020002, 0x0002000200020002, 0, 0, 0, 0)), m3);
    const __m512i t1 = _mm512_and_si512(_mm512_srlv_epi16(both, _mm512_set_epi64(0x0006000600060006, 0x0006000600060006,
        0x0006000600060006, 0x0006000600060006, 0x0004000400040004, 0x0004000400040004, 0x0004000400040004,
        0x0004000400040004)), m3);
    _mm512_storeu_si512(out, _mm512_or_si512(_mm512_and_si512(lo, m4), _mm512_slli_epi16(t0, 4)));
    _mm512_storeu_si512(out + 64, _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), m4), _mm512_slli_epi16(t1, 4)));
}

__attribute__((target("avx512f,avx512bw,avx512vl")))
inline __m512 rows_as_float(const uint8_t * bytes16) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(bytes16))));
}

// value register U of a sub-block: its low nibble from nibble block U / 2, plus 16 where its
// fifth-bit mask (64 bits, one per byte) has a bit
template <int U>
__attribute__((target("avx512f,avx512bw,avx512vl")))
inline __m512i q5_register(const uint8_t * sub) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i l = _mm512_loadu_si512(sub + 64 * (U / 2));
    const __m512i low = U % 2 ? _mm512_and_si512(_mm512_srli_epi16(l, 4), m4) : _mm512_and_si512(l, m4);
    uint64_t fifth;
    std::memcpy(&fifth, sub + 256 + 8 * U, 8);
    return _mm512_mask_add_epi8(low, _cvtu64_mask64(fifth), low, _mm512_set1_epi8(16));
}

// registers 4H .. 4H + 3 of a sub-block against C columns into part[p][c][*]
template <int H, int C, int P, int S>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
inline void q5_half(const uint8_t * const (&sub)[P], const int8_t * const * xq, int64_t block,
                    __m512i (&part)[P][C][S]) {
    __m512i q[P][4];
    for (int p = 0; p < P; ++p) {
        q[p][0] = q5_register<4 * H + 0>(sub[p]);
        q[p][1] = q5_register<4 * H + 1>(sub[p]);
        q[p][2] = q5_register<4 * H + 2>(sub[p]);
        q[p][3] = q5_register<4 * H + 3>(sub[p]);
    }
    for (int j = 0; j < 4; ++j) {
        for (int c = 0; c < C; ++c) {
            int32_t four;
            std::memcpy(&four, xq[c] + 32 * block + 4 * (4 * H + j), 4);
            const __m512i xb = _mm512_set1_epi32(four);
            for (int p = 0; p < P; ++p) part[p][c][j % S] = _mm512_dpbusd_epi32(part[p][c][j % S], q[p][j], xb);
        }
    }
}

template <int C, int P>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
void tile_product_q5(const uint8_t * const * panel, const quantized_columns & x, int64_t k, int64_t c0, float * y,
                     int64_t rows, int64_t r0) {
    const column_refs<C> cols(x, k, k / 32, c0);   // offsets: each block's sum of values
    __m512 acc[P][C];
    for (int p = 0; p < P; ++p) {
        for (int c = 0; c < C; ++c) acc[p][c] = _mm512_setzero_ps();
    }
    constexpr int S = C * P <= 4 ? 2 : 1;   // as in tile_product
    for (int64_t sb = 0; sb < k / 256; ++sb) {
        __m512 d[P], dmin[P];
        alignas(64) uint8_t scales[P][2][128];   // [panel][scale, min][sub-block x 16 + row]
        for (int p = 0; p < P; ++p) {
            const uint8_t * head = panel[p] + sb * k_q5_super_bytes;
            d[p] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(head)));
            dmin[p] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(head + 32)));
            six_bit_values(head + 64, scales[p][0]);
            six_bit_values(head + 160, scales[p][1]);
        }
        for (int64_t j = 0; j < 8; ++j) {
            const int64_t block = sb * 8 + j;
            __m512 dsc[P], dm[P];
            const uint8_t * sub[P];
            for (int p = 0; p < P; ++p) {
                dsc[p] = _mm512_mul_ps(d[p], rows_as_float(scales[p][0] + 16 * j));
                dm[p] = _mm512_mul_ps(dmin[p], rows_as_float(scales[p][1] + 16 * j));
                sub[p] = panel[p] + sb * k_q5_super_bytes + k_q5_head_bytes + j * k_q5_sub_bytes;
            }
            __m512i part[P][C][S];
            for (int p = 0; p < P; ++p) {
                for (int c = 0; c < C; ++c) {
                    for (int s2 = 0; s2 < S; ++s2) part[p][c][s2] = _mm512_setzero_si512();
                }
            }
            q5_half<0, C, P, S>(sub, cols.q, block, part);
            q5_half<1, C, P, S>(sub, cols.q, block, part);
            for (int c = 0; c < C; ++c) {
                const float xs = cols.d[c][block];
                const __m512 xsv = _mm512_set1_ps(xs), mins = _mm512_set1_ps(xs * float(cols.offset[c][block]));
                for (int p = 0; p < P; ++p) {
                    const __m512i dot = S == 2 ? _mm512_add_epi32(part[p][c][0], part[p][c][S - 1]) : part[p][c][0];
                    acc[p][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dsc[p], xsv), acc[p][c]);
                    acc[p][c] = _mm512_fnmadd_ps(dm[p], mins, acc[p][c]);
                }
            }
        }
    }
    store_tile<C, P>(acc, y, c0, rows, r0);
}

// A K-quant lanes kernel (q6_K, or q5_K with Q5) for n columns from c0, n <= C.
template <bool Q5, int C, int P>
void tile_columns_k(const uint8_t * const * panel, const quantized_columns & x, int64_t k, int64_t c0, int64_t n,
                    float * y, int64_t rows, int64_t r0) {
    if constexpr (C > 1) {
        if (n < C) return tile_columns_k<Q5, C - 1, P>(panel, x, k, c0, n, y, rows, r0);
    }
    if constexpr (Q5) {
        tile_product_q5<C, P>(panel, x, k, c0, y, rows, r0);
    } else {
        tile_product_q6<C, P>(panel, x, k, c0, y, rows, r0);
    }
}

// 16 rows of q5_K -> one lanes panel at dst (dst may be the rows' own memory)
__attribute__((target("avx512f,avx512bw,avx512vl,avx2")))
void pack_q5_k_panel(const uint8_t * src, int64_t k, uint8_t * dst, std::vector<uint8_t> & raw, std::vector<uint8_t> & values) {
    constexpr size_t block_bytes = 176;   // d, dmin, scales[12], qh[32], qs[128]
    const int64_t nb = k / 256;
    const size_t row_bytes = size_t(nb) * block_bytes;
    raw.assign(src, src + k_lanes * row_bytes);
    values.resize(size_t(k_lanes * k));
    for (int64_t r = 0; r < k_lanes; ++r) {
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t * blk = raw.data() + r * row_bytes + b * block_bytes;
            const uint8_t * qh = blk + 16, * qs = blk + 48;
            uint8_t * v = values.data() + r * k + b * 256;
            for (int pair = 0; pair < 4; ++pair) {   // 64 values: low nibbles, then high nibbles of 32 bytes
                for (int l = 0; l < 32; ++l) {
                    v[64 * pair + l] = uint8_t((qs[32 * pair + l] & 0xF) | (((qh[l] >> (2 * pair)) & 1) << 4));
                    v[64 * pair + 32 + l] = uint8_t((qs[32 * pair + l] >> 4) | (((qh[l] >> (2 * pair + 1)) & 1) << 4));
                }
            }
        }
    }
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t sb = 0; sb < nb; ++sb) {
        uint8_t * out = dst + sb * k_q5_super_bytes;
        std::memset(out + 64, 0, 2 * 96);
        for (int64_t r = 0; r < k_lanes; ++r) {
            const uint8_t * blk = raw.data() + r * row_bytes + sb * block_bytes;
            std::memcpy(out + 2 * r, blk, 2);            // d
            std::memcpy(out + 32 + 2 * r, blk + 2, 2);   // dmin
            for (int j = 0; j < 8; ++j) {
                uint8_t sc, m;
                scale_min_k4(j, blk + 4, sc, m);
                const int64_t v = 16 * j + r;
                for (int kind = 0; kind < 2; ++kind) {
                    const uint8_t value = kind ? m : sc;
                    uint8_t * s = out + 64 + 96 * kind;
                    s[v % 64] |= uint8_t((value & 0xF) << (4 * (v / 64)));
                    s[64 + v % 32] |= uint8_t((value >> 4) << (2 * (v / 32)));
                }
            }
        }
        for (int chunk = 0; chunk < 4; ++chunk) {   // 64 values: two sub-blocks
            __m512i v[16];
            transpose_16x16(values.data() + sb * 256 + chunk * 64, k, v);
            for (int half = 0; half < 2; ++half) {
                const __m512i * reg = v + 8 * half;
                uint8_t * sub = out + k_q5_head_bytes + (2 * chunk + half) * k_q5_sub_bytes;
                for (int u = 0; u < 8; ++u) {
                    const uint64_t fifth = _cvtmask64_u64(_mm512_test_epi8_mask(reg[u], _mm512_set1_epi8(0x10)));
                    std::memcpy(sub + 256 + 8 * u, &fifth, 8);
                }
                for (int i = 0; i < 4; ++i) {
                    _mm512_storeu_si512(sub + 64 * i, _mm512_or_si512(_mm512_and_si512(reg[2 * i], m4),
                                                                     _mm512_slli_epi16(_mm512_and_si512(reg[2 * i + 1], m4), 4)));
                }
            }
        }
    }
}

bool cpu_has_vnni512() {
    static const bool yes = cpu_allows(cpu_level::avx512, {"avx512vnni"});
    return yes;
}

// Each thread takes a contiguous run of panels (one linear stream).
void panel_range(int64_t rows, int ith, int nth, int64_t & p0, int64_t & p1) {
    const int64_t panels = rows / k_lanes;
    p0 = panels * ith / nth;
    p1 = panels * (ith + 1) / nth;
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
    thread_local scratch_tile tile;
    quantize_columns(x, group, 128, xq);
    int64_t p0, p1;
    panel_range(rows, ith, nth, p0, p1);
    float * y = static_cast<float *>(dst->data);
    for (int64_t p = p0; p < p1; p += 2) {
        const int np = int(std::min<int64_t>(2, p1 - p));
        panel_view views[2];
        load_tile(static_cast<const char *>(w->data) + p * k_lanes * w->nb[1], w->nb[1], k, group, np,
                  q6 ? unpack_q6_k : unpack_q8_0, tile, views);
        panels_product(views, np, xq, k, group, n, y, rows, p * k_lanes);
    }
}

// Panels [p, p + np) of a K-quant lanes weight against every column, one panel at a time: a prompt
// unpacks each panel's values (in L1) for eight columns at once, a step for up to four.
template <bool Q5>
void k_quant_panels(const uint8_t * base, int64_t panel_bytes, const quantized_columns & xq, int64_t k, int64_t n,
                    float * y, int64_t rows, int64_t p, int np) {
    for (int i = 0; i < np; ++i) {
        const uint8_t * panel[1] = {base + (p + i) * panel_bytes};
        const int64_t r0 = (p + i) * k_lanes;
        for (int64_t c = 0; c < n; c += n >= 8 ? 8 : 4) {
            if (n >= 8) {
                tile_columns_k<Q5, 8, 1>(panel, xq, k, c, std::min<int64_t>(8, n - c), y, rows, r0);
            } else {
                tile_columns_k<Q5, 4, 1>(panel, xq, k, c, std::min<int64_t>(4, n - c), y, rows, r0);
            }
        }
    }
}

// A step (fewer than 8 columns) reads each thread's panels one at a time, a single linear stream.
// It used to read two side by side for more multiply-adds in flight, and the prefetchers lost both
// streams at every jump (panels are 13-40 KB): a 53 MB q6_K product read at 25-27 GB/s that way and
// at 38-52 one panel at a time, and talker + code predictor took 54 instead of 69 ms per frame
// (0.6B q6_k, alternating runs). Software prefetching ahead in both panels did not close the gap.
// Prompts keep eight columns (K-quants) or pairs (q8_0) per panel: they are compute-bound.
void lanes_panels(const ggml_tensor * w, const quantized_columns & xq, int64_t n, int64_t p0, int64_t p1, float * y) {
    const int64_t k = w->ne[0], rows = w->ne[1];
    const bool q6 = w->type == GGML_TYPE_Q6_K, q5 = w->type == GGML_TYPE_Q5_K;
    const int64_t gb = group_bytes(32, true);
    const int64_t panel_bytes = q6 ? (k / 256) * k_q6_super_bytes : q5 ? (k / 256) * k_q5_super_bytes : (k / 32) * gb;
    const auto * base = static_cast<const uint8_t *>(w->data);
    const int64_t per = n < 8 ? 1 : 2;   // q8_0 prompts: two panels side by side
    for (int64_t p = p0; p < p1; p += per) {
        const int np = int(std::min<int64_t>(per, p1 - p));
        if (q5) {
            k_quant_panels<true>(base, panel_bytes, xq, k, n, y, rows, p, np);
        } else if (q6) {
            k_quant_panels<false>(base, panel_bytes, xq, k, n, y, rows, p, np);
        } else {
            const panel_view views[2] = {{base + p * panel_bytes, gb, true}, {base + (p + 1) * panel_bytes, gb, true}};
            panels_product(views, np, xq, k, 32, n, y, rows, p * k_lanes);
        }
    }
}

// dst = the products of src[0 .. m-1] (lanes weights of one type and K) with src[m] (x [K, n]), one
// after another: [N_0, n], then [N_1, n], ... Panels are numbered across the weights (one linear
// stream through them all) and x is quantised once for all of them.
void lanes_op(ggml_tensor * dst, int ith, int nth, void * userdata) {
    int m = 1;
    while (m + 1 < GGML_MAX_SRC && dst->src[m + 1]) ++m;
    const ggml_tensor * x = dst->src[m];
    const int64_t n = x->ne[1];
    const bool q6 = dst->src[0]->type == GGML_TYPE_Q6_K, q5 = dst->src[0]->type == GGML_TYPE_Q5_K;
    thread_local quantized_columns xq;
    // q6_K: offsets remove the +32 of its stored values; q5_K: the block sums its mins multiply
    quantize_columns(x, q6 ? 16 : 32, q6 ? 32 : q5 ? 1 : 128, xq);
    int64_t panels = 0;
    for (int i = 0; i < m; ++i) panels += dst->src[i]->ne[1] / k_lanes;
    auto compute = [&](int64_t q0, int64_t q1) {   // panels [q0, q1)
        float * y = static_cast<float *>(dst->data);
        for (int i = 0, first = 0; i < m; ++i) {
            const ggml_tensor * w = dst->src[i];
            const int64_t np = w->ne[1] / k_lanes;
            const int64_t a = std::max<int64_t>(q0, first), b = std::min<int64_t>(q1, first + np);
            if (a < b) lanes_panels(w, xq, n, a - first, b - first, y);
            first += int(np);
            y += w->ne[1] * n;
        }
    };
    // chunks of about 64 KB of weights (q8_0 prompts: whole pairs of panels); a step reads a panel
    // in about a microsecond, and a claim on a thread's own run costs a few nanoseconds
    const ggml_tensor * w0 = dst->src[0];
    int64_t chunk = std::max<int64_t>(1, (int64_t(64) << 10) / (k_lanes * int64_t(ggml_row_size(w0->type, w0->ne[0]))));
    if (!q6 && !q5 && n >= 8) chunk += chunk % 2;
    claim_panels(static_cast<panel_claims *>(userdata), ith, nth, panels, chunk, compute);
}

std::mutex g_lanes_mutex;
std::unordered_set<const void *> g_lanes;
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
    if (block == 0 || w->ne[1] % k_lanes != 0 || w->ne[0] % 64 != 0 || x->ne[1] < 2 || !gemm_int8_available() ||
        is_lanes(w)) {
        return nullptr;
    }
    return one_column_op(ctx, w, x, w->type, block, gemm_op, /*any_columns=*/true);
#else
    (void)ctx, (void)w, (void)x;
    return nullptr;
#endif
}

bool lanes_eligible(const ggml_tensor * w) {
    return w && (w->type == GGML_TYPE_Q8_0 || w->type == GGML_TYPE_Q6_K || w->type == GGML_TYPE_Q5_K) && ggml_n_dims(w) == 2 &&
           w->ne[1] % k_lanes == 0 && w->ne[0] % 64 == 0 && ggml_is_contiguous(w) && gemm_int8_available();
}

void lanes_pack(const ggml_tensor * w, const void * src, void * dst) {
    if (w->type == GGML_TYPE_Q8_0) return lanes_pack_q8_0(src, dst, w->ne[0], w->ne[1]);
#ifdef KAZEIA_X86
    std::vector<uint8_t> raw, values;
    if (w->type == GGML_TYPE_Q5_K) {
        const size_t panel_bytes = size_t(w->ne[0] / 256) * size_t(k_q5_super_bytes);
        for (int64_t p = 0; p < w->ne[1] / k_lanes; ++p) {
            pack_q5_k_panel(static_cast<const uint8_t *>(src) + p * panel_bytes, w->ne[0],
                            static_cast<uint8_t *>(dst) + p * panel_bytes, raw, values);
        }
        return;
    }
    std::vector<float> scales;
    const size_t panel_bytes = size_t(w->ne[0] / 256) * size_t(k_q6_super_bytes);
    for (int64_t p = 0; p < w->ne[1] / k_lanes; ++p) {
        pack_q6_k_panel(static_cast<const uint8_t *>(src) + p * panel_bytes, w->ne[0],
                        static_cast<uint8_t *>(dst) + p * panel_bytes, raw, values, scales);
    }
#endif
}

void lanes_pack_q8_0(const void * src, void * dst, int64_t k, int64_t rows) {
#ifdef KAZEIA_X86
    const int64_t nb = k / 32;
    const size_t row_bytes = size_t(nb) * sizeof(block_q8), panel_bytes = k_lanes * row_bytes;
    std::vector<uint8_t> raw(panel_bytes), values(size_t(k_lanes * k));
    std::vector<uint16_t> scales(size_t(k_lanes * nb));
    for (int64_t p = 0; p < rows / k_lanes; ++p) {
        std::memcpy(raw.data(), static_cast<const uint8_t *>(src) + p * panel_bytes, panel_bytes);   // dst may be src
        for (int64_t r = 0; r < k_lanes; ++r) {
            for (int64_t b = 0; b < nb; ++b) {
                block_q8 blk;
                std::memcpy(&blk, raw.data() + r * row_bytes + b * sizeof(block_q8), sizeof blk);
                scales[size_t(r * nb + b)] = blk.d;
                for (int i = 0; i < 32; ++i) values[size_t(r * k + 32 * b + i)] = uint8_t(blk.qs[i]) ^ 0x80;
            }
        }
        write_panel(values.data(), k, 32, scales.data(), true, static_cast<uint8_t *>(dst) + p * panel_bytes);
    }
#else
    (void)src, (void)dst, (void)k, (void)rows;
#endif
}

void mark_lanes(const ggml_tensor * w, bool lanes) {
#ifdef KAZEIA_X86
    std::lock_guard<std::mutex> lock(g_lanes_mutex);
    if (lanes) {
        g_lanes.insert(w->data);
    } else {
        g_lanes.erase(w->data);
    }
#else
    (void)w, (void)lanes;
#endif
}

bool is_lanes(const ggml_tensor * w) {
#ifdef KAZEIA_X86
    if (!w || !w->data || (w->type != GGML_TYPE_Q8_0 && w->type != GGML_TYPE_Q6_K && w->type != GGML_TYPE_Q5_K)) return false;
    std::lock_guard<std::mutex> lock(g_lanes_mutex);
    return g_lanes.count(w->data) != 0;
#else
    (void)w;
    return false;
#endif
}

ggml_tensor * lanes_product(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
#ifdef KAZEIA_X86
    if (!is_lanes(w)) return nullptr;
    if (!ggml_is_contiguous(x)) x = ggml_cont(ctx, x);
    return one_column_op(ctx, w, x, w->type, w->type == GGML_TYPE_Q8_0 ? 32 : 256, lanes_op, /*any_columns=*/true,
                         panel_claims::create(ctx));
#else
    (void)ctx, (void)w, (void)x;
    return nullptr;
#endif
}

std::vector<ggml_tensor *> lanes_products(ggml_context * ctx, const std::vector<ggml_tensor *> & ws, ggml_tensor * x) {
#ifdef KAZEIA_X86
    if (ws.empty() || ws.size() + 1 >= GGML_MAX_SRC) return {};   // ggml_custom_4d takes fewer than GGML_MAX_SRC
    for (ggml_tensor * w : ws) {
        if (!is_lanes(w) || w->type != ws[0]->type || w->ne[0] != ws[0]->ne[0]) return {};
    }
    if (ws.size() == 1) return {lanes_product(ctx, ws[0], x)};
    if (!ggml_is_contiguous(x)) x = ggml_cont(ctx, x);
    if (x->type != GGML_TYPE_F32 || x->ne[0] != ws[0]->ne[0] || ggml_n_dims(x) > 2) return {};
    int64_t rows = 0;
    std::vector<ggml_tensor *> args(ws);
    for (ggml_tensor * w : ws) rows += w->ne[1];
    args.push_back(x);
    const int64_t n = x->ne[1];
    ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, rows * n, 1, 1, 1, args.data(), int(args.size()), lanes_op,
                                     GGML_N_TASKS_MAX, panel_claims::create(ctx));
    std::vector<ggml_tensor *> out;
    size_t offset = 0;
    for (ggml_tensor * w : ws) {
        out.push_back(ggml_view_2d(ctx, y, w->ne[1], n, w->ne[1] * sizeof(float), offset));
        offset += size_t(w->ne[1] * n) * sizeof(float);
    }
    return out;
#else
    (void)ctx, (void)ws, (void)x;
    return {};
#endif
}

}  // namespace kazeia
