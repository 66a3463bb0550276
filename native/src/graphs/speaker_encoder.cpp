// Speaker encoder (ECAPA-TDNN, Base models): log-mel frames -> x-vector, in the order of the
// reference's Qwen3TTSSpeakerEncoder.forward. Activations are time-major (ggml ne = [time,
// channels]) so reflect padding, time means and the attention softmax run along ne0.
#include "kazeia/speaker_encoder.h"

#include <cfloat>
#include <stdexcept>

#include "ggml.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "graphs/graph_runner.h"

namespace kazeia {
namespace {

struct conv_layer {
    ggml_tensor * w;   // ne [K, Cin, Cout], f32
    ggml_tensor * b;   // [Cout]
};

}  // namespace

struct speaker_encoder::impl {
    const model & m;
    const speaker_encoder_hparams & hp;
    graph_runner runner;
    conv_layer block0;
    struct se_res2net {
        conv_layer tdnn1, tdnn2, se1, se2;
        std::vector<conv_layer> res2net;
        int dilation;
    };
    std::vector<se_res2net> blocks;
    conv_layer mfa, asp_tdnn, asp_conv, fc;

    conv_layer bind(const std::string & name) const {
        ggml_tensor * w = m.require(name + ".weight", "speaker encoder");
        ggml_tensor * b = m.require(name + ".bias", "speaker encoder");
        if (w->type != GGML_TYPE_F32) throw model_error("speaker encoder: " + name + " must be f32");
        return {w, b};
    }

    impl(const model & model_, std::shared_ptr<thread_pool> pool)
        : m(model_), hp(model_.hparams().speaker_encoder), runner(std::move(pool)) {
        if (!hp.present) throw model_error("this model has no speaker encoder (only Base models clone voices)");
        block0 = bind("spk.blk.0.conv");
        for (size_t b = 1; b + 1 < hp.channels.size(); ++b) {
            const std::string p = "spk.blk." + std::to_string(b) + ".";
            se_res2net blk{bind(p + "tdnn1"), bind(p + "tdnn2"), bind(p + "se.conv1"), bind(p + "se.conv2"), {},
                           hp.dilations[b]};
            for (int k = 0; k + 1 < hp.res2net_scale; ++k) blk.res2net.push_back(bind(p + "res2net." + std::to_string(k)));
            blocks.push_back(blk);
        }
        mfa = bind("spk.mfa");
        asp_tdnn = bind("spk.asp.tdnn");
        asp_conv = bind("spk.asp.conv");
        fc = bind("spk.fc");
    }

    // conv1d with reflect "same" padding (total dilation * (k - 1), left half rounded down), + bias
    ggml_tensor * conv(ggml_context * ctx, const conv_layer & c, ggml_tensor * x, int dilation = 1) {
        const int k = int(c.w->ne[0]);
        const int total = dilation * (k - 1);
        if (total > 0) x = ggml_pad_reflect_1d(ctx, x, total / 2, total - total / 2);
        ggml_tensor * cols = ggml_im2col(ctx, c.w, x, 1, 0, 0, 0, dilation, 0, false, GGML_TYPE_F32);   // [K*Cin, T]
        ggml_tensor * w2d = ggml_reshape_2d(ctx, c.w, c.w->ne[0] * c.w->ne[1], c.w->ne[2]);
        ggml_tensor * y = ggml_mul_mat(ctx, cols, w2d);                                            // [T, Cout]
        return ggml_add(ctx, y, ggml_reshape_2d(ctx, c.b, 1, c.b->ne[0]));
    }

    ggml_tensor * tdnn(ggml_context * ctx, const conv_layer & c, ggml_tensor * x, int dilation = 1) {
        return ggml_relu(ctx, conv(ctx, c, x, dilation));
    }

