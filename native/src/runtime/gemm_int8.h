// Many-column products for q8_0 and q6_K weights (a prompt's rows: the talker's prefill) with
// AVX-512 VNNI. ggml's q8_0 GEMM reaches about 220 GFLOP/s on two cores here and its q6_K one
// about 120, so a 67-row prompt costs a third of a second before the first frame.
//
// The kernel puts 16 weight rows in the lanes of a register: each tile of 32 rows is unpacked once
// to bytes (w + 128, unsigned) in lane order, then every group of columns runs over it with one
// vpdpbusd per 4 weights x 16 rows against a broadcast of 4 column values (signed q8_0, quantised
// as ggml quantises q8_0). Integer sums are exact per scale group (32 values for q8_0, 16 for
// q6_K); the +128 comes off through the column's group sums, and each group is scaled into float
// accumulators once. The columns are independent of one another, but the float sums are taken in
// another order than the one-column kernels': a batch of separate sequences never comes here.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace kazeia {

// From this many columns on, the prompt's products take the kernel (fewer: the one-column kernels,
// which read each weight block once per four columns, are as fast).
constexpr int64_t k_gemm_min_columns = 8;

// w: q8_0 or q6_K [K, N] (ggml order), x: f32 [K, n] -> f32 [N, n]; nullptr when the kernel does not
// apply (another type, N not a multiple of 32, K not a multiple of 64 or not whole blocks, x not 2-D contiguous, a CPU
// without AVX-512 VNNI): use another product.
ggml_tensor * gemm_int8(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x);

bool gemm_int8_available();

}  // namespace kazeia
