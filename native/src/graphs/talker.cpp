// Talker and code predictor, in the order of the reference's generation loop:
// prompt rows -> talker prefill -> per frame: choose code 0, code predictor (15 sub-steps, fresh
// cache) -> frame embedding + trailing text -> talker step.
#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "ggml.h"
#include "graphs/qwen3_stack.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "kazeia/tts.h"
#include "runtime/gemv_q8_0.h"
#include "runtime/graph_runner.h"
#include "runtime/weight_copies.h"
#include "runtime/sampler.h"

namespace kazeia {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

ggml_tensor * input_i32(ggml_context * ctx, int64_t n) {
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    ggml_set_input(t);
    return t;
}

// Positions [pos0, pos0 + n) and their causal attention mask: graph inputs filled after allocation.
struct causal_input {
    ggml_tensor * pos;
    ggml_tensor * mask;
    int64_t pos0, n;
};

void set_causal_inputs(ggml_tensor * pos, ggml_tensor * mask, int64_t pos0, int64_t n) {
    std::vector<int32_t> positions(n);
    for (int64_t i = 0; i < n; ++i) positions[i] = int32_t(pos0 + i);
    ggml_backend_tensor_set(pos, positions.data(), 0, ggml_nbytes(pos));
    const auto mk = causal_mask(pos0, n);
    ggml_backend_tensor_set(mask, mk.data(), 0, ggml_nbytes(mask));
}

}  // namespace

struct tts_engine::impl {
    const model & m;
    const model_hparams & hp;
    int hidden;
    int n_groups;
    int codec_vocab;
    int cp_vocab;

    // each stage's weights as its placement wants them (declared before the stacks that bind them)
    weight_copies talker_layout, cp_layout;
    bool talker_cpu, cp_cpu;   // the stage computes on the CPU backend: Kazeia's one-column kernel applies
    bool shared_tables;        // both stages place weights alike: the code predictor reads the talker's tables
    // talker
    ggml_tensor *text_embd, *fc1_w, *fc1_b, *fc2_w, *fc2_b, *codec_embd, *codec_head;
    qwen3_stack talker;
    // code predictor
    std::vector<ggml_tensor *> frame_embd;   // codebooks 1..15, talker width, as the talker reads them
    std::vector<ggml_tensor *> cp_embd;      // the same tables as the code predictor reads them
    ggml_tensor * cp_codec_embd = nullptr;   // codebook 0's table, as the code predictor reads it
    std::vector<ggml_tensor *> cp_head;
    ggml_tensor *cp_proj_w = nullptr, *cp_proj_b = nullptr;
    qwen3_stack cp;

    int eos_id, pad_text_id;
    graph_runner runner;      // talker
    graph_runner cp_runner;   // code predictor (its own placement)

    ggml_tensor * w(const std::string & name) const {
        ggml_tensor * t = m.tensor(name);
        if (!t) throw model_error("missing tensor " + name);
        return t;
    }

    static weight_layout layout_for(const stage_placement & p) {
        if (p.scheduled && !p.device.empty()) return device_layout(accelerator_device(p.device));
        if (!p.weights_buffer.empty()) return buffer_layout(p.weights_buffer);
        return p.scheduled ? weight_layout{} : cpu_repack_layout();   // an accelerator cannot read the repacked layout
    }
    // the KV cache beside the weights when the stage runs on an accelerator, else CPU memory
    static ggml_backend_buffer_type_t cache_buffer(const stage_placement & p, const weight_copies & layout) {
        return p.scheduled && !p.device.empty() ? layout.buffer_type() : nullptr;
    }

