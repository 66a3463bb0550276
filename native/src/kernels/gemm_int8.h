// Products with int8 weights in register lanes (AVX-512 VNNI, AVX-VNNI or AVX2: kernels/lanes_tiles.h):
// 16 weight rows sit in the 16 lanes of a register (or two), four values each, so one vpdpbusd
// multiplies 64 weights by four values of a column broadcast to every lane. Integer sums are exact
// per scale group (32 values for q8_0, 16 for q6_K); the weights are stored as w + 128 (unsigned),
// whose extra 128 x (the column's group sum) comes off exactly, and each group is scaled into float
// accumulators once, in group order (q5_K: values stored as they are, 0..31; its mins take the
// column's block sums). A column's result is therefore the same whatever other columns share the
// launch: the talker's and code predictor's steps, batches of sequences and a prompt's rows all use
// one arithmetic.
//
// Two ways in:
// - `lanes` weights: q8_0, q6_K and q5_K matrices rearranged once at load, at the same size
//   (kernels/lanes_layout.h). A one-column step then costs about one instruction per 64 weights
//   (q8_0; q6_K adds three to unpack 6-bit values) where the row-by-row kernels need six per 32, so
//   steps become bound by memory, and a batch of B columns reads each weight once. Several lanes
//   weights that read the same input (a layer's q, k and v; gate and up) can share one launch
//   (lanes_products).
// - row-layout q8_0 and q6_K weights with many columns (a prompt's rows, when a weight was not
//   rearranged): each tile of 32 rows is rearranged into a scratch buffer once and used by every
//   column (ggml's q8_0 GEMM reaches about 220 GFLOP/s on two cores here, its q6_K one about 120).
#pragma once

#include <cstdint>
#include <vector>

#include "ggml.h"

namespace kazeia {

// From this many columns on, a row-layout weight's products take the GEMM (fewer: the one-column
// kernels, which read each weight block once per four columns, are as fast).
constexpr int64_t k_gemm_min_columns = 8;

// Whether this CPU level has a lanes form (AVX2 and up): the lanes products and the row-layout GEMM
// both need one.
bool lanes_available();

// w (row layout): q8_0 or q6_K [K, N], x: f32 [K, n] -> f32 [N, n]; nullptr when it does not apply
// (another type, N not a multiple of 16, K not a multiple of 64 or not whole blocks, x not 2-D
// contiguous, a CPU level without the lanes kernels): use another product.
ggml_tensor * gemm_int8(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x);

// Weights in the lanes layout: which q8_0, q6_K and q5_K matrices can be rearranged on this CPU
// (lanes::pack does it). The layout that makes a copy marks it (weights/weight_copies); no other
// product may read a marked tensor. The mark lives in the tensor (its `extra`): no global registry,
// and it goes with the tensor.
bool lanes_eligible(const ggml_tensor * w);
void mark_lanes(ggml_tensor * w);
bool is_lanes(const ggml_tensor * w);

// w (lanes, marked): q8_0, q6_K or q5_K [K, N], x: f32 [K, n] (any n) -> f32 [N, n].
ggml_tensor * lanes_product(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x);

// The products of several lanes weights of one type and K with the same x, as one launch: views
// [N_i, n] (contiguous) of one output. Each thread reads one contiguous run of all their panels and
// x is quantised once, instead of a launch, a barrier and a quantisation per weight. Empty when
// they are not all lanes weights of one type and K.
std::vector<ggml_tensor *> lanes_products(ggml_context * ctx, const std::vector<ggml_tensor *> & ws, ggml_tensor * x);

}  // namespace kazeia
