// The vocoder's seven-tap causal convolutions in Winograd's minimal-filtering form F(4, 7): four
// outputs `dilation` apart are made from ten transformed input columns times ten transformed weight
// matrices (U = G W, made in double at load, kept in f32), 10 products where the direct form takes
// 28: the residual units' dilated convolutions are 71% of the decoder's multiply-adds, and this
// cuts them to 36% of that. The transforms use the points 0, +-1, +-2, +-1/2, +-3/2 and infinity
// (every transform constant exact in f32); on random full-size weights one convolution lands
// ~110 dB from the exact product of its f16 weights, against ~130 dB for f32 products in the direct
// order and ~75 dB for rounding the weights to f16 at all.
//
// Streaming stays exact: which outputs share a tile depends only on their place in their frame
// (`period` columns at that point of the vocoder), never on how many frames a launch holds. A
// frame's tiles end at its last outputs; a first tile that would not fill starts up to three
// dilations before the frame and keeps only its outputs inside it, so the convolution keeps
// 9 dilations of input history where the direct form keeps 6.
// The transforms are V's multiply-adds in a fixed order and the products are the f32 products'
// (kernels/gemm_fma.h): the same bits in every form (AVX-512, AVX2, NEON) and for any thread count.
// KAZEIA_NO_WINOGRAD=1 keeps the direct form (to measure against).
#pragma once

#include <cstdint>
#include <vector>

#include "ggml.h"

namespace kazeia {

constexpr int k_winograd_taps = 7;
constexpr int k_winograd_outputs = 4;
constexpr int k_winograd_points = k_winograd_taps + k_winograd_outputs - 1;   // 10

// The input history this form reads before a launch's first output: 9 dilations.
constexpr int64_t winograd_history(int64_t dilation) { return (k_winograd_taps - 1 + k_winograd_outputs - 1) * dilation; }

// Which outputs of one frame of `period` columns share a tile: for each residue modulo `dilation`,
// that residue's outputs four by four, counted back from the frame's end.
struct winograd_pattern {
    int64_t period = 0, dilation = 1;
    // a tile's first output (its others: + i * dilation) from the frame's start (>= -3 dilations)
    std::vector<int64_t> tiles;
};
// the pattern of (period, dilation), made once per process
const winograd_pattern & winograd_pattern_of(int64_t period, int64_t dilation);

// Whether a causal convolution with weights of `type` [rows][taps * channels] (tap-major) gets this
// form in this process: seven taps, the f32 products' shapes (kernels/gemm_fma.h) on this CPU, not
// switched off.
bool winograd_applies(ggml_type type, int taps, int64_t channels, int64_t rows);

// U for weights of `type` (f16 or bf16) as the file stores them, [rows][channels][taps] (taps
// fastest): ten f32 matrices [rows][channels], each laid out in the f32 products' panels.
std::vector<uint8_t> winograd_weights(const std::vector<uint8_t> & file_bytes, ggml_type type, int64_t channels,
                                      int64_t rows);

// How the three steps (transform in, products, transform out) are launched: in_cache does them a
// group of tiles at a time per thread, where U fits in cache beside them (the vocoder's last two
// blocks, whose products are too small to hide the transformed tiles' trips through memory); else,
// and with `separate`, as three ops over all tiles. The same bits either way.
enum class winograd_steps { in_cache, separate };

// The convolution over x f32 [channels, winograd_history(dilation) + n] (input with its history),
// u f32 [channels, rows, 10] from winograd_weights; n a multiple of `period`. Plus bias [rows] and
// then residual [rows, n] where given, in the order of separate ggml adds. -> f32 [rows, n].
ggml_tensor * conv_winograd(ggml_context * ctx, ggml_tensor * u, ggml_tensor * x, int dilation, int64_t period,
                            ggml_tensor * bias, ggml_tensor * residual = nullptr,
                            winograd_steps steps = winograd_steps::in_cache);

// The transposed convolutions (kernel 2s, stride s) as two taps per output phase over their input,
// phase p of input i being A_p x[i-1] + B_p x[i] (rows: s x Cout), two inputs at a time in
// Winograd's F(2, 2): m0 = A (x[2t-1] - x[2t]), m1 = (A + B) x[2t], m2 = B (x[2t+1] - x[2t]);
// y[2t] = m0 + m1, y[2t+1] = m1 + m2. Three products where the two taps take four; U = [A, A + B,
// B] in f32 (A + B summed in double, rounded once), ~130 dB from the exact sums. A tile is two
// inputs from an even place of its launch, so launches of whole frames of an even number of inputs
// tile alike (streaming stays exact). Applies where U fits in k_pairs_weight_bytes (the vocoder's
// first block, 113 MB as f32, keeps its two f16 taps: it streams its weights at a few frames a
// launch).
bool tconv_pairs_applies(ggml_type type, int64_t c_in, int64_t rows);
// U from the two taps [rows][2][c_in] of `type` (f16 or bf16; tap 0 reads the input before):
// three f32 matrices [rows][c_in], each laid out in the f32 products' panels.
std::vector<uint8_t> tconv_pairs_weights(const std::vector<uint8_t> & two_taps, ggml_type type, int64_t c_in,
                                         int64_t rows);
// The transposed convolution over x f32 [c_in, 1 + n] (one input of history, n even), u f32
// [c_in, rows, 3], plus bias [rows] -> f32 [rows, n] (output column i: the s phases of input i).
ggml_tensor * tconv_pairs(ggml_context * ctx, ggml_tensor * u, ggml_tensor * x, ggml_tensor * bias);

// Whether a graph node is one of these forms' steps (transform in, products, transform out, or all
// three in one), and the multiply-adds of its products (0 for the other steps and any other node).
bool is_winograd_op(const ggml_tensor * t);
int64_t winograd_product_macs(const ggml_tensor * t);

}  // namespace kazeia
