// The product dispatcher of the networks' graphs. The talker's and code predictor's: w x through the
// fastest of Kazeia's kernels that applies to the weight's type and layout (lanes, int8 GEMM,
// one-column kernels), else ggml's, with the one-column arithmetic kept where a batch's columns must
// come out as alone. The speech decoder's: the same kernel whatever the number of columns, so that
// streaming adds up exactly as offline decoding. (The encoders' f16 and f32 products are ggml's own.)
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "ggml.h"
#include "kazeia/cpu_level.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_fma.h"
#include "kernels/gemm_int8.h"
#include "kernels/gemv_k_quants.h"
#include "kernels/gemv_q8_0.h"

namespace kazeia {

// ggml_mul_mat one column at a time: exact per column, but the weights are read once per column.
inline ggml_tensor * columns_apart(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
    ggml_tensor * y = nullptr;
    for (int64_t c = 0; c < x->ne[1]; ++c) {
        ggml_tensor * yc = ggml_mul_mat(ctx, w, ggml_view_2d(ctx, x, x->ne[0], 1, x->nb[1], c * x->nb[1]));
        y = y ? ggml_concat(ctx, y, yc, 1) : yc;
    }
    return y;
}

// w x through Kazeia's kernel for its type (q8_0, q6_K) when one applies and `cpu` (the stage computes
// on the CPU backend), else ggml_mul_mat. A prompt's many columns take the int8 GEMM. `same_per_column`: the columns are separate sequences of a
// batch, and each must come out exactly as it would alone (one-column arithmetic for every column;
// ggml's product is then applied column by column where no kernel of Kazeia's applies).
// KAZEIA_GGML_PRODUCTS in the environment uses ggml's everywhere (to measure the kernels against it).
inline ggml_tensor * product(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, bool cpu, bool same_per_column = false) {
    const bool ggml_only = measurement_switches_in_force().ggml_products;
    if (is_lanes(w)) {   // rearranged at load: no other product can read it (and none is needed)
        ggml_tensor * y = lanes_product(ctx, w, x);
        if (!y) throw std::logic_error(std::string("no product reads ") + w->name + " in its lanes layout");
        return y;
    }
    const bool batch = same_per_column && x->ne[1] > 1;
    ggml_tensor * y = nullptr;
    if (cpu && !ggml_only && !batch && x->ne[1] >= k_gemm_min_columns) y = gemm_int8(ctx, w, x);
    if (cpu && !ggml_only && !y) {
        y = w->type == GGML_TYPE_Q6_K || w->type == GGML_TYPE_Q5_K ? gemv_k_quant(ctx, w, x, batch)
                                                                   : gemv_q8_0(ctx, w, x, batch);
    }
    if (y) return y;
    return batch ? columns_apart(ctx, w, x) : ggml_mul_mat(ctx, w, x);
}

// The fewest contiguous columns ggml hands to llamafile's sgemm rather than its vec_dot (the two
// round differently): two on x86-64; on ARM64 four for f32 and eight for f16 (whose sgemm there
// also works in f16 arithmetic where ggml was built with it).
#if defined(__aarch64__)
constexpr int64_t k_sgemm_min_columns = 8;
#else
constexpr int64_t k_sgemm_min_columns = 2;
#endif

// ggml_mul_mat by the same kernel whatever the number of columns: fewer columns than sgemm takes go
// in repeated up to that count, and the first ones are kept.
inline ggml_tensor * same_kernel_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    if (!ggml_is_contiguous(b)) b = ggml_cont(ctx, b);
    const int64_t n = b->ne[1];
    if (n >= k_sgemm_min_columns) return ggml_mul_mat(ctx, a, b);
    ggml_tensor * padded = b;
    while (padded->ne[1] < k_sgemm_min_columns) padded = ggml_concat(ctx, padded, b, 1);
    ggml_tensor * r = ggml_mul_mat(ctx, a, padded);
    ggml_tensor * first = ggml_view_4d(ctx, r, r->ne[0], n, r->ne[2], r->ne[3], r->nb[1], r->nb[2], r->nb[3], 0);
    return ggml_is_contiguous(first) ? first : ggml_cont(ctx, first);
}

// w x by one kernel for any number of columns. When `cpu` (the network computes on the CPU backend
// without accelerator-only ops): Kazeia's bf16 GEMM for bf16 weights on CPUs with AVX-512 BF16, its
// f32-arithmetic GEMM for f16 weights (and bf16 elsewhere); else same_kernel_mul_mat.
inline ggml_tensor * product_any_columns(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, bool cpu) {
    if (cpu) {
        if (ggml_tensor * y = gemm_bf16(ctx, w, x)) return y;
        if (ggml_tensor * y = gemm_fma(ctx, w, x)) return y;
    }
    return same_kernel_mul_mat(ctx, w, x);
}

// The products of several weights with one x, w_i x each: one launch when they are all lanes
// weights of one type and K (kernels/gemm_int8.h), else product() for each.
inline std::vector<ggml_tensor *> products(ggml_context * ctx, const std::vector<ggml_tensor *> & ws, ggml_tensor * x, bool cpu,
                                           bool same_per_column = false) {
    std::vector<ggml_tensor *> ys = lanes_products(ctx, ws, x);
    if (!ys.empty()) return ys;
    for (ggml_tensor * w : ws) ys.push_back(product(ctx, w, x, cpu, same_per_column));
    return ys;
}

}  // namespace kazeia
