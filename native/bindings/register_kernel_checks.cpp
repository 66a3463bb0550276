// The kernel checks and timings as Python functions: each product of Kazeia's kernels beside
// ggml's on random data (tests/native/test_*kernels.py, kazeia bench).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <string>

#include "bindings.h"
#include "kernel_checks.h"   // the checks' own API (native/src/checks), not the core's

namespace py = pybind11;

namespace kazeia::bindings {
namespace {

// f() run with the GIL released (a check runs for a while on ggml's threads)
template <class F>
auto released(F && f) {
    py::gil_scoped_release release;
    return f();
}

}  // namespace

void register_kernel_checks(py::module_ & m) {
    auto as_array = [](const std::vector<float> & v, int64_t n) {
        py::array_t<float> a({n, int64_t(v.size()) / std::max<int64_t>(n, 1)});
        std::copy(v.begin(), v.end(), a.mutable_data());
        return a;
    };
    auto pair = [as_array](const product_pair & p, int64_t n) {
        return py::make_tuple(p.applied, as_array(p.ggml, n), as_array(p.theirs, n));
    };
    auto triple = [as_array](const product_pair & p, int64_t n) {
        return py::make_tuple(p.applied, as_array(p.ggml, n), as_array(p.theirs, n), as_array(p.exact, n));
    };
    m.def("compare_gemv_q8_0", [as_array](int64_t rows, int64_t cols, uint64_t seed, bool avx2_only) {
        const product_pair p = released([&] { return check_gemv_q8_0(rows, cols, seed, avx2_only); });
        return py::make_tuple(p.applied, as_array(p.ggml, 1).attr("reshape")(rows), as_array(p.theirs, 1).attr("reshape")(-1));
    }, "W x for a random q8_0 W through ggml_mul_mat and Kazeia's one-column kernel: (applied?, ggml, ours)",
       py::arg("rows"), py::arg("cols"), py::arg("seed") = 0, py::arg("avx2_only") = false);
    m.def("compare_gemv_k_quant", [pair](const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
        const product_pair p = released([&] { return check_gemv_k_quant(type, rows, cols, n, seed); });
        return pair(p, n);
    }, "W x for a random q6_K or q5_K W and x of n columns through ggml_mul_mat and Kazeia's one-column kernel: "
       "(applied?, ggml [n, rows], ours [n, rows])", py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("n") = 1,
       py::arg("seed") = 0);
    m.def("compare_gemm_int8", [triple](const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
        const product_pair p = released([&] { return check_gemm_int8(type, rows, cols, n, seed); });
        return triple(p, n);
    }, "W x for a random q8_0 or q6_K W and x of n columns (a prompt) through ggml_mul_mat and Kazeia's int8 "
       "GEMM, and the dequantised W times x in f32: (applied?, ggml [n, rows], ours [n, rows], exact [n, rows])", py::arg("type"), py::arg("rows"), py::arg("cols"),
       py::arg("n"), py::arg("seed") = 0);
    m.def("compare_lanes", [triple](const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
        const product_pair p = released([&] { return check_lanes(type, rows, cols, n, seed); });
        return triple(p, n);
    }, "W x for a random q8_0 or q6_K W in the lanes layout the talker and code predictor use: (applied?, ggml "
       "[n, rows], all n columns in one launch [n, rows], each column alone [n, rows])", py::arg("type"), py::arg("rows"), py::arg("cols"),
       py::arg("n"), py::arg("seed") = 0);
    m.def("compare_lanes_fused", [pair](const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
        const product_pair p = released([&] { return check_lanes_fused(type, rows, cols, n, seed); });
        return pair(p, n);
    }, "W x for a random W in the lanes layout as one product and with W's rows split in three weights sharing one "
       "launch (as the talker's q, k and v): (applied?, one product [n, rows], split [n, rows])", py::arg("type"),
       py::arg("rows"), py::arg("cols"), py::arg("n"), py::arg("seed") = 0);
    m.def("check_panel_claims", [](int threads, int64_t panels, int64_t chunk, int launches) {
        const panel_claims_result r = released([&] { return check_panel_claims(threads, panels, chunk, launches); });
        return py::make_tuple(r.each_once, r.per_thread, r.reset);
    }, "threads sharing panels through panel_claims, thread 0 slowed (2 ms a chunk), `launches` times: (every "
       "panel computed once in every launch?, panels each thread computed, claims back at zero after each?)",
       py::arg("threads"), py::arg("panels"), py::arg("chunk"), py::arg("launches") = 3);
    m.def("compare_prefill_attention", [pair](int64_t head_dim, int64_t heads, int64_t kv_heads, int64_t n, int64_t pos0,
                                              uint64_t seed) {
        const product_pair p = released([&] { return check_prefill_attention(head_dim, heads, kv_heads, n, pos0, seed); });
        return pair(p, n);
    }, "A prompt's causal attention over random q, k, v (n rows after pos0 earlier ones) through ggml's products "
       "and Kazeia's prefill op: (applied?, ggml [n, head_dim * heads], ours [n, head_dim * heads])",
       py::arg("head_dim"), py::arg("heads"), py::arg("kv_heads"), py::arg("n"), py::arg("pos0") = 0, py::arg("seed") = 0);
    m.def("compare_conv_bf16", [triple](int64_t channels, int64_t rows, int taps, int dilation, int64_t n,
                                        uint64_t seed) {
        const product_pair p = released([&] { return check_conv_bf16(channels, rows, taps, dilation, n, seed); });
        return triple(p, taps * n - int64_t(taps - 1) * dilation);
    }, "A causal convolution with random bf16 weights [taps x channels, rows] over taps x n samples, plus bias and "
       "residual: (applied?, im2col + GEMM + adds, the convolution op on f32 input, the same on bf16 input), each "
       "[taps * n - (taps - 1) * dilation, rows]",
       py::arg("channels"), py::arg("rows"), py::arg("taps"), py::arg("dilation"), py::arg("n"), py::arg("seed") = 0);
    m.def("compare_gemm_bf16", [triple](int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
        const product_pair p = released([&] { return check_gemm_bf16(rows, cols, n, seed); });
        return triple(p, n);
    }, "W x for a random bf16 W (the speech decoder's type) through ggml_mul_mat and Kazeia's bf16 GEMM, over "
       "all n columns and column by column: (applied?, ggml [n, rows], ours [n, rows], ours alone [n, rows])",
       py::arg("rows"), py::arg("cols"), py::arg("n"), py::arg("seed") = 0);
    m.def("compare_gemm_fma", [triple](const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
        const product_pair p = released([&] { return check_gemm_fma(type, rows, cols, n, seed); });
        return triple(p, n);
    }, "W x for a random f16 or bf16 W through ggml_mul_mat and Kazeia's f32-arithmetic GEMM, over all n columns "
       "and column by column: (applied?, ggml [n, rows], ours [n, rows], ours alone [n, rows])",
       py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("n"), py::arg("seed") = 0);
    m.def("compare_conv_fma", [triple](const std::string & type, int64_t channels, int64_t rows, int taps, int dilation,
                                       int64_t n, uint64_t seed) {
        const product_pair p = released([&] { return check_conv_fma(type, channels, rows, taps, dilation, n, seed); });
        return triple(p, taps * n - int64_t(taps - 1) * dilation);
    }, "A causal convolution with random f16 or bf16 weights [taps x channels, rows] over taps x n samples, plus bias "
       "and residual: (applied?, im2col + the f32-arithmetic GEMM + adds, the convolution op reading its f32 input in "
       "place, the same again), each [taps * n - (taps - 1) * dilation, rows]",
       py::arg("type"), py::arg("channels"), py::arg("rows"), py::arg("taps"), py::arg("dilation"), py::arg("n"),
       py::arg("seed") = 0);
    m.def("compare_conv_winograd", [as_array](const std::string & type, int64_t channels, int64_t rows, int dilation,
                                              int64_t period, int64_t frames, uint64_t seed) {
        const winograd_check c = released([&] { return check_conv_winograd(type, channels, rows, dilation, period, frames, seed); });
        const int64_t n = frames * period;
        return py::make_tuple(c.applied, as_array(c.direct, n), as_array(c.whole, n), as_array(c.by_frame, n),
                              as_array(c.separate, n), as_array(c.exact, n));
    }, "A seven-tap causal convolution with random f16 or bf16 weights over frames x period outputs (after "
       "9 x dilation of history), plus bias and residual: (applied?, the direct f32-product op, Winograd's F(4,7) "
       "form in one launch, the same one launch per frame, the same in three separate ops over all tiles, the "
       "exact sums in double), each [frames * period, rows]",
       py::arg("type"), py::arg("channels"), py::arg("rows"), py::arg("dilation"), py::arg("period"), py::arg("frames"),
       py::arg("seed") = 0);
    m.def("compare_tconv_pairs", [as_array](const std::string & type, int64_t c_in, int64_t rows, int64_t period,
                                            int64_t frames, uint64_t seed) {
        const winograd_check c = released([&] { return check_tconv_pairs(type, c_in, rows, period, frames, seed); });
        const int64_t n = frames * period;
        return py::make_tuple(c.applied, as_array(c.direct, n), as_array(c.whole, n), as_array(c.by_frame, n),
                              as_array(c.exact, n));
    }, "A transposed convolution as two taps per phase (random f16 or bf16 [rows][2][c_in]) over frames x period "
       "inputs after one of history, plus bias: (applied?, the two-tap f32-product convolution, Winograd's F(2,2) "
       "in one launch, the same one launch per frame, the exact sums in double), each [frames * period, rows]",
       py::arg("type"), py::arg("c_in"), py::arg("rows"), py::arg("period"), py::arg("frames"), py::arg("seed") = 0);
    m.def("compare_batch_columns", [as_array](const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
        const product_pair p = released([&] { return check_batch_columns(type, rows, cols, n, seed); });
        return py::make_tuple(as_array(p.ggml, n), as_array(p.theirs, n));
    }, "W x for a random W of `type` and x of n columns as the columns of a batch (each must come out as alone) "
       "and column by column alone, on the CPU: (batch [n, rows], alone [n, rows])",
       py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("n"), py::arg("seed") = 0);
    m.def("compare_repacked_matmul", [pair](int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
        const product_pair p = released([&] { return check_repacked_matmul(rows, cols, n, seed); });
        return pair(p, n);
    }, "W x for a random q4_K W through the plain and the CPU's repacked layout: (repacked?, plain, repacked)",
       py::arg("rows"), py::arg("cols"), py::arg("n"), py::arg("seed") = 0);
    m.def("gemm_gflops", [](const std::string & type, int64_t rows, int64_t cols, int64_t n, int threads, int reps,
                            bool kazeia) {
        py::gil_scoped_release release;
        return gemm_gflops(type, rows, cols, n, threads, reps, kazeia);
    }, "GFLOP/s of the best of `reps` launches of W x through ggml_mul_mat, or with `kazeia` the product "
       "Kazeia's stages use (W: type [rows, cols], x: f32 [cols, n])",
       py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("n"), py::arg("threads"), py::arg("reps") = 5,
       py::arg("kazeia") = false);
}

}  // namespace kazeia::bindings