    ggml_tensor * block(ggml_context * ctx, const se_res2net & b, ggml_tensor * x) {
        ggml_tensor * residual = x;
        ggml_tensor * y = tdnn(ctx, b.tdnn1, x);
        const int64_t t = y->ne[0];
        const int64_t part = y->ne[1] / hp.res2net_scale;
        auto chunk = [&](int i) { return ggml_view_2d(ctx, y, t, part, y->nb[1], i * part * y->nb[1]); };
        ggml_tensor * out = ggml_cont(ctx, chunk(0));
        ggml_tensor * prev = nullptr;
        for (int i = 1; i < hp.res2net_scale; ++i) {
            ggml_tensor * in = i == 1 ? ggml_cont(ctx, chunk(i)) : ggml_add(ctx, chunk(i), prev);
            prev = tdnn(ctx, b.res2net[i - 1], in, b.dilation);
            out = ggml_concat(ctx, out, prev, 1);
        }
        y = tdnn(ctx, b.tdnn2, out);
        // squeeze-excitation: time mean -> 1x1 conv + ReLU -> 1x1 conv + sigmoid -> channel scale
        ggml_tensor * s = ggml_relu(ctx, conv(ctx, b.se1, ggml_mean(ctx, y)));
        s = ggml_sigmoid(ctx, conv(ctx, b.se2, s));   // [1, C]
        return ggml_add(ctx, ggml_mul(ctx, y, s), residual);
    }

    std::vector<float> embed(const float * mel, int64_t frames) {
        if (frames < 2) throw std::invalid_argument("too few mel frames for a speaker embedding");
        ggml_context * ctx = runner.begin();
        ggml_cgraph * gf = runner.graph();
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, frames, hp.mel_dim);   // [T, mel]
        ggml_set_input(x);
        ggml_tensor * h = tdnn(ctx, block0, x, hp.dilations[0]);
        ggml_tensor * features = nullptr;
        for (const auto & b : blocks) {
            h = block(ctx, b, h);
            features = features ? ggml_concat(ctx, features, h, 1) : h;
        }
        h = tdnn(ctx, mfa, features);                                                   // [T, C]
        // attentive statistics pooling
        auto stats = [&](ggml_tensor * weights, ggml_tensor * v, ggml_tensor *& mean, ggml_tensor *& std) {
            // weighted mean and std over time (weights sum to one along time)
            mean = weights ? ggml_sum_rows(ctx, ggml_mul(ctx, weights, v)) : ggml_mean(ctx, v);     // [1, C]
            ggml_tensor * d = ggml_sqr(ctx, ggml_sub(ctx, v, ggml_repeat(ctx, mean, v)));
            ggml_tensor * var = weights ? ggml_sum_rows(ctx, ggml_mul(ctx, weights, d)) : ggml_mean(ctx, d);
            std = ggml_sqrt(ctx, ggml_clamp(ctx, var, 1e-12f, FLT_MAX));
        };
        ggml_tensor *mean, *std;
        stats(nullptr, h, mean, std);
        ggml_tensor * a = ggml_concat(ctx, ggml_concat(ctx, h, ggml_repeat(ctx, mean, h), 1), ggml_repeat(ctx, std, h), 1);
        a = conv(ctx, asp_conv, ggml_tanh(ctx, tdnn(ctx, asp_tdnn, a)));                  // [T, C]
        a = ggml_soft_max(ctx, a);                                                       // over time
        ggml_tensor *mu, *sd;
        stats(a, h, mu, sd);
        ggml_tensor * pooled = ggml_concat(ctx, mu, sd, 1);                              // [1, 2C]
        ggml_tensor * xvec = conv(ctx, fc, pooled);                                      // [1, enc_dim]
        ggml_set_output(xvec);
        ggml_build_forward_expand(gf, xvec);
        runner.allocate();
        std::vector<float> by_time(size_t(frames) * hp.mel_dim);   // [frames][mel] -> [mel][frames]
        for (int64_t i = 0; i < frames; ++i) {
            for (int j = 0; j < hp.mel_dim; ++j) by_time[size_t(j) * frames + i] = mel[i * hp.mel_dim + j];
        }
        ggml_backend_tensor_set(x, by_time.data(), 0, ggml_nbytes(x));
        runner.compute();
        std::vector<float> out(ggml_nelements(xvec));
        ggml_backend_tensor_get(xvec, out.data(), 0, ggml_nbytes(xvec));
        return out;
    }
};

speaker_encoder::speaker_encoder(const model & m, std::shared_ptr<thread_pool> pool)
    : p_(std::make_unique<impl>(m, std::move(pool))) {}
speaker_encoder::~speaker_encoder() = default;

std::vector<float> speaker_encoder::embed(const float * mel, int64_t frames) { return p_->embed(mel, frames); }
int speaker_encoder::mel_dim() const { return p_->hp.mel_dim; }

}  // namespace kazeia
