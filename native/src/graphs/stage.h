// What the talker and code predictor stages share: finding a model's tensors, placing a stage's
// weights and KV caches for its placement, and small graph-building helpers.
#pragma once

#include <chrono>
#include <string>

#include "ggml.h"
#include "graphs/qwen3_stack.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "kazeia/stage_inputs.h"
#include "graphs/graph_runner.h"
#include "weights/weight_copies.h"

namespace kazeia {

// Where a stage's weights live for its placement.
inline weight_layout layout_for(const stage_placement & p) {
    if (p.scheduled && !p.device.empty()) return device_layout(accelerator_device(p.device));
    if (!p.weights_buffer.empty()) return buffer_layout(p.weights_buffer);
    return p.scheduled ? weight_layout{} : cpu_repack_layout();   // an accelerator cannot read the repacked layout
}

// The KV caches beside the weights when the stage runs on an accelerator, else CPU memory (null).
inline ggml_backend_buffer_type_t cache_buffer(const stage_placement & p, const weight_copies & layout) {
    return p.scheduled && !p.device.empty() ? layout.buffer_type() : nullptr;
}

inline compute_placement where(const stage_placement & p) {
    return p.scheduled ? compute_placement::sched : compute_placement::cpu;
}

// Graph nodes a batched launch may need (a code-predictor frame: 15 sub-steps x layers x sequences).
constexpr int k_batch_nodes = 65536;

inline double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

inline ggml_tensor * input_i32(ggml_context * ctx, int64_t n) {
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    ggml_set_input(t);
    return t;
}

inline ggml_tensor * input_f32(ggml_context * ctx, int64_t a, int64_t b) {
    ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, a, b);
    ggml_set_input(t);
    return t;
}

// Column c of a [n, cols] tensor (the tensor itself when it has one column: the same graph as alone).
inline ggml_tensor * column(ggml_context * ctx, ggml_tensor * t, int64_t c) {
    return t->ne[1] == 1 ? t : ggml_view_2d(ctx, t, t->ne[0], 1, t->nb[1], c * t->nb[1]);
}

// Positions [pos0, pos0 + n) and their causal mask over keys [0, pos0 + n) into a graph's inputs.
inline void set_causal_inputs(ggml_tensor * pos, ggml_tensor * mask, int64_t pos0, int64_t n) {
    std::vector<int32_t> positions(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = int32_t(pos0 + i);
    ggml_backend_tensor_set(pos, positions.data(), 0, ggml_nbytes(pos));
    const std::vector<float> mk = causal_mask(pos0, n);
    ggml_backend_tensor_set(mask, mk.data(), 0, ggml_nbytes(mask));
}

inline ggml_tensor * side_by_side(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return a ? ggml_concat(ctx, a, b, 1) : b;
}

}  // namespace kazeia
