// Products with bf16 weights (the speech decoder's) on CPUs with AVX-512 BF16. The vocoder's later
// convolutions have few output channels (96-384) over thousands of samples; ggml tiles them a few
// rows at a time and streams the whole im2col matrix (10 MB for a 4-frame chunk of the last block)
// again for every row tile, reaching 105-175 GFLOP/s there against 330-400 on square products. Here
// 64 weight rows sit in the lanes of four registers (two values of each row per lane, rearranged
// per launch), every column is converted to bf16 once and read once per 64 rows, and one vdpbf16ps
// multiplies 32 weights by a broadcast pair of column values.
//
// Each output is summed over its row in one fixed order whatever the number of columns, so a
// stream decoded frame by frame adds up exactly as the whole utterance decoded at once.
#pragma once

#include "ggml.h"

namespace kazeia {

// w: bf16 [K, N] contiguous, x: f32 [K, n] -> f32 [N, n]; nullptr where it does not apply (another
// type, N not a multiple of 16, K not a multiple of 32, a CPU without AVX-512 BF16). Whether it
// applies depends only on w, so a weight is always multiplied the same way.
ggml_tensor * gemm_bf16(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x);

}  // namespace kazeia
