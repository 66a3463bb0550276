// Test support for the matrix-product kernels Kazeia adds beside ggml's (repacked weights, its own
// one-column q8_0 kernel): the same random product computed several ways.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ggml.h"

namespace kazeia {

// Builds one way of computing W x in a graph context, or returns null when it does not apply.
using product_builder = std::function<ggml_tensor *(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x)>;

// y = W x for W: `type` [rows, cols] quantised by ggml from normal values and x: [cols, n], once per
// builder, on `threads` threads. An entry is empty where its builder did not apply.
std::vector<std::vector<float>> compare_products(ggml_type type, int64_t rows, int64_t cols, int64_t n, uint64_t seed,
                                                 int threads, const std::vector<product_builder> & builders);

// The best of `reps` timed launches of W x (W: `type` [rows, cols], x: f32 [cols, n]) through
// ggml_mul_mat on `threads` threads, in GFLOP/s: the GEMM peak the bench compares stages against.
double gemm_gflops_of(ggml_type type, int64_t rows, int64_t cols, int64_t n, int threads, int reps);

}  // namespace kazeia
