// A causal convolution as one custom op over its input with history, as Kazeia's decoder products
// (kernels/gemm_bf16.h, kernels/gemm_fma.h) launch it: the shapes checked, the kernel flattened to
// [taps * channels, rows], bias and residual handed over as the op's third and fourth sources.
#pragma once

#include "ggml.h"

namespace kazeia {

inline ggml_tensor * causal_conv_op(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, int dilation, ggml_tensor * bias,
                                    ggml_tensor * residual, ggml_custom_op_t op, void * userdata) {
    if (ggml_n_dims(w) > 2) w = ggml_reshape_2d(ctx, w, ggml_nelements(w) / w->ne[ggml_n_dims(w) - 1], w->ne[ggml_n_dims(w) - 1]);
    const int64_t taps = w->ne[0] / x->ne[0];
    GGML_ASSERT(taps == 1 || dilation >= 1);
    const int64_t n = x->ne[1] - (taps - 1) * dilation;
    GGML_ASSERT(n > 0 && (!residual || bias));
    GGML_ASSERT(!bias || (bias->type == GGML_TYPE_F32 && ggml_nelements(bias) == w->ne[1] && ggml_is_contiguous(bias)));
    GGML_ASSERT(!residual || (residual->type == GGML_TYPE_F32 && ggml_is_contiguous(residual) &&
                              residual->ne[0] == w->ne[1] && residual->ne[1] == n));
    ggml_tensor * args[] = {w, x, bias, residual};
    const int n_args = residual ? 4 : bias ? 3 : 2;
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], n, 1, 1, args, n_args, op, GGML_N_TASKS_MAX, userdata);
}

}  // namespace kazeia
