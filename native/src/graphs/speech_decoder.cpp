// Speech decoder graph, in the order of Qwen3TTSTokenizerV2Decoder.forward:
// quantizer -> pre_conv -> pre_transformer -> upsample (ConvNeXt) -> vocoder (decoder.decoder).
//
// Activations are channel-major: ggml ne = [channels, time], so per-channel parameters broadcast
// along time and every linear map is a mul_mat with the weight as src0. Convolutions are sums of
// per-tap mul_mats over shifted views of [context ++ input]; transposed convolutions (k = 2s) are
// one mul_mat whose two halves are added with a one-step shift (no col2im, no transposes).
#include "kazeia/speech_decoder.h"

#include <array>
#include <cmath>
#include <map>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "graphs/blocks.h"
#include "kazeia/cpu_level.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "kernels/custom_ops.h"
#include "kernels/gemm_bf16.h"
#include "runtime/graph_runner.h"
#include "weights/derived_weights.h"
#include "weights/weight_copies.h"

namespace kazeia {
namespace {

constexpr int k_graph_size = 16384;
// Keys sit at slots whose index is their position modulo this (and the key axis is padded to a
// multiple of it), so every SIMD lane sums the same keys whatever the chunking: streamed audio
// matches offline decoding to the last bits.
constexpr int64_t k_kv_align = 64;

std::string idx(const std::string & a, int i, const std::string & b = "") { return a + std::to_string(i) + b; }

// Matrix product with the same kernel whatever the number of columns: ggml hands two or more
// contiguous columns to llamafile's sgemm and a single or strided one to its vec_dot, and the two
// round differently. Streaming one frame at a time must add up exactly like offline decoding.
ggml_tensor * mm(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    if (!ggml_is_contiguous(b)) b = ggml_cont(ctx, b);
    if (b->ne[1] != 1) return ggml_mul_mat(ctx, a, b);
    ggml_tensor * r = ggml_mul_mat(ctx, a, ggml_concat(ctx, b, b, 1));
    ggml_tensor * first = ggml_view_4d(ctx, r, r->ne[0], 1, r->ne[2], r->ne[3], r->nb[1], r->nb[2], r->nb[3], 0);
    return ggml_is_contiguous(first) ? first : ggml_cont(ctx, first);
}

struct conv_w {           // causal conv: weight tap-major, ne [Cin, K, Cout], bias [Cout]
    ggml_tensor * weight = nullptr;
    ggml_tensor * bias = nullptr;
    int k = 1, dilation = 1, c_in = 0, c_out = 0;
};

struct tconv_w {          // causal transposed conv with k = s or k = 2s: [Cin, Cout * k]
    ggml_tensor * w = nullptr;
    ggml_tensor * bias = nullptr;
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

}  // namespace

struct speech_decoder::weights {
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

    static weight_layout layout_for(const std::string & weights_buffer, const std::string & device) {
        if (!device.empty() && !weights_buffer.empty()) throw std::invalid_argument("weights go to a buffer type or a device, not both");
        if (!device.empty()) return device_layout(accelerator_device(device));
        return weights_buffer.empty() ? weight_layout{} : buffer_layout(weights_buffer);
    }

    weights(const model & model_, const std::string & weights_buffer, const std::string & device_)
        : m(model_), hp(model_.hparams().decoder), device(device_), layout(layout_for(weights_buffer, device_)),
          copies(&model_, layout),
          bf16_as_f16(!layout.buft && !gemm_bf16_available() && !measurement_switches_in_force().keep_bf16) {
        bind_weights();
        derived.allocate([this] {
            for (const ggml_tensor * t : replaced) m.release_pages(t);
        }, layout.buft);
    }

    // any weight a graph reads (a bf16 matrix re-laid as f16 where that is faster)
    ggml_tensor * mat(const std::string & name) {
        ggml_tensor * src = w(name);
        if (relaid_type(src) == src->type) return copies(src);
        replaced.push_back(src);
        ++relaid;
        return derived.add(name + ".f16", GGML_TYPE_F16, {src->ne[0], src->ne[1], src->ne[2], src->ne[3]},
                           [src](std::vector<uint8_t> & out) { out = as_f16(tensor_bytes(src)); });
    }

