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

// A causal convolution without im2col: x [C, T] (bf16, read in place, or f32, converted a chunk of
// columns at a time) holds the input with its history, w bf16 [K * C, N] tap-major -> f32
// [N, T - (K - 1) * dilation], column t reading x[:, t + k * dilation] for tap k, plus bias [N] and
// then residual [N, n] where given. The sums run in the order gemm_bf16 runs them over the im2col
// matrix and the adds in the order of separate ggml adds, so results equal that path's bit for bit.
bool conv_bf16_applies(const ggml_tensor * w, int64_t channels);
// Whether this CPU, at the level in force (KAZEIA_CPU), runs the bf16 GEMM and convolution at all.
bool gemm_bf16_available();
ggml_tensor * conv_bf16(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, int dilation, ggml_tensor * bias = nullptr,
                        ggml_tensor * residual = nullptr);

// f32 -> bf16 rounded as the products round their columns (nearest even; the instruction's handling
// of subnormals)
void to_bf16(const float * x, uint16_t * y, int64_t n);

}  // namespace kazeia
