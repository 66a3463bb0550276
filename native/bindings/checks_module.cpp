// kazeia._native_checks: the kernel checks and raw product timings (native/src/checks), for the
// tests and `kazeia bench` only; the engine's bindings (kazeia._native) do not link them.
#include "bindings.h"
#include "kazeia/ggml_log.h"

PYBIND11_MODULE(_native_checks, m) {
    m.doc() = "Kazeia's kernel checks: random products through Kazeia's kernels beside ggml's and exact sums";
    kazeia::ggml_log_install();
    kazeia::bindings::register_kernel_checks(m);
}
