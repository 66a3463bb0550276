// Checks and measurements of the matrix-product kernels Kazeia adds beside ggml's (for tests and the
// bench): the same random product W x computed several ways, W [rows, cols] quantised by ggml from
// normal values, x [cols, n]; each result is [n][rows].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kazeia {

struct product_pair {
    bool applied = false;          // the kernel under test ran (else `theirs` repeats ggml's)
    std::vector<float> ggml, theirs;
    std::vector<float> exact;      // where filled: the dequantised W times x in f32 (what both approximate)
};

// q8_0, one column: ggml_mul_mat and Kazeia's kernel (`avx2_only`: its AVX2 path even with VNNI).
product_pair check_gemv_q8_0(int64_t rows, int64_t cols, uint64_t seed, bool avx2_only);
// q6_K or q5_K, n columns: ggml_mul_mat and Kazeia's one-column kernel (row layout, AVX2).
product_pair check_gemv_k_quant(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed);
// q4_K: the plain layout and the CPU's repacked one (applied: the weight was repacked).
product_pair check_repacked_matmul(int64_t rows, int64_t cols, int64_t n, uint64_t seed);
// q8_0 or q6_K, n columns (a prompt): ggml_mul_mat and Kazeia's int8 GEMM (applied: the CPU has it).
product_pair check_gemm_int8(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed);
// q8_0 or q6_K in the lanes layout (applied: this CPU has it): ggml_mul_mat (`ggml`), the n columns
// in one launch (`theirs`) and each column alone (`exact`); the last two must be equal.
product_pair check_lanes(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed);
// The same lanes weight as one product (`ggml`) and with its rows split in three weights whose
// products share one launch (`theirs`, as the talker's q, k and v do); they must be equal.
product_pair check_lanes_fused(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed);
// `threads` threads sharing `panels` panels in chunks of `chunk` through panel_claims, `launches`
// times, thread 0 slowed (2 ms per chunk, as by another process): whether every panel was computed
// exactly once in every launch, how many each thread computed in all, and whether the claims were
// back at zero after every launch.
struct panel_claims_result {
    bool each_once = true;
    std::vector<int64_t> per_thread;
    bool reset = true;
};
panel_claims_result check_panel_claims(int threads, int64_t panels, int64_t chunk, int launches);
// A prompt's attention (n rows after pos0 earlier ones, causal, grouped-query heads) through ggml's
// products (`ggml`) and Kazeia's one op (`theirs`; applied: this CPU has it), each [n][head_dim * heads].
product_pair check_prefill_attention(int64_t head_dim, int64_t heads, int64_t kv_heads, int64_t n, int64_t pos0,
                                     uint64_t seed);
// bf16 (the speech decoder's weights): ggml_mul_mat (`ggml`), Kazeia's GEMM over all n columns
// (`theirs`) and column by column (`exact`; must equal `theirs`); applied: this CPU has AVX-512 BF16.
product_pair check_gemm_bf16(int64_t rows, int64_t cols, int64_t n, uint64_t seed);
// A causal convolution (the vocoder's) with bf16 weights [taps x channels, rows] over input of
// taps x n columns, plus bias and residual: im2col, Kazeia's GEMM and separate adds (`ggml`), the
// convolution op over f32 input (`theirs`) and over bf16 input read in place (`exact`); all three
// must be equal bit for bit. applied: this CPU has AVX-512 BF16.
product_pair check_conv_bf16(int64_t channels, int64_t rows, int taps, int dilation, int64_t n, uint64_t seed);
// f16 or bf16 weights through the f32-arithmetic GEMM (`theirs`, all columns; `exact`, column by
// column) beside ggml_mul_mat; applied: this CPU has a form of it (AVX2 or AVX-512) at the level in force.
product_pair check_gemm_fma(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed);
// The causal convolution of check_conv_bf16 with f16 or bf16 weights through the f32-arithmetic
// op: im2col + the GEMM + separate adds (`ggml`) and the op reading f32 input in place (`theirs`,
// and again in `exact`); equal bit for bit.
product_pair check_conv_fma(const std::string & type, int64_t channels, int64_t rows, int taps, int dilation, int64_t n,
                            uint64_t seed);
// A seven-tap causal convolution (the vocoder's) with random f16 or bf16 weights [rows][channels]
// over `frames` frames of `period` columns after 9 x dilation of history, plus bias and residual:
// the direct f32-product op (`direct`), Winograd's form over all frames in one launch (`whole`) and
// one launch per frame (`by_frame`: must equal `whole` bit for bit), the three steps as separate ops
// over all tiles (`separate`: equal too, where `whole` keeps its tiles in cache), and the exact sums in double
// of the same rounded weights and input (`exact`); each [frames * period][rows]. applied: the form
// runs on this CPU at the level in force.
struct winograd_check {
    bool applied = false;
    std::vector<float> direct, whole, by_frame, separate, exact;
};
winograd_check check_conv_winograd(const std::string & type, int64_t channels, int64_t rows, int dilation, int64_t period,
                                   int64_t frames, uint64_t seed);
// A transposed convolution's two taps per phase (random f16 or bf16 [rows][2][c_in]) over `frames`
// frames of `period` inputs after one of history, plus bias: the two-tap f32-product convolution
// (`direct`), Winograd's F(2, 2) over all frames in one launch (`whole`) and one launch per frame
// (`by_frame`: equal bit for bit), and the exact sums in double (`exact`); `separate` stays empty.
winograd_check check_tconv_pairs(const std::string & type, int64_t c_in, int64_t rows, int64_t period, int64_t frames,
                                 uint64_t seed);
// any type: the n columns as a batch (`ggml`) and each column alone (`theirs`); they must be equal.
product_pair check_batch_columns(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed);

// The best of `reps` launches of W x through ggml_mul_mat (with `kazeia`: the product Kazeia's stages
// use) on `threads` threads, in GFLOP/s: the GEMM peak the bench compares stages against.
double gemm_gflops(const std::string & type, int64_t rows, int64_t cols, int64_t n, int threads, int reps,
                   bool kazeia = false);

}  // namespace kazeia
