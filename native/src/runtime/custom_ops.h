// Kernels ggml lacks for channel-major ([channels, time]) audio, as ggml custom ops.
#pragma once

#include "ggml.h"

namespace kazeia {

// SnakeBeta fused into one op: y = x + inv_beta * sin(x * alpha)^2 per channel. ggml's own sin
// is scalar libm (a quarter of the vocoder's time); this one is vectorised and evaluates every
// element with the same instructions, so results never depend on chunking.
// x: [channels, time] f32 (channel-major); alpha, inv_beta: [channels] f32, precomputed exp(alpha)
// and 1 / (exp(beta) + 1e-9).
ggml_tensor * snake_beta(ggml_context * ctx, ggml_tensor * x, ggml_tensor * alpha, ggml_tensor * inv_beta);

// The same function on plain arrays (for tests of the kernel itself).
void snake_beta_rows(const float * x, float * y, const float * alpha, const float * inv_beta, int64_t channels,
                     int64_t rows);

// im2col for channel-major input: x [C, T_in] -> cols [K * C, T_in - (K - 1) * dilation] with
// cols[k * C + c, t] = x[c, t + k * dilation]; each entry is a contiguous copy of C values
// (ggml_im2col wants time-major input and copies element by element).
ggml_tensor * im2col_channel_major(ggml_context * ctx, ggml_tensor * x, int kernel, int dilation);

}  // namespace kazeia
