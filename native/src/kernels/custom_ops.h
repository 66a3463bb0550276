// Kernels ggml lacks for channel-major ([channels, time]) audio, as ggml custom ops, each with a
// path of standard ggml ops for stages scheduled onto an accelerator (custom ops only run on the
// CPU, so each would split the graph and copy its activations across).
#pragma once

#include "ggml.h"

namespace kazeia {

// SnakeBeta fused into one op: y = x + inv_beta * sin(x * alpha)^2 per channel. ggml's own sin
// is scalar libm (a quarter of the vocoder's time); this one is vectorised and evaluates every
// element with the same instructions, so results never depend on chunking.
// x: [channels, time] f32 (channel-major); alpha, inv_beta: [channels] f32, precomputed exp(alpha)
// and 1 / (exp(beta) + 1e-9).
// standard: MUL, SIN, SQR, MUL, ADD in the order ggml-vulkan fuses into its own snake kernel.
// out bf16 (custom op only): written rounded for a bf16 product (conv_bf16) that reads it next.
ggml_tensor * snake_beta(ggml_context * ctx, ggml_tensor * x, ggml_tensor * alpha, ggml_tensor * inv_beta,
                         bool standard = false, ggml_type out = GGML_TYPE_F32);

// The same function on plain arrays (for tests of the kernel itself).
void snake_beta_rows(const float * x, float * y, const float * alpha, const float * inv_beta, int64_t channels,
                     int64_t rows);

// im2col for channel-major input: x [C, T_in] -> cols [K * C, T_in - (K - 1) * dilation] with
// cols[k * C + c, t] = x[c, t + k * dilation]; each entry is a contiguous copy of C values
// (ggml_im2col wants time-major input and copies element by element).
// standard: the K shifted windows (each contiguous) concatenated along channels.
ggml_tensor * im2col_channel_major(ggml_context * ctx, ggml_tensor * x, int kernel, int dilation, bool standard = false);

// A causal convolution with few output channels (the vocoder's last has one) in f32 without
// im2col: w [K * C, N] tap-major, x [C, T] -> [N, T - (K - 1) * dilation]. (An im2col matrix of
// K x the input for a product of one row cost more than the product.)
ggml_tensor * conv_few_outputs(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, int dilation);

// x [C, T] followed by zero columns up to `columns` (ggml_pad on dimension 1, which goes element
// by element). standard: ggml_pad.
ggml_tensor * pad_columns(ggml_context * ctx, ggml_tensor * x, int64_t columns, bool standard = false);

// [a ++ b] along time (ggml_concat on dimension 1): channel-major tensors are two byte ranges, copied
// as such (ggml's concat goes element by element). standard: ggml_concat.
ggml_tensor * join_columns(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, bool standard = false);

}  // namespace kazeia
