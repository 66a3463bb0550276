// The lanes layout of int8 weights (kernels/gemm_int8.h) and what its kernels read besides: 16
// weight rows per panel, four values of each row side by side, so that one 64-byte register holds
// four values of all 16 rows (an AVX-512 register's 16 lanes, or two 256-bit registers of 8 rows
// for AVX-VNNI: the same bytes serve both forms). Packing is written for any x86-64 CPU with AVX2
// (it runs once at load, or once per tile of a row-layout weight's prompt).
#pragma once

#include <cstdint>
#include <vector>

#include "ggml.h"

namespace kazeia::lanes {

constexpr int64_t k_rows = 16;   // weight rows per panel

// q8_0 (and the row GEMM's scratch panels): per scale group of G values, G / 4 blocks of 64 bytes
// (four values of each of the 16 rows, stored w + 128), then the 16 rows' scales: fp16 in stored
// weights (a q8_0 panel is then exactly as large as its 16 rows were), f32 in a scratch tile.
inline int64_t group_bytes(int64_t group, bool half_scales) {
    return group / 4 * 64 + (half_scales ? 32 : 64);
}

// q6_K: per super-block of 256 values, the rows' fp16 d (32 bytes), then per group of 16 values:
// the four value blocks' low nibbles two to a byte (128 bytes), their high bits four to a byte (64
// bytes) and the rows' int8 group scales (16 bytes): 3360 bytes, exactly the 16 rows' q6_K blocks.
// Values are q = w + 32 (unsigned); 32 x the column's group sum comes off.
constexpr int64_t k_q6_group_bytes = 208, k_q6_super_bytes = 32 + 16 * k_q6_group_bytes;

// q5_K: per super-block of 256 values, the rows' fp16 d and dmin (64 bytes); their 6-bit sub-block
// scales, then mins (per kind 128 values, value v = 16 x sub-block + row: low four bits of v and
// v + 64 in one byte, 64 bytes; top two bits of v, v + 32, v + 64 and v + 96 in one byte, 32
// bytes); then per sub-block of 32 values the eight value blocks' low nibbles two to a byte (256
// bytes) and their fifth bits, byte b holding block u's in bit u (64 bytes: a shift and a mask give
// a block's, in either register width): 2816 bytes, exactly the 16 rows' q5_K blocks. A weight is d sc q - dmin m with q in 0..31, so a sub-block adds
// d sc xs (q . x) - dmin m xs (the sum of its 32 values): the column's q8_0 blocks are the sub-blocks.
constexpr int64_t k_q5_sub_bytes = 320, k_q5_head_bytes = 64 + 2 * 96;
constexpr int64_t k_q5_super_bytes = k_q5_head_bytes + 8 * k_q5_sub_bytes;
static_assert(k_q5_super_bytes == 16 * 176, "a q5_K panel is as large as its 16 rows");

// Bytes of one panel (16 rows of k values) of a stored lanes weight of this type.
int64_t panel_bytes(ggml_type type, int64_t k);

// w's data (q8_0, q6_K or q5_K, rows a multiple of 16) from src into the lanes layout at dst, the
// same size (dst may be src).
void pack(const ggml_tensor * w, const void * src, void * dst);
void pack_q8_0(const void * src, void * dst, int64_t k, int64_t rows);

// One panel as the kernels see it.
struct panel_view {
    const uint8_t * base;
    int64_t group_bytes;
    bool half_scales;
};

// Scratch panels for a row-layout q8_0 or q6_K weight (two per 32-row tile), rearranged once per
// tile: rows [r0, r0 + 16 n_panels) of w (row stride row_bytes) -> views[0 .. n_panels).
struct scratch_tile {
    std::vector<uint8_t> rows;     // [16][k], as unpacked
    std::vector<float> scale;      // [16][groups], as unpacked
    std::vector<uint8_t> panels;   // up to two panels
};
void load_tile(const char * w, size_t row_bytes, ggml_type type, int64_t k, int n_panels, scratch_tile & t,
               panel_view * views);

// The columns quantised once per launch and thread: q8_0 values, their scales (one per 32) and,
// per scale group of the weights, `bias` x the sum of the values: what weights stored unsigned
// (w + bias) add to each integer sum.
struct quantized_columns {
    std::vector<int8_t> q;
    std::vector<float> d;
    std::vector<int32_t> offset;
};
void quantize_columns(const ggml_tensor * x, int64_t group, int32_t bias, quantized_columns & out);

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

}  // namespace kazeia::lanes
