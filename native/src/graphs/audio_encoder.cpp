// Audio encoder (the Mimi encoder half of the 12 Hz speech tokenizer, Base models): 24 kHz audio
// -> 16 codes per 80 ms frame, in the order of MimiModel._encode_frame: SEANet convs ->
// transformer -> downsampling conv -> split residual vector quantisation.
// Convolutions run time-major (ne = [time, channels]: im2col, padding along ne0); the
// transformer and the quantizer run channel-major.
#include "kazeia/audio_encoder.h"

#include <cmath>
#include <stdexcept>

#include "ggml.h"
#include "graphs/blocks.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "graphs/graph_runner.h"

namespace kazeia {
namespace {

struct mimi_conv {
    ggml_tensor * w;                 // ne [K, Cin, Cout]
    ggml_tensor * b = nullptr;
    int stride = 1;
    int dilation = 1;
};

}  // namespace

struct audio_encoder::impl {
    const model & m;
    const audio_encoder_hparams & hp;
    graph_runner runner;
    mimi_conv conv_in, conv_out, downsample;
    struct down_stage {
        std::vector<std::pair<mimi_conv, mimi_conv>> res;
        mimi_conv conv;
    };
    std::vector<down_stage> stages;
    struct layer {
        ggml_tensor *n1w, *n1b, *wq, *wk, *wv, *wo, *s1, *n2w, *n2b, *fc1, *fc2, *s2;
    };
    std::vector<layer> layers;
    ggml_tensor *sem_in, *aco_in;
    std::vector<ggml_tensor *> codebooks;

    ggml_tensor * w(const std::string & name) const { return m.require(name, "audio encoder"); }
    mimi_conv conv(const std::string & name, int stride = 1, int dilation = 1, bool bias = true) const {
        return {w(name + (bias ? ".weight" : "")), bias ? w(name + ".bias") : nullptr, stride, dilation};
    }

    impl(const model & model_, std::shared_ptr<thread_pool> pool)
        : m(model_), hp(model_.hparams().audio_encoder), runner(std::move(pool)) {
        if (!hp.present) throw model_error("this model has no audio encoder (only Base models clone voices)");
        conv_in = conv("enc.conv_in");
        const int n = int(hp.upsampling_ratios.size());
        for (int r = 0; r < n; ++r) {
            const std::string p = "enc.down." + std::to_string(r) + ".";
            down_stage st;
            int dilation = 1;
            for (int k = 0; k < hp.n_residual_layers; ++k) {
                const std::string pr = p + "res." + std::to_string(k) + ".";
                st.res.push_back({conv(pr + "conv1", 1, dilation), conv(pr + "conv2")});
                dilation *= hp.dilation_growth_rate;
            }
            st.conv = conv(p + "conv", hp.upsampling_ratios[n - 1 - r]);
            stages.push_back(st);
        }
        conv_out = conv("enc.conv_out");
        for (int i = 0; i < hp.tfm.n_layers; ++i) {
            const std::string p = "enc.tfm.blk." + std::to_string(i) + ".";
            layers.push_back({w(p + "attn_norm.weight"), w(p + "attn_norm.bias"), w(p + "attn_q.weight"),
                              w(p + "attn_k.weight"), w(p + "attn_v.weight"), w(p + "attn_output.weight"),
                              w(p + "attn_scale"), w(p + "ffn_norm.weight"), w(p + "ffn_norm.bias"),
                              w(p + "ffn_up.weight"), w(p + "ffn_down.weight"), w(p + "ffn_scale")});
        }
        downsample = {w("enc.downsample.weight"), nullptr, 2, 1};
        sem_in = w("enc.vq.semantic_input_proj.weight");
        aco_in = w("enc.vq.acoustic_input_proj.weight");
        for (int k = 0; k < hp.n_quantizers; ++k) codebooks.push_back(w("enc.vq.codebook." + std::to_string(k)));
    }

