// Binding the speech decoder's weights (graphs/speech_decoder_weights.h).
#include "graphs/speech_decoder_weights.h"

#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kazeia/cpu_level.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_fma.h"
#include "kernels/winograd_conv.h"
#include "graphs/graph_runner.h"

namespace kazeia {
namespace {

std::string idx(const std::string & a, int i, const std::string & b = "") { return a + std::to_string(i) + b; }

}  // namespace

using namespace decoder_parts;

weight_layout speech_decoder::weights::layout_for(const std::string & weights_buffer, const std::string & device) {
    if (!device.empty() && !weights_buffer.empty()) throw std::invalid_argument("weights go to a buffer type or a device, not both");
    if (!device.empty()) return device_layout(accelerator_device(device));
    return weights_buffer.empty() ? weight_layout{} : buffer_layout(weights_buffer);
}

speech_decoder::weights::weights(const model & model_, const std::string & weights_buffer, const std::string & device_)
    : m(model_), hp(model_.hparams().decoder), device(device_), layout(layout_for(weights_buffer, device_)),
      copies(&model_, layout),
      bf16_as_f16(!layout.buft && !gemm_bf16_available() && !measurement_switches_in_force().keep_bf16),
      panels_at_load(!layout.buft && gemm_fma_available() && !measurement_switches_in_force().no_decoder_panels) {
    bind_weights();
    derived.allocate([this] {
        for (const ggml_tensor * t : replaced) m.release_pages(t);
    }, layout.buft);
}

// any weight a graph reads (a bf16 matrix re-laid as f16 where that is faster)
ggml_tensor * speech_decoder::weights::mat(const std::string & name) {
    ggml_tensor * src = w(name);
    if (relaid_type(src) == src->type) return copies(src);
    replaced.push_back(src);
    ++relaid;
    return derived.add(name + ".f16", GGML_TYPE_F16, {src->ne[0], src->ne[1], src->ne[2], src->ne[3]},
                       [src](std::vector<uint8_t> & out) { out = as_f16(tensor_bytes(src)); });
}

// a matrix only Kazeia's products read: in panels where the f32 products will multiply it
ggml_tensor * speech_decoder::weights::product_mat(const std::string & name) {
    ggml_tensor * src = w(name);
    if (ggml_n_dims(src) != 2 || !in_panels(relaid_type(src), src->ne[0], src->ne[1])) return mat(name);
    return derive(name + ".panels", src, {src->ne[0], src->ne[1]}, {0, 1, 2}, true);
}

// whether a product weight of `type` [rows][row] is laid out for the f32 products at load
bool speech_decoder::weights::in_panels(ggml_type type, int64_t row, int64_t rows) const {
    return panels_at_load && (type == GGML_TYPE_F16 || (type == GGML_TYPE_BF16 && !gemm_bf16_available())) &&
           fma_panels_apply(type, row, rows);
}

// the type a weight is kept in: f16 for bf16 where bf16_as_f16 and every value fits
ggml_type speech_decoder::weights::relaid_type(const ggml_tensor * src) const {
    if (!bf16_as_f16 || src->type != GGML_TYPE_BF16 || ggml_n_dims(src) < 2) return src->type;
    std::vector<uint8_t> copy;
    const void * data = src->data;
    if (!src->buffer || !ggml_backend_buffer_is_host(src->buffer)) data = (copy = tensor_bytes(src)).data();
    const auto * v = static_cast<const ggml_bf16_t *>(data);
    for (int64_t i = 0, n = ggml_nelements(src); i < n; ++i) {
        if (std::fabs(ggml_bf16_to_fp32(v[i])) > 65504.0f) return src->type;
    }
    return GGML_TYPE_F16;
}

std::vector<uint8_t> speech_decoder::weights::as_f16(const std::vector<uint8_t> & bf16) {
    const size_t n = bf16.size() / 2;
    std::vector<float> f(n);
    ggml_bf16_to_fp32_row(reinterpret_cast<const ggml_bf16_t *>(bf16.data()), f.data(), int64_t(n));
    std::vector<uint8_t> out(bf16.size());
    ggml_fp32_to_fp16_row(f.data(), reinterpret_cast<ggml_fp16_t *>(out.data()), int64_t(n));
    return out;
}

// a file weight rearranged by `order` (permute_elements), in its relaid type; a `product` weight
// (ne: its row first, its rows last) also in panels where in_panels says so
ggml_tensor * speech_decoder::weights::derive(const std::string & name, const ggml_tensor * src, std::vector<int64_t> ne,
                                              const int (&order)[3], bool product) {
    const ggml_type type = relaid_type(src);
    relaid += type != src->type;
    const int64_t rows = ne.back(), row = ggml_nelements(src) / rows;
    const bool panels = product && in_panels(type, row, rows);
    replaced.push_back(src);
    const std::array<int, 3> o{order[0], order[1], order[2]};
    ggml_tensor * t = derived.add(name, type, std::move(ne), [src, o, type, panels, row, rows](std::vector<uint8_t> & out) {
        const int ord[3] = {o[0], o[1], o[2]};
        out = o == std::array<int, 3>{0, 1, 2} ? tensor_bytes(src) : permute_elements(src, ord);
        if (type != src->type) out = as_f16(out);
        if (panels) out = fma_panels(out, type, row, rows);
    });
    if (panels) mark_fma_panels(t);
    return t;
}

ggml_tensor * speech_decoder::weights::w(const std::string & name) const { return m.require(name, "speech decoder"); }

conv_w speech_decoder::weights::bind_conv(const std::string & name, int dilation) {
    ggml_tensor * src = w(name + ".weight");   // ne [K, Cin, Cout]
    conv_w c;
    c.k = int(src->ne[0]);
    c.c_in = int(src->ne[1]);
    c.c_out = int(src->ne[2]);
    c.dilation = dilation;
    c.bias = mat(name + ".bias");
    const ggml_type type = relaid_type(src);
    if (in_panels(type, int64_t(c.k) * c.c_in, c.c_out) && winograd_applies(type, c.k, c.c_in, c.c_out)) {
        // (then only the transformed weights are kept: every output comes from a tile)
        replaced.push_back(src);
        c.winograd = derived.add(name + ".winograd", GGML_TYPE_F32, {c.c_in, c.c_out, k_winograd_points},
                                 [src, c](std::vector<uint8_t> & out) {
                                     out = winograd_weights(tensor_bytes(src), src->type, c.c_in, c.c_out);
                                 });
        return c;
    }
    c.weight = derive(name + ".tap_major", src, {c.c_in, c.k, c.c_out}, {1, 0, 2}, true);
    return c;
}

// a transposed convolution's kernel [Cin][Cout][2s] as two taps per output phase: [s * Cout][2][Cin]
// (row p * Cout + co: tap 0 is kernel index p + s, on the input before; tap 1 is p)
std::vector<uint8_t> phase_taps(const ggml_tensor * src, int64_t stride) {
    const int64_t k = src->ne[0], c_out = src->ne[1], c_in = src->ne[2];
    const std::vector<uint8_t> file = tensor_bytes(src);
    const size_t es = ggml_type_size(src->type);
    std::vector<uint8_t> out(file.size());
    for (int64_t p = 0; p < stride; ++p) {
        for (int64_t co = 0; co < c_out; ++co) {
            for (int tap = 0; tap < 2; ++tap) {
                const int64_t at = tap == 0 ? p + stride : p;
                for (int64_t ci = 0; ci < c_in; ++ci) {
                    std::memcpy(&out[size_t(((p * c_out + co) * 2 + tap) * c_in + ci) * es], &file[size_t((ci * c_out + co) * k + at) * es], es);
                }
            }
        }
    }
    return out;
}

tconv_w speech_decoder::weights::bind_tconv(const std::string & name, int stride, int64_t input_period) {
    ggml_tensor * src = w(name + ".weight");   // ne [K, Cout, Cin]
    tconv_w c;
    c.k = int(src->ne[0]);
    c.c_out = int(src->ne[1]);
    c.c_in = int(src->ne[2]);
    c.stride = stride;
    if (c.k != stride && c.k != 2 * stride) {
        throw model_error("speech decoder: " + name + " has kernel " + std::to_string(c.k) + " for stride " +
                          std::to_string(stride) + " (supported: k = s or 2s)");
    }
    c.bias = mat(name + ".bias");
    const ggml_type type = relaid_type(src);
    const int64_t rows = int64_t(c.c_out) * stride;
    const bool f32_products = !layout.buft && gemm_fma_available() &&
                              (type == GGML_TYPE_F16 || (type == GGML_TYPE_BF16 && !gemm_bf16_available())) &&
                              fma_panels_apply(type, 2 * int64_t(c.c_in), rows);
    if (c.k == 2 * stride && c.bias->type == GGML_TYPE_F32 && f32_products) {
        // one launch writes the output, each phase's two taps summed in one chain (or in Winograd's
        // F(2, 2), two inputs at a time), bias added as it stores
        const ggml_tensor * bias = c.bias;
        c.phase_bias = derived.add(name + ".phase_bias", GGML_TYPE_F32, {rows}, [bias, stride](std::vector<uint8_t> & out) {
            const std::vector<uint8_t> one = tensor_bytes(bias);
            for (int p = 0; p < stride; ++p) out.insert(out.end(), one.begin(), one.end());
        });
        replaced.push_back(src);
        relaid += type != src->type;
        if (in_panels(type, 2 * int64_t(c.c_in), rows) && input_period % 2 == 0 && tconv_pairs_applies(type, c.c_in, rows)) {
            c.pairs = derived.add(name + ".pairs", GGML_TYPE_F32, {c.c_in, rows, 3}, [src, c, type, rows](std::vector<uint8_t> & out) {
                std::vector<uint8_t> taps = phase_taps(src, c.stride);
                if (type != src->type) taps = as_f16(taps);
                out = tconv_pairs_weights(taps, type, c.c_in, rows);
            });
            return c;
        }
        const bool panels = in_panels(type, 2 * int64_t(c.c_in), rows);
        c.w = derived.add(name + ".phase_taps", type, {c.c_in, 2, rows}, [src, c, type, panels, rows](std::vector<uint8_t> & out) {
            out = phase_taps(src, c.stride);
            if (type != src->type) out = as_f16(out);
            if (panels) out = fma_panels(out, type, 2 * int64_t(c.c_in), rows);
        });
        if (panels) mark_fma_panels(c.w);
        return c;
    }
    // rows ordered (tap, out channel): the first s taps of every input form one output block
    c.w = derive(name + ".phases", src, {c.c_in, int64_t(c.c_out) * c.k}, {2, 1, 0}, true);
    return c;
}

snake_w speech_decoder::weights::bind_snake(const std::string & name) {
    ggml_tensor * a = w(name + ".alpha");
    ggml_tensor * b = w(name + ".beta");
    snake_w s;
    const int64_t n = a->ne[0];
    s.alpha = derived.add(name + ".exp_alpha", GGML_TYPE_F32, {n}, [a, n](std::vector<uint8_t> & out) {
        out = tensor_bytes(a);
        auto * v = reinterpret_cast<float *>(out.data());
        for (int64_t i = 0; i < n; ++i) v[i] = std::exp(v[i]);
    });
    s.inv_beta = derived.add(name + ".inv_beta", GGML_TYPE_F32, {n}, [b, n](std::vector<uint8_t> & out) {
        out = tensor_bytes(b);
        auto * v = reinterpret_cast<float *>(out.data());
        for (int64_t i = 0; i < n; ++i) v[i] = 1.0f / (std::exp(v[i]) + 1e-9f);
    });
    return s;
}

void speech_decoder::weights::bind_weights() {
    for (int k = 0; k < hp.n_quantizers; ++k) codebooks.push_back(mat(idx("dec.vq.codebook.", k)));
    first_proj = mat("dec.vq.first_output_proj.weight");
    rest_proj = mat("dec.vq.rest_output_proj.weight");
    pre_conv = bind_conv("dec.pre_conv", 1);
    in_proj = product_mat("dec.tfm.input_proj.weight");
    in_proj_b = mat("dec.tfm.input_proj.bias");
    for (int i = 0; i < hp.tfm.n_layers; ++i) {
        const std::string p = idx("dec.tfm.blk.", i, ".");
        layers.push_back({mat(p + "attn_norm.weight"), product_mat(p + "attn_q.weight"), product_mat(p + "attn_k.weight"),
                          product_mat(p + "attn_v.weight"), product_mat(p + "attn_output.weight"), mat(p + "attn_scale"),
                          mat(p + "ffn_norm.weight"), product_mat(p + "ffn_gate.weight"), product_mat(p + "ffn_up.weight"),
                          product_mat(p + "ffn_down.weight"), mat(p + "ffn_scale")});
    }
    out_norm = mat("dec.tfm.output_norm.weight");
    out_proj = product_mat("dec.tfm.output_proj.weight");
    out_proj_b = mat("dec.tfm.output_proj.bias");
    for (size_t u = 0; u < hp.upsampling_ratios.size(); ++u) {
        const std::string p = idx("dec.up.", int(u), ".");
        convnext_w c;
        c.up = bind_tconv(p + "tconv", hp.upsampling_ratios[u], 0);
        ggml_tensor * dw = w(p + "dwconv.weight");   // ne [7, 1, C]
        c.dw_taps = derived.add(p + "dwconv.taps", dw->type, {dw->ne[2], dw->ne[0]},
                                [dw](std::vector<uint8_t> & out) { out = permute_elements(dw, {2, 0, 1}); });
        c.dw_bias = mat(p + "dwconv.bias");
        c.norm_w = mat(p + "norm.weight");
        c.norm_b = mat(p + "norm.bias");
        c.pw1 = product_mat(p + "pwconv1.weight");
        c.pw1_b = mat(p + "pwconv1.bias");
        c.pw2 = product_mat(p + "pwconv2.weight");
        c.pw2_b = mat(p + "pwconv2.bias");
        c.gamma = mat(p + "gamma");
        upsample.push_back(c);
    }
    voc_in = bind_conv("dec.voc.conv_in", 1);
    int64_t period = 1;   // a frame's columns at the vocoder's input, then after each block
    for (int r : hp.upsampling_ratios) period *= r;
    for (size_t b = 0; b < hp.upsample_rates.size(); ++b) {
        const std::string p = idx("dec.voc.blk.", int(b), ".");
        voc_block_w blk;
        blk.snake = bind_snake(p + "snake");
        blk.up = bind_tconv(p + "tconv", hp.upsample_rates[b], period);
        period *= hp.upsample_rates[b];
        const int dilations[3] = {1, 3, 9};
        for (int r = 0; r < 3; ++r) {
            const std::string pr = idx(p + "res.", r, ".");
            blk.res[r] = {bind_snake(pr + "snake1"), bind_snake(pr + "snake2"),
                          bind_conv(pr + "conv1", dilations[r]), bind_conv(pr + "conv2", 1)};
        }
        blocks.push_back(blk);
    }
    snake_out = bind_snake("dec.voc.snake_out");
    voc_out = bind_conv("dec.voc.conv_out", 1);
}

}  // namespace kazeia