    impl(const model & model_, std::shared_ptr<thread_pool> pool, const stage_placement & talker_p,
         const stage_placement & cp_p)
        : m(model_), hp(model_.hparams()), hidden(hp.talker.tfm.hidden), n_groups(hp.talker.n_code_groups),
          codec_vocab(hp.talker.codec_vocab), cp_vocab(hp.code_predictor.vocab),
          talker_layout(&model_, layout_for(talker_p)), cp_layout(&model_, layout_for(cp_p)),
          talker_cpu(!talker_p.scheduled), cp_cpu(!cp_p.scheduled), shared_tables(talker_p == cp_p),
          talker(model_, "talker.", hp.talker.tfm, std::ref(talker_layout), talker_cpu, cache_buffer(talker_p, talker_layout)),
          cp(model_, "cp.", hp.code_predictor.tfm, std::ref(cp_layout), cp_cpu, cache_buffer(cp_p, cp_layout)),
          runner(pool, 8192, talker_p.scheduled ? compute_placement::sched : compute_placement::cpu, talker_p.device),
          cp_runner(pool, 8192, cp_p.scheduled ? compute_placement::sched : compute_placement::cpu, cp_p.device),
          step_runner(pool, 8192, talker_p.scheduled ? compute_placement::sched : compute_placement::cpu, talker_p.device),
          frame_runner(pool, 8192, cp_p.scheduled ? compute_placement::sched : compute_placement::cpu, cp_p.device) {
        text_embd = talker_layout.table(w("talker.text_embd.weight"));
        fc1_w = talker_layout(w("talker.text_proj.fc1.weight"));
        fc1_b = talker_layout(w("talker.text_proj.fc1.bias"));
        fc2_w = talker_layout(w("talker.text_proj.fc2.weight"));
        fc2_b = talker_layout(w("talker.text_proj.fc2.bias"));
        codec_embd = talker_layout.table(w("talker.codec_embd.weight"));
        codec_head = talker_layout(w("talker.codec_head.weight"));
        // the codebook tables are read by both stages: a copy for each placement
        cp_codec_embd = shared_tables ? codec_embd : cp_layout.table(w("talker.codec_embd.weight"));
        for (int j = 0; j + 1 < n_groups; ++j) {
            ggml_tensor * e = w("cp.codec_embd." + std::to_string(j) + ".weight");
            frame_embd.push_back(talker_layout.table(e));
            cp_embd.push_back(shared_tables ? frame_embd.back() : cp_layout.table(e));
            cp_head.push_back(cp_layout(w("cp.head." + std::to_string(j) + ".weight")));
        }
        if (hp.code_predictor.has_input_proj) {
            cp_proj_w = cp_layout(w("cp.input_proj.weight"));
            cp_proj_b = cp_layout(w("cp.input_proj.bias"));
        }
        eos_id = int(m.get_int("qwen3tts.codec.eos"));
        pad_text_id = int(m.get_int("qwen3tts.token.tts_pad"));
        cp.reserve(n_groups + 1);
    }

    // ---- prompt rows -> embeddings [hidden, n] ------------------------------------------------
    struct row_inputs {   // host data for one embedding graph
        std::vector<std::pair<ggml_tensor *, std::vector<int32_t>>> ids;
        std::vector<std::pair<ggml_tensor *, std::vector<float>>> floats;
    };

    void check_rows(const prompt_rows & r) const {
        const size_t n = size_t(r.n_rows);
        if (r.n_rows < 1) throw std::invalid_argument("the prompt has no rows");
        if (r.text_ids.size() != n || r.codec_ids.size() != n) throw std::invalid_argument("prompt arrays differ in length");
        if (!r.frame_codes.empty() && r.frame_codes.size() != n * (n_groups - 1)) {
            throw std::invalid_argument("frame_codes must hold n_rows x 15 codes");
        }
        if (!r.vectors.empty() && r.vectors.size() != n * size_t(hidden)) {
            throw std::invalid_argument("vectors must hold n_rows x hidden values");
        }
        for (int32_t id : r.text_ids) {
            if (id < -1 || id >= hp.talker.text_vocab) throw std::invalid_argument("text id " + std::to_string(id) + " out of range");
        }
        for (int32_t id : r.codec_ids) {
            if (id < -1 || id >= codec_vocab) throw std::invalid_argument("codec id " + std::to_string(id) + " out of range");
        }
        for (int32_t id : r.frame_codes) {
            if (id < -1 || id >= cp_vocab) throw std::invalid_argument("frame code " + std::to_string(id) + " out of range");
        }
    }

    // One embedding table looked up for every row (rows without an id add nothing).
    struct embed_part {
        ggml_tensor * table;
        bool text;                    // text rows go through text_projection
        std::vector<int32_t> ids;     // -1 -> 0, masked out
        std::vector<float> mask;
    };

