#include "graphs/launch_report.h"

#include <set>
#include <utility>

#include "ggml-cpu.h"
#include "kernels/gemm_fma.h"
#include "kernels/winograd_conv.h"

namespace kazeia {

bool is_view_op(const ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_NONE:
        case GGML_OP_VIEW:
        case GGML_OP_RESHAPE:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return true;
        default:
            return false;
    }
}

// Kazeia's own products are custom ops of a weight [K, N] and columns [K, n], giving [N, n], or
// (a convolution read in place) of a weight [taps x C, N] and bf16 input [C, T >= n], with bias and
// residual after them (its other custom ops, SnakeBeta, im2col and the prompt's attention, have
// other shapes)
bool is_custom_product(const ggml_tensor * t) {
    if (is_fma_product(t)) return true;
    if (is_winograd_op(t)) return false;   // (counted by matmul_flops as what it does)
    const ggml_tensor * w = t->src[0];
    const ggml_tensor * x = t->src[1];
    if (t->op != GGML_OP_CUSTOM || !w || !x || ggml_n_dims(w) != 2 || t->ne[0] != w->ne[1] || t->ne[2] != 1 ||
        t->ne[3] != 1) {
        return false;
    }
    if (x->type == GGML_TYPE_BF16) return w->ne[0] % x->ne[0] == 0 && t->ne[1] <= x->ne[1];
    return !t->src[2] && x->ne[0] == w->ne[0] && t->ne[1] == x->ne[1];
}

double matmul_flops(const ggml_tensor * t) {
    if (const int64_t macs = winograd_product_macs(t)) return 2.0 * double(macs);
    return t->op == GGML_OP_MUL_MAT || is_custom_product(t) ? 2.0 * double(t->src[0]->ne[0]) * double(ggml_nelements(t))
                                                           : 0.0;
}

launch_report describe_cpu_launch(const ggml_cgraph * gf) {
    launch_report r;
    auto * g = const_cast<ggml_cgraph *>(gf);
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        const ggml_tensor * node = ggml_graph_node(g, i);
        if (!is_view_op(node)) ++r.nodes;
        r.matmul_flops += matmul_flops(node);
    }
    r.ops["CPU"] = r.nodes;
    return r;
}

namespace {

const ggml_tensor * base_of(const ggml_tensor * t) {
    while (t->view_src) t = t->view_src;
    return t;
}

// memory of the accelerator's own (not the CPU backend's buffers, which an accelerator may also read)
bool lives_on(ggml_backend_t accel, ggml_backend_buffer_t buf) {
    ggml_backend_buffer_type_t t = ggml_backend_buffer_get_type(buf);
    return t != ggml_backend_cpu_buffer_type() && ggml_backend_supports_buft(accel, t);
}

// The backend a tensor's data lives on for this launch: the scheduler's assignment, else its buffer's.
ggml_backend_t backend_of(ggml_backend_sched_t sched, ggml_tensor * t, ggml_backend_t accel, ggml_backend_t cpu) {
    if (ggml_backend_t b = ggml_backend_sched_get_tensor_backend(sched, t)) return b;
    const ggml_tensor * base = base_of(t);
    return base->buffer && accel && lives_on(accel, base->buffer) ? accel : cpu;
}

// A weight (a leaf with its own, non-compute buffer) of `node` that lives in CPU memory.
const ggml_tensor * weight_in_cpu_memory(const ggml_tensor * node, ggml_backend_t accel) {
    for (int s = 0; s < GGML_MAX_SRC && node->src[s]; ++s) {
        const ggml_tensor * w = base_of(node->src[s]);
        if (w->op == GGML_OP_NONE && w->buffer && !lives_on(accel, w->buffer) &&
            ggml_backend_buffer_get_usage(w->buffer) != GGML_BACKEND_BUFFER_USAGE_COMPUTE) {
            return w;
        }
    }
    return nullptr;
}

std::string op_label(const ggml_tensor * t) {
    std::string s = ggml_op_desc(t);
    if (t->src[0] && (t->op == GGML_OP_MUL_MAT || t->op == GGML_OP_GET_ROWS)) s += "(" + std::string(ggml_type_name(t->src[0]->type)) + ")";
    return s;
}

}  // namespace

launch_report describe_sched_launch(ggml_backend_sched_t sched, ggml_cgraph * gf, ggml_backend_t accel, ggml_backend_t cpu) {
    launch_report r;
    r.scheduled = true;
    r.device = accel ? ggml_backend_name(accel) : "";
    r.splits = ggml_backend_sched_get_n_splits(sched);
    std::set<std::pair<const ggml_tensor *, ggml_backend_t>> copied;
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        ggml_tensor * node = ggml_graph_node(gf, i);
        if (is_view_op(node)) continue;
        ggml_backend_t b = backend_of(sched, node, accel, cpu);
        ++r.nodes;
        r.matmul_flops += matmul_flops(node);
        ++r.ops[ggml_backend_name(b)];
        for (int s = 0; s < GGML_MAX_SRC && node->src[s]; ++s) {
            ggml_tensor * src = node->src[s];
            if (backend_of(sched, src, accel, cpu) != b && copied.insert({src, b}).second) r.bytes_copied += ggml_nbytes(src);
        }
        if (!accel || b != cpu) continue;
        // an op of a stage scheduled onto the accelerator that the CPU computes: say why
        std::string why;
        if (const ggml_tensor * w = weight_in_cpu_memory(node, accel)) {
            why = std::string("reads ") + w->name + ", which " + r.device + " cannot hold (kept in CPU memory)";
        } else if (!ggml_backend_supports_op(accel, node)) {
            why = "not supported by " + r.device;
        } else if (base_of(node)->buffer && !lives_on(accel, base_of(node)->buffer)) {
            why = "writes CPU memory";
        } else {
            why = "placed by the scheduler next to its CPU inputs";
        }
        ++r.fallbacks[op_label(node) + ": " + why];
    }
    return r;
}

}  // namespace kazeia
