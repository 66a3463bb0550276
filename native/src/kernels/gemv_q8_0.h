// Matrix-vector product for q8_0 weights, the talker's and code predictor's one-column steps.
// ggml's vec_dot sums a row's blocks into one accumulator, so each block waits on the previous
// fused multiply-add and the core falls behind memory; this kernel keeps four accumulators per
// row (four blocks in flight) and gives each thread one contiguous run of rows, a single linear
// stream for the prefetchers. (Interleaving four rows instead was 1.7x slower than ggml here.)
// The vector is quantised as ggml does (q8_0 blocks, fp16 scales); only the order of the float
// sums differs.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace kazeia {

// w: q8_0 [K, N] (ggml order), x: f32 [K, 1] -> f32 [N, 1]; with `any_columns`, x: [K, n] -> [N, n],
// each column summed exactly as the one-column kernel sums it. nullptr when the kernel does not
// apply (another type, more than one column without any_columns, K not whole blocks, a CPU without
// AVX2): use ggml_mul_mat.
ggml_tensor * gemv_q8_0(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, bool any_columns = false);

// Tests: run the AVX2 path even where the CPU has VNNI (to check both on one machine).
void use_avx2_only(bool yes);

}  // namespace kazeia
