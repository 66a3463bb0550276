#include "graphs/code_predictor.h"

#include <stdexcept>

#include "kernels/products.h"

namespace kazeia {
namespace {

bool same_choice(const sampling_config & a, const sampling_config & b) {
    return a.do_sample == b.do_sample && a.temperature == b.temperature && a.top_k == b.top_k;
}

}  // namespace

code_predictor_weights::code_predictor_weights(const model & m, weight_copies & layout, const stage_placement & p,
                                               ggml_tensor * codec_table, std::vector<ggml_tensor *> frame_tables)
    : placement_(p), hidden_(m.hparams().talker.tfm.hidden), n_groups_(m.hparams().talker.n_code_groups),
      vocab_(m.hparams().code_predictor.vocab), cpu_(!p.scheduled), cache_buft_(cache_buffer(p, layout)),
      codec_embd_(codec_table), embd_(std::move(frame_tables)),
      stack_(m, "cp.", m.hparams().code_predictor.tfm, std::ref(layout), cpu_) {
    for (int j = 0; j + 1 < n_groups_; ++j) head_.push_back(layout(m.require("cp.head." + std::to_string(j) + ".weight", "code predictor")));
    if (m.hparams().code_predictor.has_input_proj) {
        proj_w_ = layout(m.require("cp.input_proj.weight", "code predictor"));
        proj_b_ = layout(m.require("cp.input_proj.bias", "code predictor"));
    }
}

ggml_tensor * code_predictor_weights::project(ggml_context * ctx, ggml_tensor * x) const {
    // (column by column, as in a batch: sub-step 0 feeds two rows)
    return proj_w_ ? ggml_add(ctx, product(ctx, proj_w_, x, cpu_, true), proj_b_) : x;
}

// ---- runner ----------------------------------------------------------------------------------

code_predictor_runner::code_predictor_runner(const code_predictor_weights & w, std::shared_ptr<thread_pool> pool)
    : w_(w), step_runner_(pool, 8192, where(w.placement()), w.placement().device),
      frame_runner_(pool, k_batch_nodes, where(w.placement()), w.placement().device) {}

kv_cache & code_predictor_runner::cache(size_t slot) {
    while (caches_.size() <= slot) {
        const qwen3_stack & st = w_.stack();
        caches_.push_back(std::make_unique<kv_cache>(st.n_layers(), st.kv_dim(), w_.cache_buffer_type()));
        caches_.back()->reserve(w_.n_groups() + 1);
    }
    return *caches_[slot];
}

std::vector<float> code_predictor_runner::step_logits(int j, const float * h_talker, int32_t code) {
    ggml_context * ctx = step_runner_.begin();
    ggml_cgraph * gf = step_runner_.graph();
    ggml_tensor * id = input_i32(ctx, 1);
    ggml_tensor * h_in = j == 0 ? input_f32(ctx, w_.hidden(), 1) : nullptr;
    ggml_tensor * x = j == 0 ? ggml_concat(ctx, h_in, ggml_get_rows(ctx, w_.codec_table(), id), 1)
                             : ggml_get_rows(ctx, w_.table(j - 1), id);
    // (every code-predictor product column by column, as in a batch)
    x = w_.project(ctx, x);
    const int64_t n = x->ne[1], pos0 = j == 0 ? 0 : j + 1;
    ggml_tensor * pos = input_i32(ctx, n);
    ggml_tensor * mask = input_f32(ctx, pos0 + n, n);
    ggml_tensor * h = w_.stack().build(ctx, gf, x, pos, {{&cache(0), 0, n, mask, pos0 + n, pos0}}, true);
    h = ggml_view_2d(ctx, h, h->ne[0], 1, h->nb[1], (n - 1) * h->nb[1]);
    ggml_tensor * lg = product(ctx, w_.head(j), h, w_.cpu());
    ggml_set_output(lg);
    ggml_build_forward_expand(gf, lg);
    step_runner_.allocate();
    ggml_backend_tensor_set(id, &code, 0, sizeof(int32_t));
    if (h_in) ggml_backend_tensor_set(h_in, h_talker, 0, ggml_nbytes(h_in));
    set_causal_inputs(pos, mask, pos0, n);
    step_runner_.compute();
    std::vector<float> logits(size_t(w_.vocab()));
    ggml_backend_tensor_get(lg, logits.data(), 0, ggml_nbytes(lg));
    return logits;
}

// All 15 sub-steps in one graph; each sub-step's code is chosen inside it (argmax, or Gumbel-max
// over top-k of logits / T with noise drawn on the host) and its embedding feeds the next. Each
// frame of a batch has its own cache, sampling settings and noise.
ggml_tensor * code_predictor_runner::choose_in_graph(ggml_context * ctx, ggml_tensor * logits,
                                                 const sampling_config & cfg, ggml_tensor * noise) {
    if (!cfg.do_sample) return ggml_argmax(ctx, logits);                       // I32 [1]
    ggml_tensor * z = ggml_scale(ctx, logits, 1.0f / cfg.temperature);          // [V, 1]
    const int64_t v = z->ne[0];
    if (cfg.top_k > 0 && cfg.top_k < v) {
        ggml_tensor * idx = ggml_top_k(ctx, z, cfg.top_k);                      // I32 [k]
        ggml_tensor * vals = ggml_get_rows(ctx, ggml_reshape_2d(ctx, z, 1, v), idx);   // [1, k]
        vals = ggml_reshape_2d(ctx, vals, cfg.top_k, 1);
        ggml_tensor * kth_at = ggml_argmax(ctx, ggml_neg(ctx, vals));           // the smallest kept value
        ggml_tensor * kth = ggml_get_rows(ctx, ggml_reshape_2d(ctx, vals, 1, cfg.top_k), kth_at);   // [1, 1]
        // values strictly below the k-th drop out (ties stay, as HF keeps them)
        ggml_tensor * below = ggml_step(ctx, ggml_neg(ctx, ggml_sub(ctx, z, kth)));
        z = ggml_add(ctx, z, ggml_scale(ctx, below, -1e30f));
    }
    return ggml_argmax(ctx, ggml_add(ctx, z, noise));
}

void code_predictor_runner::build_frame_graph(const std::vector<frame> & slots) {
    const int steps = w_.n_groups() - 1;
    const int64_t hidden = w_.hidden(), vocab = w_.vocab();
    const int64_t B = int64_t(slots.size());
    frame_graph & g = frame_graph_;
    ggml_context * ctx = frame_runner_.begin();
    ggml_cgraph * gf = frame_runner_.graph();
    g = frame_graph{};
    for (const frame & s : slots) g.cfgs.push_back(*s.cfg);
    g.h_in = input_f32(ctx, hidden, B);
    g.id0 = input_i32(ctx, B);
    for (const frame & s : slots) g.noise.push_back(s.cfg->do_sample ? input_f32(ctx, vocab, steps) : nullptr);
    g.chosen.assign(size_t(B), {});
    for (int j = 0; j < steps; ++j) {
        const int64_t n = j == 0 ? 2 : 1, pos0 = j == 0 ? 0 : j + 1;
        ggml_tensor * x = nullptr;
        for (int64_t b = 0; b < B; ++b) {
            ggml_tensor * xb;
            if (j == 0) {
                ggml_tensor * id = B == 1 ? g.id0 : ggml_view_1d(ctx, g.id0, 1, size_t(b) * sizeof(int32_t));
                xb = ggml_concat(ctx, column(ctx, g.h_in, b), ggml_get_rows(ctx, w_.codec_table(), id), 1);
            } else {
                xb = ggml_get_rows(ctx, w_.table(j - 1), g.chosen[size_t(b)].back());
            }
            x = side_by_side(ctx, x, xb);
        }
        x = w_.project(ctx, x);
        ggml_tensor * pos = input_i32(ctx, n * B);
        std::vector<int32_t> pos_values;
        std::vector<attention_segment> segments;
        for (int64_t b = 0; b < B; ++b) {
            ggml_tensor * mask = input_f32(ctx, pos0 + n, n);
            g.masks.push_back({mask, causal_mask(pos0, n)});
            for (int64_t i = 0; i < n; ++i) pos_values.push_back(int32_t(pos0 + i));
            segments.push_back({&cache(size_t(b)), b * n, n, mask, pos0 + n, pos0});
        }
        g.positions.push_back({pos, pos_values});
        ggml_tensor * h = w_.stack().build(ctx, gf, x, pos, segments, true);
        // each frame's last row
        if (n == 1) {
        } else if (B == 1) {
            h = ggml_view_2d(ctx, h, h->ne[0], 1, h->nb[1], (n - 1) * h->nb[1]);
        } else {
            h = ggml_cont(ctx, ggml_view_2d(ctx, h, h->ne[0], B, n * h->nb[1], (n - 1) * h->nb[1]));
        }
        ggml_tensor * lg = product(ctx, w_.head(j), h, w_.cpu(), true);   // [vocab, B]
        ggml_set_output(lg);
        g.logits.push_back(lg);
        for (int64_t b = 0; b < B; ++b) {
            ggml_tensor * nz = g.noise[size_t(b)];
            if (nz) nz = ggml_view_2d(ctx, nz, vocab, 1, nz->nb[1], j * nz->nb[1]);
            ggml_tensor * code = choose_in_graph(ctx, column(ctx, lg, b), *slots[size_t(b)].cfg, nz);
            ggml_set_output(code);
            ggml_build_forward_expand(gf, code);
            g.chosen[size_t(b)].push_back(code);
        }
    }
    frame_runner_.allocate();
    g.built = true;
}

void code_predictor_runner::frames(const std::vector<frame> & slots) {
    frame_graph & g = frame_graph_;
    bool same = g.built && g.cfgs.size() == slots.size();
    for (size_t b = 0; same && b < slots.size(); ++b) same = same_choice(g.cfgs[b], *slots[b].cfg);
    if (!same) build_frame_graph(slots);
    // inputs are set on every call: the allocator may reuse their memory within a launch
    const size_t hidden = size_t(w_.hidden()), vocab = size_t(w_.vocab());
    for (size_t b = 0; b < slots.size(); ++b) {
        ggml_backend_tensor_set(g.h_in, slots[b].h, b * g.h_in->nb[1], hidden * sizeof(float));
        ggml_backend_tensor_set(g.id0, &slots[b].c0, b * sizeof(int32_t), sizeof(int32_t));
        if (g.noise[b]) ggml_backend_tensor_set(g.noise[b], slots[b].noise, 0, ggml_nbytes(g.noise[b]));
    }
    for (const auto & [t, v] : g.positions) ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    for (const auto & [t, v] : g.masks) ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    frame_runner_.compute();
    for (size_t b = 0; b < slots.size(); ++b) {
        for (size_t j = 0; j < g.chosen[b].size(); ++j) {
            ggml_backend_tensor_get(g.chosen[b][j], slots[b].codes + j, 0, sizeof(int32_t));
            if (slots[b].logits) {
                ggml_backend_tensor_get(g.logits[j], slots[b].logits + j * vocab, b * g.logits[j]->nb[1],
                                        vocab * sizeof(float));
            }
        }
    }
}

}  // namespace kazeia
