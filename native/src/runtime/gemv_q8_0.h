// Matrix-vector product for q8_0 weights, the talker's and code predictor's one-column steps.
// ggml's vec_dot sums a row's blocks into one accumulator, so each block waits on the previous
// fused multiply-add and the core falls behind memory; this kernel keeps four accumulators per
// row (four blocks in flight) and gives each thread one contiguous run of rows, a single linear
// stream for the prefetchers. (Interleaving four rows instead was 1.7x slower than ggml here.)
// The vector is quantised as ggml does (q8_0 blocks, fp16 scales); only the order of the float
// sums differs.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml.h"
#include "runtime/gemm_int8.h"
#include "runtime/gemv_k_quants.h"

namespace kazeia {

// w: q8_0 [K, N] (ggml order), x: f32 [K, 1] -> f32 [N, 1]; with `any_columns`, x: [K, n] -> [N, n],
// each column summed exactly as the one-column kernel sums it. nullptr when the kernel does not
// apply (another type, more than one column without any_columns, K not whole blocks, a CPU without
// AVX2): use ggml_mul_mat.
ggml_tensor * gemv_q8_0(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, bool any_columns = false);

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
// KAZEIA_GGML_PRODUCTS=1 in the environment uses ggml's everywhere (to measure the kernels against it).
inline ggml_tensor * product(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, bool cpu, bool same_per_column = false) {
    static const bool ggml_only = std::getenv("KAZEIA_GGML_PRODUCTS") != nullptr;
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

// The products of several weights with one x, w_i x each: one launch when they are all lanes
// weights of one type and K (runtime/gemm_int8.h), else product() for each.
inline std::vector<ggml_tensor *> products(ggml_context * ctx, const std::vector<ggml_tensor *> & ws, ggml_tensor * x, bool cpu,
                                           bool same_per_column = false) {
    std::vector<ggml_tensor *> ys = lanes_products(ctx, ws, x);
    if (!ys.empty()) return ys;
    for (ggml_tensor * w : ws) ys.push_back(product(ctx, w, x, cpu, same_per_column));
    return ys;
}

// Tests: run the AVX2 path even where the CPU has VNNI (to check both on one machine).
void use_avx2_only(bool yes);

}  // namespace kazeia