    // Mimi's causal conv: left pad (effective kernel - stride), right pad up to a whole last
    // frame; zeros, or the edge values with `replicate`. x: [T, Cin] time-major.
    ggml_tensor * causal(ggml_context * ctx, const mimi_conv & c, ggml_tensor * x, bool replicate = false) {
        const int64_t k = c.w->ne[0];
        const int64_t k_eff = (k - 1) * c.dilation + 1;
        const int64_t pad = k_eff - c.stride;
        const int64_t len = x->ne[0];
        const int64_t frames = int64_t(std::ceil(double(len - k_eff + pad) / c.stride + 1)) - 1;
        const int64_t extra = frames * c.stride + k_eff - pad - len;
        if (!replicate) {
            x = ggml_pad_ext(ctx, x, int(pad), int(extra), 0, 0, 0, 0, 0, 0);
        } else {
            auto edge = [&](int64_t at, int64_t n) {
                ggml_tensor * col = ggml_view_2d(ctx, x, 1, x->ne[1], x->nb[1], at * x->nb[0]);
                return ggml_repeat(ctx, col, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, x->ne[1]));
            };
            if (pad > 0) x = ggml_concat(ctx, edge(0, pad), x, 0);
            if (extra > 0) x = ggml_concat(ctx, x, edge(x->ne[0] - 1, extra), 0);
        }
        ggml_tensor * cols = ggml_im2col(ctx, c.w, x, c.stride, 0, 0, 0, c.dilation, 0, false, GGML_TYPE_F32);
        ggml_tensor * w2d = ggml_reshape_2d(ctx, c.w, c.w->ne[0] * c.w->ne[1], c.w->ne[2]);
        // the kernel as the product's first operand: f16 kernels are allowed there, not second
        ggml_tensor * y = ggml_cont(ctx, ggml_transpose(ctx, ggml_mul_mat(ctx, w2d, cols)));   // [T', Cout]
        return c.b ? ggml_add(ctx, y, ggml_reshape_2d(ctx, c.b, 1, c.b->ne[0])) : y;
    }


