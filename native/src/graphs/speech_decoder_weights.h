// The speech decoder's weights as its graphs read them: bound from the file once per model
// (convolution kernels rearranged tap-major, transposed ones as two taps per output phase or those
// taps in Winograd's F(2, 2), seven-tap ones in F(4, 7), Snake's exponentials precomputed, bf16
// matrices re-laid as f16 where that is faster), then only read.
#pragma once

#include <string>
#include <vector>

#include "ggml.h"
#include "kazeia/hparams.h"
#include "kazeia/speech_decoder.h"
#include "weights/derived_weights.h"
#include "weights/weight_copies.h"

namespace kazeia {
namespace decoder_parts {

struct conv_w {           // causal conv: weight tap-major, ne [Cin, K, Cout], bias [Cout]
    ggml_tensor * weight = nullptr;     // (none where the Winograd form applies)
    ggml_tensor * winograd = nullptr;   // where that form applies: its weights instead (kernels/winograd_conv.h)
    ggml_tensor * bias = nullptr;
    int k = 1, dilation = 1, c_in = 0, c_out = 0;
};

struct tconv_w {          // causal transposed conv with k = s or k = 2s: [Cin, Cout * k]
    ggml_tensor * w = nullptr;
    ggml_tensor * bias = nullptr;
    // k = 2s where the f32 products multiply it: w instead a two-tap convolution over the input
    // [Cin, 2, s * Cout] (output phase p of input i: taps p + s on input i - 1, then p on input i),
    // or (none) those taps in Winograd's F(2, 2), `pairs` (kernels/winograd_conv.h); and the bias
    // repeated per phase [s * Cout]
    ggml_tensor * pairs = nullptr;
    ggml_tensor * phase_bias = nullptr;
    int k = 0, stride = 0, c_in = 0, c_out = 0;
};

struct snake_w {          // y = x + inv_beta * sin(x * alpha)^2, alpha and inv_beta precomputed
    ggml_tensor * alpha = nullptr;
    ggml_tensor * inv_beta = nullptr;
};

struct attn_layer_w {
    ggml_tensor *attn_norm, *wq, *wk, *wv, *wo, *attn_scale, *ffn_norm, *w_gate, *w_up, *w_down, *ffn_scale;
};

struct convnext_w {
    tconv_w up;
    ggml_tensor *dw_taps, *dw_bias, *norm_w, *norm_b, *pw1, *pw1_b, *pw2, *pw2_b, *gamma;
};

struct res_unit_w {
    snake_w snake1, snake2;
    conv_w conv1, conv2;
};

struct voc_block_w {
    snake_w snake;
    tconv_w up;
    res_unit_w res[3];
};

}  // namespace decoder_parts

struct speech_decoder::weights {
    using conv_w = decoder_parts::conv_w;
    using tconv_w = decoder_parts::tconv_w;
    using snake_w = decoder_parts::snake_w;
    using attn_layer_w = decoder_parts::attn_layer_w;
    using convnext_w = decoder_parts::convnext_w;
    using voc_block_w = decoder_parts::voc_block_w;

    const model & m;
    const speech_decoder_hparams & hp;
    std::string device;          // accel-sched: the accelerator holding the weights ("" = none)
    weight_layout layout;        // where the weights live (accel-weights, accel-sched), else the file
    weight_copies copies;
    derived_weights derived{1024};
    std::vector<ggml_tensor *> codebooks;
    ggml_tensor *first_proj = nullptr, *rest_proj = nullptr;
    conv_w pre_conv;
    ggml_tensor *in_proj = nullptr, *in_proj_b = nullptr, *out_norm = nullptr, *out_proj = nullptr, *out_proj_b = nullptr;
    std::vector<attn_layer_w> layers;
    std::vector<convnext_w> upsample;
    conv_w voc_in;
    std::vector<voc_block_w> blocks;
    snake_w snake_out;
    conv_w voc_out;

    std::vector<const ggml_tensor *> replaced;   // file tensors only read to make derived copies
    // bf16 matrices on a CPU without Kazeia's bf16 kernels (no AVX-512 BF16, or KAZEIA_CPU below
    // it) are re-laid as f16 at load: with ggml built for AVX2 the 0.6B decoder took 45 ms a frame
    // so, against 55 as bf16 (in the PyPI wheel's ggml: 103), and came out closer to the reference
    // (58.6 against 40.6 dB: ggml's f16 products round the activations to f16, its bf16 ones to
    // bf16). A bf16 value in f16's range is exact in f16 (7 mantissa bits of 10); a matrix with a
    // value beyond it stays bf16. KAZEIA_KEEP_BF16=1 keeps them (to measure against).
    bool bf16_as_f16 = false;
    int relaid = 0;
    // f16 matrices (bf16 ones where the bf16 kernels do not run) in CPU memory are laid out at load
    // in the panels Kazeia's f32 products read in place (kernels/gemm_fma.h); same bytes, and only
    // those products read them
    bool panels_at_load = false;

    weights(const model & model_, const std::string & weights_buffer, const std::string & device_);

    // binding, at load
    static weight_layout layout_for(const std::string & weights_buffer, const std::string & device);
    // any weight a graph reads (a bf16 matrix re-laid as f16 where that is faster)
    ggml_tensor * mat(const std::string & name);
    // the type a weight is kept in: f16 for bf16 where bf16_as_f16 and every value fits
    ggml_type relaid_type(const ggml_tensor * src) const;
    static std::vector<uint8_t> as_f16(const std::vector<uint8_t> & bf16);
    // a file weight rearranged by `order` (permute_elements), in its relaid type
    ggml_tensor * derive(const std::string & name, const ggml_tensor * src, std::vector<int64_t> ne, const int (&order)[3],
                         bool product = false);
    // a matrix only Kazeia's products read: in panels where the f32 products will multiply it
    ggml_tensor * product_mat(const std::string & name);
    bool in_panels(ggml_type type, int64_t row, int64_t rows) const;
    ggml_tensor * w(const std::string & name) const;
    conv_w bind_conv(const std::string & name, int dilation);
    // input_period: a frame's columns at its input (F(2, 2) tiles need an even number)
    tconv_w bind_tconv(const std::string & name, int stride, int64_t input_period);
    snake_w bind_snake(const std::string & name);
    void bind_weights();
};

}  // namespace kazeia