    // the parts the rows use, in graph order; parts no row uses are left out
    std::vector<embed_part> embed_parts(const prompt_rows & r) const {
        const int64_t n = r.n_rows;
        std::vector<embed_part> parts;
        auto part = [&](ggml_tensor * table, const int32_t * ids, int64_t stride, bool text) {
            embed_part p{table, text, std::vector<int32_t>(n), std::vector<float>(n)};
            bool any = false;
            for (int64_t i = 0; i < n; ++i) {
                const int32_t id = ids[i * stride];
                p.ids[i] = id < 0 ? 0 : id;
                p.mask[i] = id < 0 ? 0.0f : 1.0f;
                any = any || id >= 0;
            }
            if (any) parts.push_back(std::move(p));
        };
        part(text_embd, r.text_ids.data(), 1, true);
        part(codec_embd, r.codec_ids.data(), 1, false);
        if (!r.frame_codes.empty()) {
            for (int j = 0; j + 1 < n_groups; ++j) part(frame_embd[j], r.frame_codes.data() + j, n_groups - 1, false);
        }
        return parts;
    }

    // sum of the parts (and of the rows' extra vectors); their inputs are recorded in `in`
    ggml_tensor * build_embed(ggml_context * ctx, const prompt_rows & r, row_inputs & in) {
        const int64_t n = r.n_rows;
        ggml_tensor * sum = nullptr;
        auto add = [&](ggml_tensor * t) { sum = sum ? ggml_add(ctx, sum, t) : t; };
        for (embed_part & p : embed_parts(r)) {
            ggml_tensor * t_ids = input_i32(ctx, n);
            ggml_tensor * t_mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, n);
            ggml_set_input(t_mask);
            ggml_tensor * e = ggml_get_rows(ctx, p.table, t_ids);
            if (p.text) {   // text_projection: fc2(silu(fc1(x)))
                e = ggml_silu(ctx, ggml_add(ctx, product(ctx, fc1_w, e, talker_cpu), fc1_b));
                e = ggml_add(ctx, product(ctx, fc2_w, e, talker_cpu), fc2_b);
            }
            add(ggml_mul(ctx, e, t_mask));
            in.ids.push_back({t_ids, std::move(p.ids)});
            in.floats.push_back({t_mask, std::move(p.mask)});
        }
        if (!r.vectors.empty()) {
            ggml_tensor * v = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hidden, n);
            ggml_set_input(v);
            add(v);
            in.floats.push_back({v, r.vectors});
        }
        if (!sum) throw std::invalid_argument("prompt rows carry no embedding parts");
        return sum;
    }

    static void upload(const row_inputs & in) {
        for (const auto & [t, v] : in.ids) ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        for (const auto & [t, v] : in.floats) ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    }

    // ---- talker: rows at positions [pos0, pos0 + n) -> last row's hidden and logits ------------
    void talker_forward(const prompt_rows & r, int64_t pos0, std::vector<float> & logits, std::vector<float> & h_last,
                        std::vector<float> * embeds) {
        ggml_context * ctx = runner.begin();
        ggml_cgraph * gf = runner.graph();
        row_inputs in;
        ggml_tensor * x = build_embed(ctx, r, in);
        if (embeds) ggml_set_output(x);
        const int64_t n = r.n_rows;
        ggml_tensor * pos = input_i32(ctx, n);
        ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, pos0 + n, n);
        ggml_set_input(mask);
        ggml_tensor * h = talker.build(ctx, gf, x, pos, mask, pos0);
        h = ggml_view_2d(ctx, h, hidden, 1, h->nb[1], (n - 1) * h->nb[1]);
        ggml_tensor * lg = product(ctx, codec_head, h, talker_cpu);
        ggml_set_output(h);
        ggml_set_output(lg);
        ggml_build_forward_expand(gf, lg);
        if (embeds) ggml_build_forward_expand(gf, x);
        runner.allocate();
        upload(in);
        set_causal_inputs(pos, mask, pos0, n);
        runner.compute();
        logits.resize(codec_vocab);
        h_last.resize(hidden);
        ggml_backend_tensor_get(lg, logits.data(), 0, ggml_nbytes(lg));
        ggml_backend_tensor_get(h, h_last.data(), 0, ggml_nbytes(h));
        if (embeds) {
            embeds->resize(size_t(hidden) * n);
            ggml_backend_tensor_get(x, embeds->data(), 0, ggml_nbytes(x));
        }
    }

    // ---- talker: one generation step through a persistent graph ---------------------------------
    // Every step has the same shapes but for the number of keys, so the graph attends over keys
    // [0, n_kv) with n_kv rounded up to a bucket (the mask hides the rest) and writes its key and
    // value at cache rows given as inputs: it is built and allocated once per bucket, then only fed.
    static constexpr int64_t k_step_bucket = 256;
    struct step_graph {
        bool built = false;
        int64_t n_kv = 0, cache_ctx = 0;
        std::vector<ggml_tensor *> tables;   // embedding parts, in order
        row_inputs in;
        ggml_tensor *pos = nullptr, *mask = nullptr, *k_rows = nullptr, *v_cells = nullptr;
        ggml_tensor *h = nullptr, *logits = nullptr;
    } step_graph_;
    graph_runner step_runner;   // owns that persistent graph

    void build_step_graph(const prompt_rows & r, int64_t n_kv) {
        step_graph & g = step_graph_;
        ggml_context * ctx = step_runner.begin();
        ggml_cgraph * gf = step_runner.graph();
        g = step_graph{};
        ggml_tensor * x = build_embed(ctx, r, g.in);
        for (const embed_part & p : embed_parts(r)) g.tables.push_back(p.table);
        g.pos = input_i32(ctx, 1);
        g.mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_kv, 1);
        g.k_rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 1);
        g.v_cells = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, talker.kv_dim());
        for (ggml_tensor * t : {g.mask, g.k_rows, g.v_cells}) ggml_set_input(t);
        g.h = talker.build_indexed(ctx, gf, x, g.pos, g.mask, g.k_rows, g.v_cells, n_kv);
        g.logits = product(ctx, codec_head, g.h, talker_cpu);
        ggml_set_output(g.h);
        ggml_set_output(g.logits);
        ggml_build_forward_expand(gf, g.logits);
        step_runner.allocate();
        g.n_kv = n_kv;
        g.cache_ctx = talker.capacity();
        g.built = true;
    }

    void talker_step(const prompt_rows & r, int64_t pos0, std::vector<float> & logits, std::vector<float> & h_last) {
        std::vector<embed_part> parts = embed_parts(r);
        const int64_t n_kv = std::min(talker.capacity(), (pos0 + k_step_bucket) / k_step_bucket * k_step_bucket);
        step_graph & g = step_graph_;
        bool same = g.built && g.n_kv == n_kv && g.cache_ctx == talker.capacity() && g.tables.size() == parts.size();
        for (size_t i = 0; same && i < parts.size(); ++i) same = g.tables[i] == parts[i].table;
        if (!same) build_step_graph(r, n_kv);
        // inputs are set on every call: the allocator may reuse their memory within a launch
        for (size_t i = 0; i < parts.size(); ++i) {
            ggml_backend_tensor_set(g.in.ids[i].first, parts[i].ids.data(), 0, sizeof(int32_t));
            ggml_backend_tensor_set(g.in.floats[i].first, parts[i].mask.data(), 0, sizeof(float));
        }
        const int32_t p32 = int32_t(pos0);
        ggml_backend_tensor_set(g.pos, &p32, 0, sizeof(p32));
        std::vector<float> mask(static_cast<size_t>(n_kv));
        for (int64_t j = 0; j < n_kv; ++j) mask[size_t(j)] = j <= pos0 ? 0.0f : -INFINITY;
        ggml_backend_tensor_set(g.mask, mask.data(), 0, ggml_nbytes(g.mask));
        const int64_t row = pos0;
        ggml_backend_tensor_set(g.k_rows, &row, 0, sizeof(row));
        const std::vector<int64_t> cells = talker.value_cells(pos0, 1);
        ggml_backend_tensor_set(g.v_cells, cells.data(), 0, ggml_nbytes(g.v_cells));
        step_runner.compute();
        logits.resize(codec_vocab);
        h_last.resize(hidden);
        ggml_backend_tensor_get(g.logits, logits.data(), 0, ggml_nbytes(g.logits));
        ggml_backend_tensor_get(g.h, h_last.data(), 0, ggml_nbytes(g.h));
    }

    // ---- code predictor: one sub-step -------------------------------------------------------
    // step 0 feeds [h, C(c0)] at positions 0, 1; step j feeds E_{j-1}(c_j) at position j + 1;
    // head j on the last row gives the logits of codebook j + 1. Writes the step's keys and
    // values into the cache before a later step in the same graph reads them.
    ggml_tensor * cp_substep(ggml_context * ctx, ggml_cgraph * gf, int j, ggml_tensor * h_in, ggml_tensor * code,
                             causal_input & inputs) {
        ggml_tensor * x = j == 0 ? ggml_concat(ctx, h_in, ggml_get_rows(ctx, cp_codec_embd, code), 1)
                                 : ggml_get_rows(ctx, cp_embd[j - 1], code);
        if (cp_proj_w) x = ggml_add(ctx, product(ctx, cp_proj_w, x, cp_cpu), cp_proj_b);
        const int64_t n = x->ne[1];
        const int64_t pos0 = j == 0 ? 0 : j + 1;
        inputs = {input_i32(ctx, n), ggml_new_tensor_2d(ctx, GGML_TYPE_F32, pos0 + n, n), pos0, n};
        ggml_set_input(inputs.mask);
        ggml_tensor * h = cp.build(ctx, gf, x, inputs.pos, inputs.mask, pos0);
        h = ggml_view_2d(ctx, h, h->ne[0], 1, h->nb[1], (n - 1) * h->nb[1]);
        return product(ctx, cp_head[j], h, cp_cpu);
    }

    std::vector<float> cp_step(int j, const float * h_talker, int32_t code) {
        ggml_context * ctx = cp_runner.begin();
        ggml_cgraph * gf = cp_runner.graph();
        ggml_tensor * id = input_i32(ctx, 1);
        ggml_tensor * h_in = nullptr;
        if (j == 0) {
            h_in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hidden, 1);
            ggml_set_input(h_in);
        }
        causal_input inputs{};
        ggml_tensor * lg = cp_substep(ctx, gf, j, h_in, id, inputs);
        ggml_set_output(lg);
        ggml_build_forward_expand(gf, lg);
        cp_runner.allocate();
        ggml_backend_tensor_set(id, &code, 0, sizeof(int32_t));
        if (h_in) ggml_backend_tensor_set(h_in, h_talker, 0, ggml_nbytes(h_in));
        set_causal_inputs(inputs.pos, inputs.mask, inputs.pos0, inputs.n);
        cp_runner.compute();
        std::vector<float> logits(cp_vocab);
        ggml_backend_tensor_get(lg, logits.data(), 0, ggml_nbytes(lg));
        return logits;
    }

    // the talker input that follows frame t: its embedding plus trailing text row t (or tts_pad)
    prompt_rows step_rows(const generation_request & req, int64_t t, const int32_t * frame) const {
        prompt_rows step;
        step.n_rows = 1;
        step.codec_ids = {frame[0]};
        step.frame_codes.assign(frame + 1, frame + n_groups);
        step.text_ids = {t < int64_t(req.trailing_text_ids.size()) ? req.trailing_text_ids[t] : pad_text_id};
        return step;
    }

    // ---- code predictor: one launch per frame -----------------------------------------------
    // All 15 sub-steps in one graph; each sub-step's code is chosen inside it (argmax, or Gumbel-max
    // over top-k of logits / T with noise drawn on the host) and its embedding feeds the next.
    ggml_tensor * choose_in_graph(ggml_context * ctx, ggml_tensor * logits, const sampling_config & cfg,
                                  ggml_tensor * noise) {
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

    // Every frame's code-predictor graph has the same shapes (positions 0..16, a fresh cache), so
    // it is built and allocated once per sampling setting and then only fed new inputs.
    struct frame_graph {
        bool built = false;
        sampling_config cfg;
        ggml_tensor *h_in = nullptr, *id0 = nullptr, *noise = nullptr;
        std::vector<causal_input> causal;
        std::vector<ggml_tensor *> chosen;
    } frame_graph_;
    graph_runner frame_runner;   // owns that persistent graph

    void build_frame_graph(const sampling_config & cfg) {
        const int steps = n_groups - 1;
        frame_graph & g = frame_graph_;
        ggml_context * ctx = frame_runner.begin();
        ggml_cgraph * gf = frame_runner.graph();
        g = frame_graph{};
        g.cfg = cfg;
        g.h_in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hidden, 1);
        ggml_set_input(g.h_in);
        g.id0 = input_i32(ctx, 1);
        if (cfg.do_sample) {
            g.noise = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cp_vocab, steps);
            ggml_set_input(g.noise);
        }
        g.causal.resize(steps);
        ggml_tensor * code = nullptr;
        for (int j = 0; j < steps; ++j) {
            ggml_tensor * lg = cp_substep(ctx, gf, j, g.h_in, j == 0 ? g.id0 : code, g.causal[j]);
            ggml_tensor * nz = g.noise ? ggml_view_2d(ctx, g.noise, cp_vocab, 1, g.noise->nb[1], j * g.noise->nb[1]) : nullptr;
            code = choose_in_graph(ctx, lg, cfg, nz);
            ggml_set_output(code);
            ggml_build_forward_expand(gf, code);
            g.chosen.push_back(code);
        }
        frame_runner.allocate();
        g.built = true;
    }

    void cp_frame(const float * h_talker, int32_t c0, const sampling_config & cfg, const float * noise, int32_t * codes) {
        const sampling_config & have = frame_graph_.cfg;
        if (!frame_graph_.built || have.do_sample != cfg.do_sample || have.temperature != cfg.temperature ||
            have.top_k != cfg.top_k) {
            build_frame_graph(cfg);
        }
        const frame_graph & g = frame_graph_;
        // inputs are set on every call: the allocator may reuse their memory within a launch
        ggml_backend_tensor_set(g.h_in, h_talker, 0, ggml_nbytes(g.h_in));
        ggml_backend_tensor_set(g.id0, &c0, 0, sizeof(int32_t));
        if (g.noise) ggml_backend_tensor_set(g.noise, noise, 0, ggml_nbytes(g.noise));
        for (const auto & c : g.causal) set_causal_inputs(c.pos, c.mask, c.pos0, c.n);
        frame_runner.compute();
        for (size_t j = 0; j < g.chosen.size(); ++j) ggml_backend_tensor_get(g.chosen[j], codes + j, 0, sizeof(int32_t));
    }

    // ---- generation ----------------------------------------------------------------------------
    generation_result generate(const generation_request & req, const frame_callback & on_frame) {
        check_rows(req.prompt);
        if (req.max_frames < 1) throw std::invalid_argument("max_frames must be at least 1");
        generation_result res;
        const int64_t L = req.prompt.n_rows;
        talker.reserve(L + req.max_frames + 1);
        rng r(req.seed);

        auto t0 = std::chrono::steady_clock::now();
        std::vector<float> logits, h_last;
        talker_forward(req.prompt, 0, logits, h_last, nullptr);
        res.prefill_ms = ms_since(t0);
        double talker_ms = 0;   // the step that produced the current logits (prefill for frame 0)

        std::vector<int32_t> generated;   // codebook-0 tokens of this call (repetition penalty)
        std::vector<int32_t> frame(n_groups);
        for (int64_t t = 0;; ++t) {
            process_talker_logits(logits, generated, req.repetition_penalty, int64_t(generated.size()) < req.min_new_tokens,
                                  eos_id, codec_vocab - 1024);
            const std::vector<float> talker_noise = req.talker.do_sample ? gumbel_noise(r, logits.size()) : std::vector<float>();
            const int c0 = sample_token(logits, req.talker, talker_noise.data());
            generated.push_back(c0);
            if (c0 == eos_id) {
                res.reason = stop_reason::eos;
                break;
            }
            auto tc = std::chrono::steady_clock::now();
            frame[0] = c0;
            const std::vector<float> cp_noise =
                req.code_predictor.do_sample ? gumbel_noise(r, size_t(n_groups - 1) * cp_vocab) : std::vector<float>();
            if (req.cp_single_launch && req.code_predictor.top_p >= 1.0f) {
                cp_frame(h_last.data(), c0, req.code_predictor, cp_noise.data(), frame.data() + 1);
            } else {   // step by step, sampling on the host with the same noise (also: top-p)
                for (int j = 0; j + 1 < n_groups; ++j) {
                    std::vector<float> cl = cp_step(j, h_last.data(), frame[j]);
                    frame[j + 1] = sample_token(cl, req.code_predictor, cp_noise.empty() ? nullptr : cp_noise.data() + size_t(j) * cp_vocab);
                }
            }
            frame_timing timing{talker_ms, ms_since(tc), res.prefill_ms};
            if (on_frame && !on_frame(t, frame.data(), timing)) {   // a refused frame is not kept
                res.reason = stop_reason::cancelled;
                break;
            }
            res.codes.insert(res.codes.end(), frame.begin(), frame.end());
            res.timings.push_back(timing);
            res.n_frames = t + 1;
            if (t + 1 >= req.max_frames) {
                res.reason = stop_reason::limit;
                break;
            }
            // next talker input: the frame's embedding plus the next trailing text row
            auto ts = std::chrono::steady_clock::now();
            if (req.talker_persistent) {
                talker_step(step_rows(req, t, frame.data()), L + t, logits, h_last);
            } else {
                talker_forward(step_rows(req, t, frame.data()), L + t, logits, h_last, nullptr);
            }
            talker_ms = ms_since(ts);
        }
        return res;
    }
};