    // the type a weight is kept in: f16 for bf16 where bf16_as_f16 and every value fits
    ggml_type relaid_type(const ggml_tensor * src) const {
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

    static std::vector<uint8_t> as_f16(const std::vector<uint8_t> & bf16) {
        const size_t n = bf16.size() / 2;
        std::vector<float> f(n);
        ggml_bf16_to_fp32_row(reinterpret_cast<const ggml_bf16_t *>(bf16.data()), f.data(), int64_t(n));
        std::vector<uint8_t> out(bf16.size());
        ggml_fp32_to_fp16_row(f.data(), reinterpret_cast<ggml_fp16_t *>(out.data()), int64_t(n));
        return out;
    }

    // a file weight rearranged by `order` (permute_elements), in its relaid type
    ggml_tensor * derive(const std::string & name, const ggml_tensor * src, std::vector<int64_t> ne, const int (&order)[3]) {
        const ggml_type type = relaid_type(src);
        relaid += type != src->type;
        const std::array<int, 3> o{order[0], order[1], order[2]};
        return derived.add(name, type, std::move(ne), [src, o, type](std::vector<uint8_t> & out) {
            const int ord[3] = {o[0], o[1], o[2]};
            out = permute_elements(src, ord);
            if (type != src->type) out = as_f16(out);
        });
    }

    ggml_tensor * w(const std::string & name) const { return m.require(name, "speech decoder"); }

    conv_w bind_conv(const std::string & name, int dilation) {
        ggml_tensor * src = w(name + ".weight");   // ne [K, Cin, Cout]
        conv_w c;
        c.k = int(src->ne[0]);
        c.c_in = int(src->ne[1]);
        c.c_out = int(src->ne[2]);
        c.dilation = dilation;
        replaced.push_back(src);
        c.weight = derive(name + ".tap_major", src, {c.c_in, c.k, c.c_out}, {1, 0, 2});
        c.bias = mat(name + ".bias");
        return c;
    }

    tconv_w bind_tconv(const std::string & name, int stride) {
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
        // rows ordered (tap, out channel): the first s taps of every input form one output block
        replaced.push_back(src);
        c.w = derive(name + ".phases", src, {c.c_in, int64_t(c.c_out) * c.k}, {2, 1, 0});
        c.bias = mat(name + ".bias");
        return c;
    }

    snake_w bind_snake(const std::string & name) {
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

    void bind_weights() {
        for (int k = 0; k < hp.n_quantizers; ++k) codebooks.push_back(mat(idx("dec.vq.codebook.", k)));
        first_proj = mat("dec.vq.first_output_proj.weight");
        rest_proj = mat("dec.vq.rest_output_proj.weight");
        pre_conv = bind_conv("dec.pre_conv", 1);
        in_proj = mat("dec.tfm.input_proj.weight");
        in_proj_b = mat("dec.tfm.input_proj.bias");
        for (int i = 0; i < hp.tfm.n_layers; ++i) {
            const std::string p = idx("dec.tfm.blk.", i, ".");
            layers.push_back({mat(p + "attn_norm.weight"), mat(p + "attn_q.weight"), mat(p + "attn_k.weight"),
                              mat(p + "attn_v.weight"), mat(p + "attn_output.weight"), mat(p + "attn_scale"),
                              mat(p + "ffn_norm.weight"), mat(p + "ffn_gate.weight"), mat(p + "ffn_up.weight"),
                              mat(p + "ffn_down.weight"), mat(p + "ffn_scale")});
        }
        out_norm = mat("dec.tfm.output_norm.weight");
        out_proj = mat("dec.tfm.output_proj.weight");
        out_proj_b = mat("dec.tfm.output_proj.bias");
        for (size_t u = 0; u < hp.upsampling_ratios.size(); ++u) {
            const std::string p = idx("dec.up.", int(u), ".");
            convnext_w c;
            c.up = bind_tconv(p + "tconv", hp.upsampling_ratios[u]);
            ggml_tensor * dw = w(p + "dwconv.weight");   // ne [7, 1, C]
            c.dw_taps = derived.add(p + "dwconv.taps", dw->type, {dw->ne[2], dw->ne[0]},
                                    [dw](std::vector<uint8_t> & out) { out = permute_elements(dw, {2, 0, 1}); });
            c.dw_bias = mat(p + "dwconv.bias");
            c.norm_w = mat(p + "norm.weight");
            c.norm_b = mat(p + "norm.bias");
            c.pw1 = mat(p + "pwconv1.weight");
            c.pw1_b = mat(p + "pwconv1.bias");
            c.pw2 = mat(p + "pwconv2.weight");
            c.pw2_b = mat(p + "pwconv2.bias");
            c.gamma = mat(p + "gamma");
            upsample.push_back(c);
        }
        voc_in = bind_conv("dec.voc.conv_in", 1);
        for (size_t b = 0; b < hp.upsample_rates.size(); ++b) {
            const std::string p = idx("dec.voc.blk.", int(b), ".");
            voc_block_w blk;
            blk.snake = bind_snake(p + "snake");
            blk.up = bind_tconv(p + "tconv", hp.upsample_rates[b]);
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

};

struct speech_decoder_runner::impl {
    std::shared_ptr<const speech_decoder> decoder;   // keeps the weights alive
    bool scheduled;
    graph_runner runner;
    std::mutex turn;   // one session's launch at a time: graph, compute and read-back

    impl(std::shared_ptr<const speech_decoder> d, std::shared_ptr<thread_pool> pool, bool sched)
        : decoder(std::move(d)), scheduled(sched),
          runner(std::move(pool), k_graph_size, sched ? compute_placement::sched : compute_placement::cpu,
                 sched ? decoder->prepared().device : "") {}
};

speech_decoder_runner::speech_decoder_runner(std::shared_ptr<const speech_decoder> decoder,
                                             std::shared_ptr<thread_pool> pool, bool scheduled) {
    if (!decoder || !pool) throw std::invalid_argument("a decoder runner needs the decoder and a thread pool");
    p_ = std::make_unique<impl>(std::move(decoder), std::move(pool), scheduled);
}
speech_decoder_runner::~speech_decoder_runner() = default;
bool speech_decoder_runner::scheduled() const { return p_->scheduled; }

struct speech_decoder_session::impl {
    using stage_output = speech_decoder_session::stage_output;
    std::shared_ptr<speech_decoder_runner> owner;   // keeps the runner, and so the weights, alive
    speech_decoder_runner::impl & compute;
    const speech_decoder::weights & W;
    const speech_decoder_hparams & hp;
    speech_decoder_options opt;

    // ---- streaming state: one context tensor per history the network looks back at ---------
    ggml_context * state_ctx = nullptr;
    ggml_backend_buffer_t state_buf = nullptr;
    std::vector<ggml_tensor *> state;   // in graph-building order
    size_t state_cursor = 0;
    int kv_ctx = 0;                     // attention keys a query looks back at: sliding_window - 1
    int64_t kv_keep = 0;                // keys kept between calls: kv_ctx + alignment slack
    int64_t kv_lead = 0;                // keys before this call's first frame used by this call
    int64_t kv_padded = 0;              // key axis length of this call (multiple of k_kv_align)
    int64_t position = 0;               // position of the next frame since the last restart
    int64_t total_frames = 0;           // frames decoded since reset()
    std::vector<int32_t> history;       // last left_context frames (reference chunking replays them)

    graph_runner & runner;
    bool standard_ops;   // scheduled onto an accelerator: no custom ops (they would run on the CPU)

    impl(std::shared_ptr<speech_decoder_runner> r, const speech_decoder_options & o)
        : owner(std::move(r)), compute(owner->compute()), W(compute.decoder->prepared()), hp(W.hp), opt(o),
          runner(compute.runner), standard_ops(o.scheduled && !W.device.empty()) {
        if (o.scheduled != compute.scheduled) throw std::invalid_argument("the session's and its runner's placements differ");
        if (opt.chunk_frames <= opt.left_context || opt.left_context < 0) {
            throw std::invalid_argument("chunk_frames must exceed left_context >= 0");
        }
        if (opt.max_graph_frames < 1) throw std::invalid_argument("max_graph_frames must be at least 1");
        kv_ctx = hp.sliding_window - 1;
        kv_keep = kv_ctx + k_kv_align - 1;
        build_state();
    }

    ~impl() {
        if (state_buf) ggml_backend_buffer_free(state_buf);
        if (state_ctx) ggml_free(state_ctx);
    }

    // ---- state ----------------------------------------------------------------------------
    // Context sizes in the same order the graph consumes them.
    struct state_shape {
        int64_t channels, frames;
        ggml_type type;   // bf16 where a bf16 product reads it in place
    };
    std::vector<state_shape> state_shapes() const {
        std::vector<state_shape> s;
        auto conv_ctx = [&](const conv_w & c, ggml_type type = GGML_TYPE_F32) {
            if (c.k > 1) s.push_back({c.c_in, int64_t(c.k - 1) * c.dilation, type});
        };
        conv_ctx(W.pre_conv);
        const int64_t kv_dim = int64_t(hp.tfm.n_kv_heads) * hp.tfm.head_dim;
        for (size_t i = 0; i < W.layers.size(); ++i) {
            s.push_back({kv_dim, kv_keep, GGML_TYPE_F32});   // keys (after RoPE)
            s.push_back({kv_dim, kv_keep, GGML_TYPE_F32});   // values
        }
        for (const auto & u : W.upsample) {
            if (u.up.k > u.up.stride) s.push_back({u.up.c_in, 1, GGML_TYPE_F32});
            s.push_back({u.up.c_out, 6, GGML_TYPE_F32});   // depthwise k = 7
        }
        conv_ctx(W.voc_in);
        for (const auto & b : W.blocks) {
            if (b.up.k > b.up.stride) s.push_back({b.up.c_in, 1, input_type(b.up)});
            for (const auto & r : b.res) conv_ctx(r.conv1, input_type(r.conv1));   // after a snake
        }
        conv_ctx(W.voc_out);
        return s;
    }

    void build_state() {
        const auto shapes = state_shapes();
        ggml_init_params params{ggml_tensor_overhead() * (shapes.size() + 1), nullptr, true};
        state_ctx = ggml_init(params);
        for (const auto & [c, t, type] : shapes) state.push_back(ggml_new_tensor_2d(state_ctx, type, c, t));
        // (in the accelerator's memory when scheduled onto it: the ops that read and write it run there)
        ggml_backend_buffer_type_t buft = standard_ops && W.layout.buft ? W.layout.buft : ggml_backend_cpu_buffer_type();
        state_buf = ggml_backend_alloc_ctx_tensors_from_buft(state_ctx, buft);
        if (!state_buf) throw std::runtime_error("cannot allocate the speech decoder state");
        clear_state();
    }

    void clear_state() {
        ggml_backend_buffer_clear(state_buf, 0);
        position = 0;
    }

    // ---- graph pieces ---------------------------------------------------------------------
    struct graph_ctx {
        ggml_context * ctx;
        ggml_cgraph * gf;
        std::map<std::string, ggml_tensor *> * stages;   // non-null when recording stages
    };

    void record(graph_ctx & g, const char * name, ggml_tensor * t) {
        if (!name) return;
        ggml_set_name(t, name);   // also marks stage boundaries for profiling
        if (!g.stages) return;
        if (t->type != GGML_TYPE_F32) {   // (a snake written as bf16 for the product after it)
            t = ggml_cast(g.ctx, t, GGML_TYPE_F32);
            ggml_build_forward_expand(g.gf, t);
        }
        ggml_set_output(t);
        (*g.stages)[name] = t;
    }

    // [history ++ x] along time; the newest `history` columns become the next call's history.
    ggml_tensor * with_history(graph_ctx & g, ggml_tensor * x, int64_t keep) {
        if (keep == 0) return x;
        ggml_tensor * h = state[state_cursor++];
        ggml_tensor * xc = join_columns(g.ctx, h, x, standard_ops);
        const int64_t n = xc->ne[1];
        ggml_tensor * tail = ggml_view_2d(g.ctx, xc, xc->ne[0], keep, xc->nb[1], (n - keep) * xc->nb[1]);
        ggml_build_forward_expand(g.gf, ggml_cpy(g.ctx, tail, h));
        return xc;
    }

    // a weight times columns: bf16 weights on the CPU through Kazeia's kernel (the same for every
    // number of columns, as mm is), else mm
    ggml_tensor * prod(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) const {
        if (!standard_ops) {
            if (ggml_tensor * y = gemm_bf16(ctx, a, b)) return y;
        }
        return mm(ctx, a, b);
    }

    // What a convolution reads: bf16 where Kazeia's bf16 product reads its input in place (the
    // snake before it writes bf16, the values the product would round its columns to anyway).
    ggml_type input_type(const conv_w & c) const {
        return !standard_ops && conv_bf16_applies(c.weight, c.c_in) ? GGML_TYPE_BF16 : GGML_TYPE_F32;
    }
    ggml_type input_type(const tconv_w & c) const {
        return !standard_ops && conv_bf16_applies(c.w, c.c_in) ? GGML_TYPE_BF16 : GGML_TYPE_F32;
    }

    // causal conv over [history ++ x], plus `residual` where given. With bf16 weights on the CPU one
    // op reads the taps where they lie (bf16 input in place) and adds bias and residual as it stores;
    // f32 weights with few outputs (the last conv) get a plain sliding dot; else im2col and one
    // product whose contraction runs over all taps and channels (kernel rearranged tap-major at load)
    ggml_tensor * causal_conv(graph_ctx & g, const conv_w & c, ggml_tensor * x, ggml_tensor * residual = nullptr) {
        ggml_tensor * w2d = ggml_reshape_2d(g.ctx, c.weight, int64_t(c.k) * c.c_in, c.c_out);
        const int64_t history = int64_t(c.k - 1) * c.dilation;
        ggml_tensor * y;
        if (x->type == GGML_TYPE_BF16 || (!standard_ops && conv_bf16_applies(c.weight, c.c_in))) {
            ggml_tensor * xc = with_history(g, x, history);
            if (c.bias->type == GGML_TYPE_F32) return conv_bf16(g.ctx, c.weight, xc, c.dilation, c.bias, residual);
            y = conv_bf16(g.ctx, c.weight, xc, c.dilation);
        } else if (!standard_ops && c.k > 1 && c.c_out < 16 && c.weight->type == GGML_TYPE_F32) {
            y = conv_few_outputs(g.ctx, w2d, with_history(g, x, history), c.dilation);
        } else {
            ggml_tensor * cols = c.k == 1 ? x : im2col_channel_major(g.ctx, with_history(g, x, history), c.k, c.dilation,
                                                                     standard_ops);   // [K * Cin, n]
            y = prod(g.ctx, w2d, cols);
        }
        y = ggml_add(g.ctx, y, c.bias);   // [Cout, n]
        return residual ? ggml_add(g.ctx, residual, y) : y;
    }

    // causal transposed conv (output T * s): block i = taps[0, s) of input i + taps[s, 2s) of input i-1
    ggml_tensor * causal_tconv(graph_ctx & g, const tconv_w & c, ggml_tensor * x) {
        const int64_t n = x->ne[1];
        const int64_t block = int64_t(c.c_out) * c.stride;
        ggml_tensor * y;
        const bool bf16_in = x->type == GGML_TYPE_BF16;
        if (c.k == c.stride) {
            y = bf16_in ? conv_bf16(g.ctx, c.w, x, 1) : prod(g.ctx, c.w, x);
        } else {
            ggml_tensor * xc = with_history(g, x, 1);
            ggml_tensor * cols = bf16_in ? conv_bf16(g.ctx, c.w, xc, 1) : prod(g.ctx, c.w, xc);   // [Cout * k, n + 1]
            ggml_tensor * now = ggml_view_2d(g.ctx, cols, block, n, cols->nb[1], cols->nb[1]);
            ggml_tensor * prev = ggml_view_2d(g.ctx, cols, block, n, cols->nb[1], block * ggml_element_size(cols));
            y = ggml_add(g.ctx, now, prev);
        }
        y = ggml_reshape_2d(g.ctx, y, c.c_out, n * c.stride);
        return ggml_add(g.ctx, y, c.bias);
    }

    ggml_tensor * snake(graph_ctx & g, const snake_w & s, ggml_tensor * x, ggml_type out = GGML_TYPE_F32) {
        if (!ggml_is_contiguous(x)) x = ggml_cont(g.ctx, x);
        return snake_beta(g.ctx, x, s.alpha, s.inv_beta, standard_ops, out);
    }

    ggml_tensor * attention_layer(graph_ctx & g, const attn_layer_w & l, ggml_tensor * x, ggml_tensor * pos,
                                  ggml_tensor * mask) {
        const auto & t = hp.tfm;
        const int64_t n = x->ne[1];
        ggml_tensor * h = rms_norm(g.ctx, x, l.attn_norm, t.norm_eps);
        ggml_tensor * q = ggml_reshape_3d(g.ctx, prod(g.ctx, l.wq, h), t.head_dim, t.n_heads, n);
        ggml_tensor * k = ggml_reshape_3d(g.ctx, prod(g.ctx, l.wk, h), t.head_dim, t.n_kv_heads, n);
        ggml_tensor * v = prod(g.ctx, l.wv, h);
        q = rope_neox(g.ctx, q, pos, t.head_dim, t.rope_theta);
        k = rope_neox(g.ctx, k, pos, t.head_dim, t.rope_theta);
        const int64_t kv_dim = int64_t(t.n_kv_heads) * t.head_dim;
        auto window = [&](ggml_tensor * all) {   // aligned keys [kv_dim, kv_padded], zero padding
            ggml_tensor * used = ggml_view_2d(g.ctx, all, kv_dim, kv_lead + n, all->nb[1], (kv_keep - kv_lead) * all->nb[1]);
            return pad_columns(g.ctx, used, kv_padded, standard_ops);
        };
        ggml_tensor * k_all = window(with_history(g, ggml_reshape_2d(g.ctx, k, kv_dim, n), kv_keep));
        ggml_tensor * v_all = window(with_history(g, v, kv_keep));
        const int64_t n_kv = kv_padded;
        k_all = ggml_reshape_3d(g.ctx, k_all, t.head_dim, t.n_kv_heads, n_kv);
        v_all = ggml_reshape_3d(g.ctx, v_all, t.head_dim, t.n_kv_heads, n_kv);

        ggml_tensor * keys = ggml_permute(g.ctx, k_all, 0, 2, 1, 3);                       // [hd, n_kv, Hkv]
        ggml_tensor * values = ggml_cont(g.ctx, ggml_permute(g.ctx, v_all, 1, 2, 0, 3));   // [n_kv, hd, Hkv]
        ggml_tensor * o = prod(g.ctx, l.wo, attention(g.ctx, q, keys, values, mask, mm));
        x = residual(g.ctx, x, o, l.attn_scale);

        h = rms_norm(g.ctx, x, l.ffn_norm, t.norm_eps);
        auto product = [this](ggml_context * c, ggml_tensor * w, ggml_tensor * a) { return prod(c, w, a); };
        return residual(g.ctx, x, feed_forward(g.ctx, h, l.w_up, l.w_gate, l.w_down, ffn_activation::silu, product),
                        l.ffn_scale);
    }

    ggml_tensor * convnext(graph_ctx & g, const convnext_w & c, ggml_tensor * x, const char * tconv_name) {
        x = causal_tconv(g, c.up, x);
        record(g, tconv_name, x);
        const int64_t n = x->ne[1];
        const int64_t ch = x->ne[0];
        ggml_tensor * xc = with_history(g, x, 6);
        ggml_tensor * y = nullptr;
        for (int k = 0; k < 7; ++k) {
            ggml_tensor * tap = ggml_view_2d(g.ctx, c.dw_taps, ch, 1, c.dw_taps->nb[1], k * c.dw_taps->nb[1]);
            ggml_tensor * xk = ggml_view_2d(g.ctx, xc, ch, n, xc->nb[1], k * xc->nb[1]);
            ggml_tensor * yk = ggml_mul(g.ctx, xk, tap);
            y = y ? ggml_add(g.ctx, y, yk) : yk;
        }
        y = ggml_add(g.ctx, y, c.dw_bias);
        y = layer_norm(g.ctx, y, c.norm_w, c.norm_b, 1e-6f);
        y = ggml_gelu_erf(g.ctx, ggml_add(g.ctx, prod(g.ctx, c.pw1, y), c.pw1_b));
        y = ggml_add(g.ctx, prod(g.ctx, c.pw2, y), c.pw2_b);
        return ggml_add(g.ctx, x, ggml_mul(g.ctx, y, c.gamma));
    }

    // codes [n, n_q] (i32, one row of frames per codebook), positions [n], mask [kv_padded, n] -> audio [1, n * 1920]
    ggml_tensor * build(graph_ctx & g, ggml_tensor * codes, ggml_tensor * pos, ggml_tensor * mask) {
        state_cursor = 0;
        const int64_t n = codes->ne[0];
        // quantizer: semantic and acoustic groups each sum their codebook rows, then project
        ggml_tensor * first = nullptr;
        ggml_tensor * rest = nullptr;
        for (int k = 0; k < hp.n_quantizers; ++k) {
            ggml_tensor * ids = ggml_view_1d(g.ctx, codes, n, k * codes->nb[1]);   // codebook k's row
            ggml_tensor * e = ggml_get_rows(g.ctx, W.codebooks[k], ids);
            ggml_tensor *& acc = k < hp.n_semantic_quantizers ? first : rest;
            acc = acc ? ggml_add(g.ctx, acc, e) : e;
        }
        auto proj = [&](ggml_tensor * wt, ggml_tensor * x) {
            return prod(g.ctx, ggml_reshape_2d(g.ctx, wt, wt->ne[1], wt->ne[2]), x);
        };
        ggml_tensor * x = ggml_add(g.ctx, proj(W.first_proj, first), proj(W.rest_proj, rest));
        record(g, "quantizer_out", x);
        x = causal_conv(g, W.pre_conv, x);
        record(g, "pre_conv_out", x);

        x = ggml_add(g.ctx, prod(g.ctx, W.in_proj, x), W.in_proj_b);
        record(g, "pre_transformer_input_proj_out", x);
        static const char * layer_names[] = {"pre_transformer_layer_0_out", "pre_transformer_layer_1_out",
                                             "pre_transformer_layer_2_out", "pre_transformer_layer_3_out",
                                             "pre_transformer_layer_4_out", "pre_transformer_layer_5_out",
                                             "pre_transformer_layer_6_out", "pre_transformer_layer_7_out"};
        for (size_t i = 0; i < W.layers.size(); ++i) {
            x = attention_layer(g, W.layers[i], x, pos, mask);
            record(g, i < 8 ? layer_names[i] : nullptr, x);
        }
        x = rms_norm(g.ctx, x, W.out_norm, hp.tfm.norm_eps);
        record(g, "pre_transformer_norm_out", x);
        x = ggml_add(g.ctx, prod(g.ctx, W.out_proj, x), W.out_proj_b);
        record(g, "pre_transformer_out", x);

        static const char * up_names[][2] = {{"upsample_0_transconv", "upsample_0_convnext"},
                                              {"upsample_1_transconv", "upsample_1_convnext"}};
        for (size_t u = 0; u < W.upsample.size(); ++u) {
            x = convnext(g, W.upsample[u], x, u < 2 ? up_names[u][0] : nullptr);
            if (u < 2) record(g, up_names[u][1], x);
        }
        x = causal_conv(g, W.voc_in, x);
        record(g, "decoder_0_conv_in", x);
        static const char * block_names[] = {"decoder_1_block", "decoder_2_block", "decoder_3_block", "decoder_4_block"};
        for (size_t b = 0; b < W.blocks.size(); ++b) {
            const auto & blk = W.blocks[b];
            x = causal_tconv(g, blk.up, snake(g, blk.snake, x, input_type(blk.up)));
            for (const auto & r : blk.res) {
                ggml_tensor * y = causal_conv(g, r.conv1, snake(g, r.snake1, x, input_type(r.conv1)));
                x = causal_conv(g, r.conv2, snake(g, r.snake2, y, input_type(r.conv2)), x);
            }
            if (b < 4) record(g, block_names[b], x);
        }
        x = snake(g, W.snake_out, x);
        record(g, "decoder_5_snake", x);
        x = causal_conv(g, W.voc_out, x);
        record(g, "wav_preclamp", x);
        if (g.stages) x = ggml_cont(g.ctx, x);   // ggml_clamp works in place: keep the recorded stage intact
        x = ggml_clamp(g.ctx, x, -1.0f, 1.0f);
        record(g, "wav", x);
        if (state_cursor != state.size()) throw std::logic_error("speech decoder: state bookkeeping mismatch");
        return x;
    }

    // ---- running ----------------------------------------------------------------------------
    void check_codes(const int32_t * codes, int64_t n_frames) const {
        for (int64_t i = 0; i < n_frames * hp.n_quantizers; ++i) {
            if (codes[i] < 0 || codes[i] >= hp.codebook_size) {
                throw std::invalid_argument("code " + std::to_string(codes[i]) + " at frame " +
                                            std::to_string(i / hp.n_quantizers) + ", codebook " +
                                            std::to_string(i % hp.n_quantizers) + " is outside [0, " +
                                            std::to_string(hp.codebook_size) + ")");
            }
        }
    }

    // Decodes n frames with the current state; appends their audio to `out` (if non-null).
    void run(const int32_t * codes, int64_t n, std::vector<float> * out, std::map<std::string, stage_output> * stages) {
        std::lock_guard<std::mutex> my_turn(compute.turn);
        ggml_context * ctx = runner.begin();
        ggml_cgraph * gf = runner.graph();
        std::map<std::string, ggml_tensor *> stage_tensors;
        graph_ctx g{ctx, gf, stages ? &stage_tensors : nullptr};

        ggml_tensor * t_codes = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n, hp.n_quantizers);
        ggml_tensor * t_pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
        const int64_t since_first_key = ((position - kv_ctx) % k_kv_align + k_kv_align) % k_kv_align;
        kv_lead = kv_ctx + since_first_key;
        kv_padded = (kv_lead + n + k_kv_align - 1) / k_kv_align * k_kv_align;
        ggml_tensor * t_mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kv_padded, n);
        for (ggml_tensor * t : {t_codes, t_pos, t_mask}) ggml_set_input(t);
        ggml_tensor * wav = build(g, t_codes, t_pos, t_mask);
        ggml_set_output(wav);
        ggml_build_forward_expand(gf, wav);
        for (auto & [name, t] : stage_tensors) ggml_build_forward_expand(gf, t);

        runner.allocate();
        std::vector<int32_t> by_codebook(size_t(n) * hp.n_quantizers);   // frame-major -> codebook-major
        for (int64_t i = 0; i < n; ++i) {
            for (int q = 0; q < hp.n_quantizers; ++q) by_codebook[size_t(q) * n + i] = codes[i * hp.n_quantizers + q];
        }
        ggml_backend_tensor_set(t_codes, by_codebook.data(), 0, ggml_nbytes(t_codes));
        std::vector<int32_t> pos(n);
        for (int64_t i = 0; i < n; ++i) pos[i] = int32_t(position + i);
        ggml_backend_tensor_set(t_pos, pos.data(), 0, ggml_nbytes(t_pos));
        // key j holds position (position - kv_lead + j); query i sees keys within the window,
        // never before 0 and never the padding
        const std::vector<float> mask = attention_mask(position, n, position - kv_lead, kv_padded, kv_lead + n,
                                                       hp.sliding_window);
        ggml_backend_tensor_set(t_mask, mask.data(), 0, ggml_nbytes(t_mask));

        if (opt.profile) {
            compute_profiled(ctx, gf);
        } else {
            runner.compute();
        }
        if (out) {
            const size_t before = out->size();
            out->resize(before + size_t(ggml_nelements(wav)));
            ggml_backend_tensor_get(wav, out->data() + before, 0, ggml_nbytes(wav));
        }
        for (auto & [name, t] : stage_tensors) {
            stage_output so;
            so.values.resize(ggml_nelements(t));
            so.channels = t->ne[0];
            ggml_backend_tensor_get(t, so.values.data(), 0, ggml_nbytes(t));
            (*stages)[name] = std::move(so);
        }
        position += n;
    }

    std::map<std::string, double> profile_seconds;
    std::map<std::string, double> profile_flops;

    void compute_profiled(ggml_context * ctx, ggml_cgraph * gf) {
        ggml_cgraph * one = ggml_new_graph_custom(ctx, 1, false);
        std::string stage = "quantizer";
        for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
            ggml_tensor * node = ggml_graph_node(gf, i);
            ggml_graph_clear(one);
            ggml_graph_add_node(one, node);
            const int64_t t0 = ggml_time_us();
            runner.compute_on_cpu(one);
            const std::string key = stage + "/" + ggml_op_desc(node);
            profile_seconds[key] += 1e-6 * double(ggml_time_us() - t0);
            profile_flops[key] += matmul_flops(node);
            const std::string name = ggml_get_name(node);
            if (name.find("_out") != std::string::npos || name.find("decoder_") == 0 || name.find("upsample_") == 0) {
                stage = "after " + name;
            }
        }
    }

    void remember(const int32_t * codes, int64_t n) {
        const size_t q = size_t(hp.n_quantizers);
        history.insert(history.end(), codes, codes + n * q);
        const size_t keep = size_t(opt.left_context) * q;
        if (history.size() > keep) history.erase(history.begin(), history.end() - keep);
    }

    std::vector<float> push(const int32_t * codes, int64_t n_frames) {
        if (n_frames < 0) throw std::invalid_argument("negative frame count");
        check_codes(codes, n_frames);
        std::vector<float> out;
        out.reserve(size_t(n_frames) * hp.samples_per_frame);
        int64_t i = 0;
        while (i < n_frames) {
            // (each pass decodes at least one frame, so a boundary restarts once)
            if (opt.reference_chunking && total_frames > 0 && total_frames % opt.chunk_frames == 0) {
                // the reference starts a new chunk here: fresh state, warmed up on the last frames
                clear_state();
                const int64_t warm = int64_t(history.size()) / hp.n_quantizers;
                for (int64_t w0 = 0; w0 < warm; w0 += opt.max_graph_frames) {
                    run(history.data() + w0 * hp.n_quantizers, std::min<int64_t>(opt.max_graph_frames, warm - w0), nullptr, nullptr);
                }
            }
            int64_t m = std::min<int64_t>(n_frames - i, opt.max_graph_frames);
            if (opt.reference_chunking) m = std::min<int64_t>(m, opt.chunk_frames - total_frames % opt.chunk_frames);
            const int32_t * c = codes + i * hp.n_quantizers;
            run(c, m, &out, nullptr);
            remember(c, m);
            total_frames += m;
            i += m;
        }
        return out;
    }

    void reset() {
        clear_state();
        total_frames = 0;
        history.clear();
    }
};

speech_decoder::speech_decoder(const model & m, const std::string & weights_buffer, const std::string & device)
    : w_(std::make_unique<weights>(m, weights_buffer, device)) {}
speech_decoder::~speech_decoder() = default;
const speech_decoder::weights & speech_decoder::prepared() const { return *w_; }
const model & speech_decoder::source() const { return w_->m; }
int speech_decoder::bf16_relaid() const { return w_->relaid; }

speech_decoder_session::speech_decoder_session(std::shared_ptr<const speech_decoder> decoder,
                                               std::shared_ptr<thread_pool> pool, const speech_decoder_options & options)
    : speech_decoder_session(std::make_shared<speech_decoder_runner>(std::move(decoder), std::move(pool), options.scheduled),
                             options) {}

speech_decoder_session::speech_decoder_session(std::shared_ptr<speech_decoder_runner> runner,
                                               const speech_decoder_options & options)
    : p_(std::make_unique<impl>(runner ? std::move(runner) : throw std::invalid_argument("a decoder session needs a runner"),
                                options)) {}

speech_decoder_session::~speech_decoder_session() = default;

std::vector<float> speech_decoder_session::push(const int32_t * codes, int64_t n_frames) { return p_->push(codes, n_frames); }
void speech_decoder_session::reset() { p_->reset(); }
int64_t speech_decoder_session::frames_decoded() const { return p_->total_frames; }
int speech_decoder_session::samples_per_frame() const { return p_->hp.samples_per_frame; }
int speech_decoder_session::n_quantizers() const { return p_->hp.n_quantizers; }

std::map<std::string, speech_decoder_session::stage_output> speech_decoder_session::decode_stages(
    const int32_t * codes, int64_t n_frames) {
    p_->check_codes(codes, n_frames);
    p_->reset();
    std::map<std::string, stage_output> stages;
    p_->run(codes, n_frames, nullptr, &stages);
    p_->reset();
    return stages;
}

std::map<std::string, double> speech_decoder_session::profile() const { return p_->profile_seconds; }
std::map<std::string, double> speech_decoder_session::profile_flops() const { return p_->profile_flops; }
const launch_report & speech_decoder_session::placement_report() const { return p_->runner.report(); }
}  // namespace kazeia
