#include "kernels/lanes_layout.h"

#include <cstring>

#include "kernels/gemv_common.h"

namespace kazeia::lanes {
namespace {

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
constexpr size_t k_q5_block_bytes = 176;   // ggml's block_q5_K: d, dmin, scales[12], qh[32], qs[128]

// A 64-byte block of a panel: word q (values 4q .. 4q + 3) of each of the 16 rows of `values`
// ([16][k] bytes), row r at bytes 4r .. 4r + 3.
struct block64 {
    uint8_t b[64];
};
block64 word_of_rows(const uint8_t * values, int64_t k, int64_t q) {
    block64 out;
    for (int64_t r = 0; r < k_rows; ++r) std::memcpy(out.b + 4 * r, values + r * k + 4 * q, 4);
    return out;
}

// 16 rows of bytes [16][k] and their scales [16][groups] (uint16 fp16 or float) -> one panel at dst
void write_panel(const uint8_t * rows, int64_t k, int64_t group, const void * scales, bool half_scales, uint8_t * dst) {
    const int64_t groups = k / group, quads = group / 4, gb = group_bytes(group, half_scales);
    for (int64_t q = 0; q < k / 4; ++q) {
        const block64 b = word_of_rows(rows, k, q);
        std::memcpy(dst + (q / quads) * gb + (q % quads) * 64, b.b, 64);
    }
    const size_t scale_size = half_scales ? 2 : 4;
    for (int64_t g = 0; g < groups; ++g) {
        for (int64_t r = 0; r < k_rows; ++r) {
            std::memcpy(dst + g * gb + quads * 64 + r * int64_t(scale_size),
                        static_cast<const uint8_t *>(scales) + (r * groups + g) * int64_t(scale_size), scale_size);
        }
    }
}

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

// 16 rows of q6_K -> one lanes panel at dst (dst may be the rows' own memory)
void pack_q6_k_panel(const uint8_t * src, int64_t k, uint8_t * dst, std::vector<uint8_t> & raw, std::vector<uint8_t> & values,
                     std::vector<float> & unused_scales) {
    const int64_t nb = k / 256;
    const size_t row_bytes = size_t(nb) * sizeof(block_q6k);
    raw.assign(src, src + k_rows * row_bytes);
    values.resize(size_t(k_rows * k));
    unused_scales.resize(size_t(k / 16));
    for (int64_t r = 0; r < k_rows; ++r) {
        unpack_q6_k_values(raw.data() + r * row_bytes, k, values.data() + r * k, unused_scales.data(), 0);
    }
    for (int64_t sb = 0; sb < nb; ++sb) {
        uint8_t * out = dst + sb * k_q6_super_bytes;
        for (int64_t r = 0; r < k_rows; ++r) {
            block_q6k blk;
            std::memcpy(&blk, raw.data() + r * row_bytes + sb * sizeof(block_q6k), sizeof blk);
            std::memcpy(out + 2 * r, &blk.d, 2);
            for (int t = 0; t < 16; ++t) out[32 + t * k_q6_group_bytes + 192 + r] = uint8_t(blk.scales[t]);
        }
        for (int64_t t = 0; t < 16; ++t) {   // groups of 16 values: four blocks
            block64 q[4];
            for (int j = 0; j < 4; ++j) q[j] = word_of_rows(values.data(), k, sb * 64 + 4 * t + j);
            uint8_t * gp = out + 32 + t * k_q6_group_bytes;
            for (int b = 0; b < 64; ++b) {
                gp[b] = uint8_t((q[0].b[b] & 0xF) | ((q[1].b[b] & 0xF) << 4));
                gp[64 + b] = uint8_t((q[2].b[b] & 0xF) | ((q[3].b[b] & 0xF) << 4));
                gp[128 + b] = uint8_t((q[0].b[b] >> 4) | ((q[1].b[b] >> 4) << 2) | ((q[2].b[b] >> 4) << 4) |
                                      ((q[3].b[b] >> 4) << 6));
            }
        }
    }
}

// 16 rows of q5_K -> one lanes panel at dst (dst may be the rows' own memory)
void pack_q5_k_panel(const uint8_t * src, int64_t k, uint8_t * dst, std::vector<uint8_t> & raw, std::vector<uint8_t> & values) {
    const int64_t nb = k / 256;
    const size_t row_bytes = size_t(nb) * k_q5_block_bytes;
    raw.assign(src, src + k_rows * row_bytes);
    values.resize(size_t(k_rows * k));
    for (int64_t r = 0; r < k_rows; ++r) {
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t * blk = raw.data() + r * row_bytes + b * k_q5_block_bytes;
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
    for (int64_t sb = 0; sb < nb; ++sb) {
        uint8_t * out = dst + sb * k_q5_super_bytes;
        std::memset(out + 64, 0, 2 * 96);
        for (int64_t r = 0; r < k_rows; ++r) {
            const uint8_t * blk = raw.data() + r * row_bytes + sb * k_q5_block_bytes;
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
        for (int64_t j = 0; j < 8; ++j) {   // sub-blocks of 32 values: eight blocks
            block64 q[8];
            for (int u = 0; u < 8; ++u) q[u] = word_of_rows(values.data(), k, sb * 64 + 8 * j + u);
            uint8_t * sub = out + k_q5_head_bytes + j * k_q5_sub_bytes;
            for (int b = 0; b < 64; ++b) {
                uint8_t fifth = 0;
                for (int u = 0; u < 8; ++u) fifth = uint8_t(fifth | (((q[u].b[b] >> 4) & 1) << u));
                sub[256 + b] = fifth;
            }
            for (int i = 0; i < 4; ++i) {
                for (int b = 0; b < 64; ++b) sub[64 * i + b] = uint8_t((q[2 * i].b[b] & 0xF) | ((q[2 * i + 1].b[b] & 0xF) << 4));
            }
        }
    }
}
#endif  // KAZEIA_X86

}  // namespace

int64_t panel_bytes(ggml_type type, int64_t k) {
    switch (type) {
        case GGML_TYPE_Q6_K: return (k / 256) * k_q6_super_bytes;
        case GGML_TYPE_Q5_K: return (k / 256) * k_q5_super_bytes;
        default: return (k / 32) * group_bytes(32, true);
    }
}

void pack(const ggml_tensor * w, const void * src, void * dst) {
    if (w->type == GGML_TYPE_Q8_0) return pack_q8_0(src, dst, w->ne[0], w->ne[1]);
#ifdef KAZEIA_X86
    const int64_t k = w->ne[0];
    const size_t bytes = size_t(panel_bytes(w->type, k));
    std::vector<uint8_t> raw, values;
    std::vector<float> scales;
    for (int64_t p = 0; p < w->ne[1] / k_rows; ++p) {
        const auto * s = static_cast<const uint8_t *>(src) + p * bytes;
        auto * d = static_cast<uint8_t *>(dst) + p * bytes;
        if (w->type == GGML_TYPE_Q5_K) {
            pack_q5_k_panel(s, k, d, raw, values);
        } else {
            pack_q6_k_panel(s, k, d, raw, values, scales);
        }
    }
#endif
}

void pack_q8_0(const void * src, void * dst, int64_t k, int64_t rows) {
    const int64_t nb = k / 32;
    const size_t row_bytes = size_t(nb) * sizeof(block_q8), bytes = k_rows * row_bytes;
    std::vector<uint8_t> raw(bytes), values(size_t(k_rows * k));
    std::vector<uint16_t> scales(size_t(k_rows * nb));
    for (int64_t p = 0; p < rows / k_rows; ++p) {
        std::memcpy(raw.data(), static_cast<const uint8_t *>(src) + p * bytes, bytes);   // dst may be src
        for (int64_t r = 0; r < k_rows; ++r) {
            for (int64_t b = 0; b < nb; ++b) {
                block_q8 blk;
                std::memcpy(&blk, raw.data() + r * row_bytes + b * sizeof(block_q8), sizeof blk);
                scales[size_t(r * nb + b)] = blk.d;
                for (int i = 0; i < 32; ++i) values[size_t(r * k + 32 * b + i)] = uint8_t(blk.qs[i]) ^ 0x80;
            }
        }
        write_panel(values.data(), k, 32, scales.data(), true, static_cast<uint8_t *>(dst) + p * bytes);
    }
}

void load_tile(const char * w, size_t row_bytes, ggml_type type, int64_t k, int n_panels, scratch_tile & t,
               panel_view * views) {
#ifdef KAZEIA_X86
    const bool q6 = type == GGML_TYPE_Q6_K;
    const int64_t group = q6 ? 16 : 32, groups = k / group, gb = group_bytes(group, false);
    t.rows.resize(size_t(k_rows * k));
    t.scale.resize(size_t(k_rows * groups));
    t.panels.resize(size_t(2 * groups * gb));
    for (int p = 0; p < n_panels; ++p) {
        for (int64_t r = 0; r < k_rows; ++r) {
            const char * row = w + (p * k_rows + r) * row_bytes;
            if (q6) {
                unpack_q6_k(row, k, t.rows.data() + r * k, t.scale.data() + r * groups);
            } else {
                unpack_q8_0(row, k, t.rows.data() + r * k, t.scale.data() + r * groups);
            }
        }
        uint8_t * dst = t.panels.data() + p * groups * gb;
        write_panel(t.rows.data(), k, group, t.scale.data(), false, dst);
        views[p] = {dst, gb, false};
    }
#else
    (void)w, (void)row_bytes, (void)type, (void)k, (void)n_panels, (void)t, (void)views;
#endif
}

void quantize_columns(const ggml_tensor * x, int64_t group, int32_t bias, quantized_columns & out) {
#ifdef KAZEIA_X86
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
#else
    (void)x, (void)group, (void)bias, (void)out;
#endif
}

}  // namespace kazeia::lanes
