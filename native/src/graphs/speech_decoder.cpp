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
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "graphs/blocks.h"
#include "graphs/speech_decoder_weights.h"
#include "kazeia/cpu_level.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "kernels/custom_ops.h"
#include "kernels/gemm_bf16.h"
#include "kernels/products.h"
#include "kernels/winograd_conv.h"
#include "graphs/graph_runner.h"

namespace kazeia {
namespace {

using namespace decoder_parts;

constexpr int k_graph_size = 16384;
// Keys sit at slots whose index is their position modulo this (and the key axis is padded to a
// multiple of it), so every SIMD lane sums the same keys whatever the chunking: streamed audio
// matches offline decoding to the last bits.
constexpr int64_t k_kv_align = 64;


}  // namespace


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
    int64_t launch_frames = 1;   // frames in the graph being built (the vocoder's tiles repeat per frame)
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
            if (c.k > 1) s.push_back({c.c_in, conv_history(c), type});
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

    // a weight times columns, by the same kernel whatever their number (kernels/products.h)
    ggml_tensor * prod(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) const {
        return product_any_columns(ctx, a, b, !standard_ops);
    }

    // What a convolution reads: bf16 where Kazeia's bf16 product reads its input in place (the
    // snake before it writes bf16, the values the product would round its columns to anyway).
    ggml_type input_type(const conv_w & c) const {
        return !standard_ops && c.weight && conv_bf16_applies(c.weight, c.c_in) ? GGML_TYPE_BF16 : GGML_TYPE_F32;
    }

    // the input columns a convolution looks back at (Winograd's form: 3 dilations more)
    static int64_t conv_history(const conv_w & c) {
        return c.winograd ? winograd_history(c.dilation) : int64_t(c.k - 1) * c.dilation;
    }
    ggml_type input_type(const tconv_w & c) const {
        return !standard_ops && !c.phase_bias && c.w && conv_bf16_applies(c.w, c.c_in) ? GGML_TYPE_BF16 : GGML_TYPE_F32;
    }

    // causal conv over [history ++ x], plus `residual` where given. With bf16 weights on the CPU one
    // op reads the taps where they lie (bf16 input in place) and adds bias and residual as it stores;
    // seven-tap f16 weights in Winograd's form over the f32 products, tiled frame by frame (x holds
    // launch_frames whole frames); other f16 weights (bf16 on CPUs without AVX-512 BF16) as the
    // bf16 ones, in f32 arithmetic over f32 input;
    // f32 weights with few outputs (the last conv) get a plain sliding dot; else im2col and one
    // product whose contraction runs over all taps and channels (kernel rearranged tap-major at load)
    ggml_tensor * causal_conv(graph_ctx & g, const conv_w & c, ggml_tensor * x, ggml_tensor * residual = nullptr) {
        const int64_t history = conv_history(c);
        if (c.winograd) {   // (weights laid out at load: the CPU's graph)
            if (standard_ops || x->type != GGML_TYPE_F32 || x->ne[1] % launch_frames != 0) {
                throw std::logic_error("speech decoder: a Winograd convolution over input it cannot tile");
            }
            const int64_t period = x->ne[1] / launch_frames;
            ggml_tensor * xc = with_history(g, x, history);
            if (c.bias->type == GGML_TYPE_F32) {
                return conv_winograd(g.ctx, c.winograd, xc, c.dilation, period, c.bias, residual);
            }
            ggml_tensor * y = ggml_add(g.ctx, conv_winograd(g.ctx, c.winograd, xc, c.dilation, period, nullptr), c.bias);
            return residual ? ggml_add(g.ctx, residual, y) : y;
        }
        ggml_tensor * w2d = ggml_reshape_2d(g.ctx, c.weight, int64_t(c.k) * c.c_in, c.c_out);
        ggml_tensor * y;
        if (x->type == GGML_TYPE_BF16 || (!standard_ops && conv_bf16_applies(c.weight, c.c_in))) {
            ggml_tensor * xc = with_history(g, x, history);
            if (c.bias->type == GGML_TYPE_F32) return conv_bf16(g.ctx, c.weight, xc, c.dilation, c.bias, residual);
            y = conv_bf16(g.ctx, c.weight, xc, c.dilation);
        } else if (!standard_ops && conv_fma_applies(c.weight, c.c_in)) {   // f16 weights: f32 input in place
            ggml_tensor * xc = with_history(g, x, history);
            if (c.bias->type == GGML_TYPE_F32) return conv_fma(g.ctx, c.weight, xc, c.dilation, c.bias, residual);
            y = conv_fma(g.ctx, c.weight, xc, c.dilation);
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
    // (laid out as a two-tap convolution at load: one product, bias added as it stores)
    ggml_tensor * causal_tconv(graph_ctx & g, const tconv_w & c, ggml_tensor * x) {
        const int64_t n = x->ne[1];
        if (c.phase_bias) {   // (weights laid out at load: the CPU's graph)
            if (standard_ops) throw std::logic_error("speech decoder: a transposed convolution laid out for the CPU");
            ggml_tensor * xc = with_history(g, x, 1);
            ggml_tensor * y = c.pairs ? tconv_pairs(g.ctx, c.pairs, xc, c.phase_bias) : conv_fma(g.ctx, c.w, xc, 1, c.phase_bias, nullptr);
            return ggml_reshape_2d(g.ctx, y, c.c_out, n * c.stride);
        }
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
        ggml_tensor * o = prod(g.ctx, l.wo, attention(g.ctx, q, keys, values, mask, same_kernel_mul_mat));
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
        launch_frames = n;
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