    // x: [hidden, T] channel-major
    ggml_tensor * transformer(ggml_context * ctx, ggml_tensor * x, ggml_tensor * pos, ggml_tensor * mask) {
        const auto & t = hp.tfm;
        const int64_t n = x->ne[1];
        for (size_t il = 0; il < layers.size(); ++il) {
            const auto & l = layers[il];
            ggml_tensor * h = layer_norm(ctx, x, l.n1w, l.n1b, t.norm_eps);
            ggml_tensor * q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.wq, h), t.head_dim, t.n_heads, n);
            ggml_tensor * k = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.wk, h), t.head_dim, t.n_kv_heads, n);
            ggml_tensor * v = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.wv, h), t.head_dim, t.n_kv_heads, n);
            q = rope_neox(ctx, q, pos, t.head_dim, t.rope_theta);
            k = rope_neox(ctx, k, pos, t.head_dim, t.rope_theta);
            ggml_tensor * keys = ggml_permute(ctx, k, 0, 2, 1, 3);                      // [hd, n, H]
            ggml_tensor * values = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3));    // [n, hd, H]
            ggml_tensor * o = ggml_mul_mat(ctx, l.wo, attention(ctx, q, keys, values, mask));
            x = named(residual(ctx, x, o, l.s1), "audio_encoder", int(il), "attn_out");
            h = layer_norm(ctx, x, l.n2w, l.n2b, t.norm_eps);
            h = feed_forward(ctx, h, l.fc1, nullptr, l.fc2, ffn_activation::gelu_erf, ggml_mul_mat);
            x = named(residual(ctx, x, h, l.s2), "audio_encoder", int(il), "ffn_out");
        }
        return x;
    }

    // nearest codebook row by Euclidean distance: argmax of 2 x.c - |c|^2
    ggml_tensor * nearest(ggml_context * ctx, ggml_tensor * codebook, ggml_tensor * x) {
        ggml_tensor * dots = ggml_mul_mat(ctx, codebook, x);                                   // [rows, T]
        ggml_tensor * norms = ggml_sum_rows(ctx, ggml_sqr(ctx, codebook));                   // [1, rows]
        norms = ggml_reshape_2d(ctx, norms, norms->ne[1], 1);                                 // [rows, 1]
        ggml_tensor * score = ggml_sub(ctx, ggml_scale(ctx, dots, 2.0f), norms);
        return ggml_argmax(ctx, score);   // per frame, first of equal maxima
    }

    std::vector<int32_t> encode(const float * audio, int64_t n_samples, int64_t & n_frames) {
        if (n_samples < 1920) throw std::invalid_argument("reference audio shorter than one frame (80 ms)");
        ggml_context * ctx = runner.begin();
        ggml_cgraph * gf = runner.graph();
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_samples, 1);
        ggml_set_input(x);
        ggml_tensor * h = causal(ctx, conv_in, x);
        for (const auto & st : stages) {
            for (const auto & [c1, c2] : st.res) {
                ggml_tensor * y = causal(ctx, c1, ggml_elu(ctx, h));
                y = causal(ctx, c2, ggml_elu(ctx, y));
                h = ggml_add(ctx, h, y);
            }
            h = causal(ctx, st.conv, ggml_elu(ctx, h));
        }
        h = causal(ctx, conv_out, ggml_elu(ctx, h));                                         // [T, hidden]
        const int64_t t = h->ne[0];
        ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, t);
        ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, t, t);
        ggml_set_input(pos);
        ggml_set_input(mask);
        ggml_tensor * c = transformer(ctx, ggml_cont(ctx, ggml_transpose(ctx, h)), pos, mask);   // [hidden, T]
        h = causal(ctx, downsample, ggml_cont(ctx, ggml_transpose(ctx, c)), true);          // [T', hidden]
        ggml_tensor * z = ggml_cont(ctx, ggml_transpose(ctx, h));                            // [hidden, T']
        const int64_t frames = z->ne[1];
        std::vector<ggml_tensor *> codes;
        auto rvq = [&](ggml_tensor * proj, int first, int count) {
            ggml_tensor * residual = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, proj, proj->ne[1], proj->ne[2]), z);
            for (int k = first; k < first + count; ++k) {
                ggml_tensor * idx = nearest(ctx, codebooks[k], residual);                   // I32 [T']
                ggml_set_output(idx);
                ggml_build_forward_expand(gf, idx);
                codes.push_back(idx);
                if (k + 1 < first + count) residual = ggml_sub(ctx, residual, ggml_get_rows(ctx, codebooks[k], idx));
            }
        };
        rvq(sem_in, 0, hp.n_semantic_quantizers);
        rvq(aco_in, hp.n_semantic_quantizers, hp.n_quantizers - hp.n_semantic_quantizers);
        runner.allocate();
        ggml_backend_tensor_set(x, audio, 0, ggml_nbytes(x));
        std::vector<int32_t> p(t);
        for (int64_t i = 0; i < t; ++i) p[i] = int32_t(i);
        const std::vector<float> mk = attention_mask(0, t, 0, t, t, hp.sliding_window);
        ggml_backend_tensor_set(pos, p.data(), 0, ggml_nbytes(pos));
        ggml_backend_tensor_set(mask, mk.data(), 0, ggml_nbytes(mask));
        runner.compute();
        n_frames = std::min<int64_t>(frames, (n_samples + 1919) / 1920);   // the reference keeps ceil(samples / 1920)
        std::vector<int32_t> out(size_t(n_frames) * hp.n_quantizers);
        std::vector<int32_t> col(frames);
        for (int k = 0; k < hp.n_quantizers; ++k) {
            ggml_backend_tensor_get(codes[k], col.data(), 0, ggml_nbytes(codes[k]));
            for (int64_t f = 0; f < n_frames; ++f) out[size_t(f) * hp.n_quantizers + k] = col[f];
        }
        return out;
    }
};

audio_encoder::audio_encoder(const model & m, std::shared_ptr<thread_pool> pool)
    : p_(std::make_unique<impl>(m, std::move(pool))) {}
audio_encoder::~audio_encoder() = default;

std::vector<int32_t> audio_encoder::encode(const float * audio, int64_t n_samples, int64_t & n_frames) {
    return p_->encode(audio, n_samples, n_frames);
}
int audio_encoder::n_quantizers() const { return p_->hp.n_quantizers; }

}  // namespace kazeia
