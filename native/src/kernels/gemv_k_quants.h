// Products with q6_K and q5_K weights (the gate-passing types) on the CPU without the lanes layout
// (CPUs without AVX-512 VNNI): one column (the talker's and code predictor's steps) keeps four
// blocks in flight per row (ggml's vec_dot keeps one accumulator chain per row); several columns
// (the prefill) unpack each weight block once per four columns, where ggml unpacks it again for
// every column. One contiguous run of rows per thread. Columns are quantised to q8_K by ggml's own
// routine, so only the order of the float sums differs from ggml.
#pragma once

#include "ggml.h"

namespace kazeia {

// w: q6_K or q5_K [K, N] (ggml order), x: f32 [K, n] -> f32 [N, n]; nullptr when the kernel does
// not apply (another type, K not whole 256-blocks, x not 2-D contiguous, no AVX2): use ggml_mul_mat.
// `same_per_column`: the columns are separate sequences of a batch; each weight block is still
// unpacked once per four columns, but every column keeps the one-column kernel's four
// accumulators, so each comes out exactly as it would alone.
ggml_tensor * gemv_k_quant(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, bool same_per_column = false);

}  // namespace kazeia