tts_engine::tts_engine(const model & m, std::shared_ptr<thread_pool> pool, const stage_placement & talker,
                       const stage_placement & code_predictor)
    : p_(std::make_unique<impl>(m, std::move(pool), talker, code_predictor)) {}
tts_engine::~tts_engine() = default;

generation_result tts_engine::generate(const generation_request & request, const frame_callback & on_frame) {
    return p_->generate(request, on_frame);
}

std::vector<float> tts_engine::embed(const prompt_rows & rows) {
    p_->check_rows(rows);
    p_->talker.reserve(rows.n_rows);
    std::vector<float> logits, hidden, embeds;
    p_->talker_forward(rows, 0, logits, hidden, &embeds);
    return embeds;
}

void tts_engine::prefill(const prompt_rows & rows, std::vector<float> & logits, std::vector<float> & hidden) {
    p_->check_rows(rows);
    p_->talker.reserve(rows.n_rows);
    p_->talker_forward(rows, 0, logits, hidden, nullptr);
}

void tts_engine::teacher_forced(const generation_request & req, const int32_t * codes, int64_t n_frames,
                                std::vector<float> & logits, std::vector<float> & hidden) {
    p_->check_rows(req.prompt);
    const int64_t L = req.prompt.n_rows;
    // (the cache sized as generation with max_frames would size it: the same step graphs)
    p_->talker.reserve(L + std::max(n_frames, req.max_frames) + 1);
    std::vector<float> l, h;
    logits.clear();
    hidden.clear();
    p_->talker_forward(req.prompt, 0, l, h, nullptr);
    for (int64_t t = 0;; ++t) {
        logits.insert(logits.end(), l.begin(), l.end());
        hidden.insert(hidden.end(), h.begin(), h.end());
        if (t == n_frames) break;
        const prompt_rows step = p_->step_rows(req, t, codes + t * p_->n_groups);
        if (req.talker_persistent) {
            p_->talker_step(step, L + t, l, h);
        } else {
            p_->talker_forward(step, L + t, l, h, nullptr);
        }
    }
}

std::vector<float> tts_engine::code_predictor_logits(const float * hidden, const int32_t * codes) {
    std::vector<float> out;
    for (int j = 0; j + 1 < p_->n_groups; ++j) {
        if (codes[j] < 0 || codes[j] >= (j == 0 ? p_->codec_vocab : p_->cp_vocab)) throw std::invalid_argument("code out of range");
        std::vector<float> l = p_->cp_step(j, hidden, codes[j]);
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

std::vector<stage_launch_report> tts_engine::placement_report() const {
    std::vector<stage_launch_report> out;
    auto add = [&](const char * stage, const char * launch, const graph_runner & r) {
        if (r.allocated()) out.push_back({stage, launch, r.report()});
    };
    add("talker", "prefill", p_->runner);
    add("talker", "step", p_->step_runner);
    add("code_predictor", "frame", p_->frame_runner);
    add("code_predictor", "substep", p_->cp_runner);
    return out;
}

int tts_engine::hidden_size() const { return p_->hidden; }
int tts_engine::n_code_groups() const { return p_->n_groups; }

}  // namespace kazeia
