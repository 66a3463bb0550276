// Matrix-vector product for q6_K weights (the talker's and code predictor's one-column steps at the
// gate-passing type). As the q8_0 kernel: four blocks in flight per row (ggml's vec_dot keeps one
// accumulator chain per row) and one contiguous run of rows per thread. The vector is quantised
// to q8_K by ggml's own routine, so only the order of the float sums differs from ggml_mul_mat.
#pragma once

#include "ggml.h"

namespace kazeia {

// w: q6_K [K, N] (ggml order), x: f32 [K, 1] -> f32 [N, 1]; nullptr when the kernel does not
// apply (another type, more than one column, K not whole 256-blocks, no AVX2): use ggml_mul_mat.
ggml_tensor * gemv_q6_k(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x);

}  // namespace kazeia
