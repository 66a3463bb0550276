// Products in f32 arithmetic for the speech decoder's f16 and bf16 weights: the f16-class path.
// ggml multiplies f16 weights by columns it first rounds to f16 (58 dB against f32 on the decoder)
// through llamafile's f16 tiles, and bf16 weights at bf16 (40 dB); here the columns stay f32, each
// weight is widened to f32 exactly as a tile of rows is rearranged into register lanes, and one
// fused multiply-add per weight and column does the rest. 64 rows (AVX-512) or 16 (AVX2, NEON) sit
// in the lanes of four, two or four registers and every column value is broadcast straight from
// memory, so the columns are read in place (a convolution's taps too: no im2col) once per tile of rows.
// (On ARM64 ggml's f16 products also work in f16 arithmetic where built with +fp16.)
//
// Every output is one chain of multiply-adds over its row in a fixed order whatever the number of
// columns, the thread count or the form (AVX-512, AVX2 and NEON give the same bits: an FMA rounds
// once), so a stream decoded frame by frame adds up exactly as the whole utterance decoded at once.
#pragma once

#include <cstdint>
#include <vector>

#include "ggml.h"

namespace kazeia {

// Whether this CPU, at the level in force (KAZEIA_CPU), runs these products (x86-64: AVX2 with FMA
// and F16C; ARM64: NEON).
bool gemm_fma_available();

// w: f16 or bf16 [K, N] contiguous, x: f32 [K, n] -> f32 [N, n]; nullptr where it does not apply
// (another type, N or K not a multiple of 16, a CPU below AVX2 or NEON). Whether it
// applies depends only on w, so a weight is always multiplied the same way. (f32 weights stay on
// ggml's product: the f32 decoder is the one compared with the reference.)
ggml_tensor * gemm_fma(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x);

// A causal convolution read in place: x f32 [C, T] holds the input with its history, w [K * C, N]
// tap-major -> f32 [N, T - (K - 1) * dilation], column t reading x[:, t + k * dilation] for tap k,
// plus bias [N] and then residual [N, n] where given, added in the order of separate ggml adds.
bool conv_fma_applies(const ggml_tensor * w, int64_t channels);
ggml_tensor * conv_fma(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, int dilation, ggml_tensor * bias = nullptr,
                       ggml_tensor * residual = nullptr);

// Whether a graph node is one of these products (for counting a launch's multiply-adds).
bool is_fma_product(const ggml_tensor * t);

// The layout these products read where it lies, made once at load (re-laid per launch otherwise:
// for a stream's one-frame launches that rearranging cost as much as the products): panels of the
// form's lanes rows, value index after value index, in the weight's own type. Whether a weight
// [rows][row] of `type` gets it in this process; its bytes in it (row-major bytes in); the mark
// that tells the products (and nothing else reads such a weight).
bool fma_panels_apply(ggml_type type, int64_t row, int64_t rows);
std::vector<uint8_t> fma_panels(const std::vector<uint8_t> & bytes, ggml_type type, int64_t row, int64_t rows);
void mark_fma_panels(ggml_tensor * w);

}  // namespace kazeia
