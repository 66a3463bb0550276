// Launch reports (kazeia/launch_report.h) read off an allocated graph: computed once when a graph
// is allocated, since the scheduler's assignment is fixed then.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"
#include "kazeia/launch_report.h"

namespace kazeia {

// A graph computed directly on the CPU backend.
launch_report describe_cpu_launch(const ggml_cgraph * gf);
// A graph allocated by `sched` over `accel` (may be null: the CPU alone) and `cpu`.
launch_report describe_sched_launch(ggml_backend_sched_t sched, ggml_cgraph * gf, ggml_backend_t accel, ggml_backend_t cpu);

// Ops that only reinterpret memory (no kernel runs for them).
bool is_view_op(const ggml_tensor * t);

// Floating-point operations of a matrix product node (ggml's, or one of Kazeia's custom products: 2 per
// multiply-add); 0 for any other op.
double matmul_flops(const ggml_tensor * t);

}  // namespace kazeia
