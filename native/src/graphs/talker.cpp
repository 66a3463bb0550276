// Talker and code predictor, in the order of the reference's generation loop:
// prompt rows -> talker prefill -> per frame: choose code 0, code predictor (15 sub-steps, fresh
// cache) -> frame embedding + trailing text -> talker step.
//
// The engine holds the weights (bound once per placement) and the graphs; each utterance's state
// (talker KV cache, random stream, tokens so far) is a tts_session. One step advances any number of
// sessions: one talker launch and one code-predictor launch for all of them, every product reading
// the weights once, and every sequence computed exactly as it would be alone.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>

#include "ggml.h"
#include "graphs/kv_cache.h"
#include "graphs/qwen3_stack.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "kazeia/tts.h"
#include "runtime/gemv_q8_0.h"
#include "runtime/graph_runner.h"
#include "runtime/sampler.h"
#include "runtime/weight_copies.h"

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

ggml_tensor * input_f32(ggml_context * ctx, int64_t a, int64_t b) {
    ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, a, b);
    ggml_set_input(t);
    return t;
}

// Column c of a [n, cols] tensor (the tensor itself when it has one column: the same graph as alone).
ggml_tensor * column(ggml_context * ctx, ggml_tensor * t, int64_t c) {
    return t->ne[1] == 1 ? t : ggml_view_2d(ctx, t, t->ne[0], 1, t->nb[1], c * t->nb[1]);
}

ggml_tensor * side_by_side(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return a ? ggml_concat(ctx, a, b, 1) : b;
}

constexpr int k_batch_nodes = 65536;   // a batched code-predictor frame: 15 sub-steps x layers x sequences

}  // namespace

struct tts_session::state {
    generation_request req;
    std::unique_ptr<kv_cache> cache;   // the talker's keys and values of this utterance
    rng random;
    std::vector<int32_t> generated;    // codebook-0 tokens so far (repetition penalty)
    std::vector<float> logits, h_last;  // the talker's output for the next frame
    std::vector<int32_t> frame;        // the frame being made
    generation_result result;
    double talker_ms = 0;              // the launch that produced `logits` (the prefill's for frame 0)
    bool step_pending = false;         // the last frame has not been fed to the talker yet
    bool done = false;
    explicit state(const generation_request & r) : req(r), random(r.seed) {}
};

tts_session::tts_session(std::unique_ptr<state> s) : s_(std::move(s)) {}
tts_session::~tts_session() = default;
bool tts_session::done() const { return s_->done; }
const generation_result & tts_session::result() const { return s_->result; }
size_t tts_session::cache_bytes() const { return s_->cache ? s_->cache->bytes() : 0; }

struct tts_engine::impl {
    const model & m;
    const model_hparams & hp;
    int hidden;
    int n_groups;
    int codec_vocab;
    int cp_vocab;

    // each stage's weights as its placement wants them (declared before the stacks that bind them)
    weight_copies talker_layout, cp_layout;
    bool talker_cpu, cp_cpu;   // the stage computes on the CPU backend: Kazeia's kernels apply
    bool shared_tables;        // both stages place weights alike: the code predictor reads the talker's tables
    ggml_backend_buffer_type_t talker_cache_buft, cp_cache_buft;
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
    // the code predictor restarts its cache every frame: one per sequence of a step, kept here
    std::vector<std::unique_ptr<kv_cache>> cp_caches;

    int eos_id, pad_text_id;
    graph_runner runner;        // talker prompts (prefill), graphs built per call
    graph_runner cp_runner;     // code predictor sub-steps one at a time (host sampling, parity)
    graph_runner step_runner;   // the talker step for a batch of sessions (persistent)
    graph_runner frame_runner;  // the code predictor's 15 sub-steps for a batch of frames (persistent)

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
    static compute_placement where(const stage_placement & p) {
        return p.scheduled ? compute_placement::sched : compute_placement::cpu;
    }

    impl(const model & model_, std::shared_ptr<thread_pool> pool, const stage_placement & talker_p,
         const stage_placement & cp_p)
        : m(model_), hp(model_.hparams()), hidden(hp.talker.tfm.hidden), n_groups(hp.talker.n_code_groups),
          codec_vocab(hp.talker.codec_vocab), cp_vocab(hp.code_predictor.vocab),
          talker_layout(&model_, layout_for(talker_p)), cp_layout(&model_, layout_for(cp_p)),
          talker_cpu(!talker_p.scheduled), cp_cpu(!cp_p.scheduled), shared_tables(talker_p == cp_p),
          talker_cache_buft(cache_buffer(talker_p, talker_layout)), cp_cache_buft(cache_buffer(cp_p, cp_layout)),
          talker(model_, "talker.", hp.talker.tfm, std::ref(talker_layout), talker_cpu),
          cp(model_, "cp.", hp.code_predictor.tfm, std::ref(cp_layout), cp_cpu),
          runner(pool, 8192, where(talker_p), talker_p.device),
          cp_runner(pool, 8192, where(cp_p), cp_p.device),
          step_runner(pool, k_batch_nodes, where(talker_p), talker_p.device),
          frame_runner(pool, k_batch_nodes, where(cp_p), cp_p.device) {
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
        eos_id = hp.talker.codec_eos;
        pad_text_id = hp.talker.text_pad;
    }

    std::unique_ptr<kv_cache> new_talker_cache(int64_t n_ctx) const {
        auto c = std::make_unique<kv_cache>(talker.n_layers(), talker.kv_dim(), talker_cache_buft);
        c->reserve(n_ctx);
        return c;
    }
    kv_cache & cp_cache(size_t slot) {
        while (cp_caches.size() <= slot) {
            cp_caches.push_back(std::make_unique<kv_cache>(cp.n_layers(), cp.kv_dim(), cp_cache_buft));
            cp_caches.back()->reserve(n_groups + 1);
        }
        return *cp_caches[slot];
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
    // (`batch`: the rows are separate sequences, each computed exactly as it would be alone)
    ggml_tensor * build_embed(ggml_context * ctx, const prompt_rows & r, row_inputs & in, bool batch = false) {
        const int64_t n = r.n_rows;
        ggml_tensor * sum = nullptr;
        auto add = [&](ggml_tensor * t) { sum = sum ? ggml_add(ctx, sum, t) : t; };
        for (embed_part & p : embed_parts(r)) {
            ggml_tensor * t_ids = input_i32(ctx, n);
            ggml_tensor * t_mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, n);
            ggml_set_input(t_mask);
            ggml_tensor * e = ggml_get_rows(ctx, p.table, t_ids);
            if (p.text) {   // text_projection: fc2(silu(fc1(x)))
                e = ggml_silu(ctx, ggml_add(ctx, product(ctx, fc1_w, e, talker_cpu, batch), fc1_b));
                e = ggml_add(ctx, product(ctx, fc2_w, e, talker_cpu, batch), fc2_b);
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
    void talker_forward(const prompt_rows & r, int64_t pos0, kv_cache & cache, std::vector<float> & logits,
                        std::vector<float> & h_last, std::vector<float> * embeds) {
        ggml_context * ctx = runner.begin();
        ggml_cgraph * gf = runner.graph();
        row_inputs in;
        ggml_tensor * x = build_embed(ctx, r, in);
        if (embeds) ggml_set_output(x);
        const int64_t n = r.n_rows;
        ggml_tensor * pos = input_i32(ctx, n);
        ggml_tensor * mask = input_f32(ctx, pos0 + n, n);
        // (one row: the step's arithmetic; a prompt: the fastest product for many rows)
        ggml_tensor * h = talker.build(ctx, gf, x, pos, {{&cache, 0, n, mask, pos0 + n, pos0}}, n == 1);
        h = ggml_view_2d(ctx, h, hidden, 1, h->nb[1], (n - 1) * h->nb[1]);
        ggml_tensor * lg = product(ctx, codec_head, h, talker_cpu);
        ggml_set_output(h);
        ggml_set_output(lg);
        ggml_build_forward_expand(gf, lg);
        if (embeds) ggml_build_forward_expand(gf, x);
        runner.allocate();
        upload(in);
        std::vector<int32_t> positions(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = int32_t(pos0 + i);
        ggml_backend_tensor_set(pos, positions.data(), 0, ggml_nbytes(pos));
        const auto mk = causal_mask(pos0, n);
        ggml_backend_tensor_set(mask, mk.data(), 0, ggml_nbytes(mask));
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

    // ---- talker: one generation step for several sequences, through a persistent graph ----------
    // Each sequence feeds one row at its own position into its own cache. Every step has the same
    // shapes but for the number of keys, so a sequence attends over keys [0, n_kv) with n_kv a whole
    // kv_cache bucket (the mask hides the rest) and writes its key and value at cache rows given as
    // inputs: the graph is built once per batch composition and bucket, then only fed.
    struct talker_slot {
        kv_cache * cache;
        int64_t pos;
        prompt_rows row;                // its one input row
        std::vector<float> * logits;
        std::vector<float> * h;
    };
    struct step_graph {
        bool built = false;
        std::vector<std::pair<uint64_t, int64_t>> key;   // per sequence: cache allocation, keys attended
        std::vector<ggml_tensor *> tables;                // embedding parts, in order
        row_inputs in;
        ggml_tensor *pos = nullptr, *h = nullptr, *logits = nullptr;
        std::vector<ggml_tensor *> mask, k_rows, v_cells;
    } step_graph_;

    void build_step_graph(const std::vector<talker_slot> & slots, const prompt_rows & rows,
                          const std::vector<std::pair<uint64_t, int64_t>> & key) {
        step_graph & g = step_graph_;
        ggml_context * ctx = step_runner.begin();
        ggml_cgraph * gf = step_runner.graph();
        g = step_graph{};
        const bool batch = slots.size() > 1;
        ggml_tensor * x = build_embed(ctx, rows, g.in, batch);
        for (const embed_part & p : embed_parts(rows)) g.tables.push_back(p.table);
        g.pos = input_i32(ctx, int64_t(slots.size()));
        std::vector<attention_segment> segments;
        for (size_t b = 0; b < slots.size(); ++b) {
            const int64_t n_kv = key[b].second;
            g.mask.push_back(input_f32(ctx, n_kv, 1));
            g.k_rows.push_back(ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 1));
            g.v_cells.push_back(ggml_new_tensor_1d(ctx, GGML_TYPE_I64, talker.kv_dim()));
            ggml_set_input(g.k_rows.back());
            ggml_set_input(g.v_cells.back());
            segments.push_back({slots[b].cache, int64_t(b), 1, g.mask.back(), n_kv, 0, g.k_rows.back(), g.v_cells.back()});
        }
        g.h = talker.build(ctx, gf, x, g.pos, segments, true);
        g.logits = product(ctx, codec_head, g.h, talker_cpu, batch);
        ggml_set_output(g.h);
        ggml_set_output(g.logits);
        ggml_build_forward_expand(gf, g.logits);
        step_runner.allocate();
        g.key = key;
        g.built = true;
    }

    void talker_steps(const std::vector<talker_slot> & slots) {
        const size_t n = slots.size();
        prompt_rows rows;   // the sequences' rows, one per sequence
        rows.n_rows = int64_t(n);
        std::vector<std::pair<uint64_t, int64_t>> key;
        for (const talker_slot & s : slots) {
            rows.text_ids.push_back(s.row.text_ids[0]);
            rows.codec_ids.push_back(s.row.codec_ids[0]);
            rows.frame_codes.insert(rows.frame_codes.end(), s.row.frame_codes.begin(), s.row.frame_codes.end());
            const int64_t n_kv = kv_cache::keys_for(s.pos);
            if (n_kv > s.cache->capacity()) throw std::logic_error("talker cache too small for its position");
            key.emplace_back(s.cache->id(), n_kv);
        }
        std::vector<embed_part> parts = embed_parts(rows);
        step_graph & g = step_graph_;
        bool same = g.built && g.key == key && g.tables.size() == parts.size();
        for (size_t i = 0; same && i < parts.size(); ++i) same = g.tables[i] == parts[i].table;
        if (!same) build_step_graph(slots, rows, key);
        // inputs are set on every call: the allocator may reuse their memory within a launch
        for (size_t i = 0; i < parts.size(); ++i) {
            ggml_backend_tensor_set(g.in.ids[i].first, parts[i].ids.data(), 0, ggml_nbytes(g.in.ids[i].first));
            ggml_backend_tensor_set(g.in.floats[i].first, parts[i].mask.data(), 0, ggml_nbytes(g.in.floats[i].first));
        }
        std::vector<int32_t> positions;
        for (size_t b = 0; b < n; ++b) {
            const talker_slot & s = slots[b];
            positions.push_back(int32_t(s.pos));
            const std::vector<float> mask = step_mask(s.pos, key[b].second);
            ggml_backend_tensor_set(g.mask[b], mask.data(), 0, ggml_nbytes(g.mask[b]));
            const int64_t row = s.pos;
            ggml_backend_tensor_set(g.k_rows[b], &row, 0, sizeof(row));
            const std::vector<int64_t> cells = s.cache->value_cells(s.pos, 1);
            ggml_backend_tensor_set(g.v_cells[b], cells.data(), 0, ggml_nbytes(g.v_cells[b]));
        }
        ggml_backend_tensor_set(g.pos, positions.data(), 0, ggml_nbytes(g.pos));
        step_runner.compute();
        for (size_t b = 0; b < n; ++b) {
            slots[b].logits->resize(codec_vocab);
            slots[b].h->resize(hidden);
            ggml_backend_tensor_get(g.logits, slots[b].logits->data(), b * g.logits->nb[1], size_t(codec_vocab) * sizeof(float));
            ggml_backend_tensor_get(g.h, slots[b].h->data(), b * g.h->nb[1], size_t(hidden) * sizeof(float));
        }
    }

    // ---- code predictor: one sub-step, sampled on the host ----------------------------------
    // step 0 feeds [h, C(c0)] at positions 0, 1; step j feeds E_{j-1}(c_j) at position j + 1;
    // head j on the last row gives the logits of codebook j + 1.
    std::vector<float> cp_step(int j, const float * h_talker, int32_t code) {
        ggml_context * ctx = cp_runner.begin();
        ggml_cgraph * gf = cp_runner.graph();
        ggml_tensor * id = input_i32(ctx, 1);
        ggml_tensor * h_in = j == 0 ? input_f32(ctx, hidden, 1) : nullptr;
        ggml_tensor * x = j == 0 ? ggml_concat(ctx, h_in, ggml_get_rows(ctx, cp_codec_embd, id), 1)
                                 : ggml_get_rows(ctx, cp_embd[j - 1], id);
        // (every code-predictor product column by column, as in a batch: sub-step 0 feeds two rows)
        if (cp_proj_w) x = ggml_add(ctx, product(ctx, cp_proj_w, x, cp_cpu, true), cp_proj_b);
        const int64_t n = x->ne[1], pos0 = j == 0 ? 0 : j + 1;
        ggml_tensor * pos = input_i32(ctx, n);
        ggml_tensor * mask = input_f32(ctx, pos0 + n, n);
        ggml_tensor * h = cp.build(ctx, gf, x, pos, {{&cp_cache(0), 0, n, mask, pos0 + n, pos0}}, true);
        h = ggml_view_2d(ctx, h, h->ne[0], 1, h->nb[1], (n - 1) * h->nb[1]);
        ggml_tensor * lg = product(ctx, cp_head[j], h, cp_cpu);
        ggml_set_output(lg);
        ggml_build_forward_expand(gf, lg);
        cp_runner.allocate();
        ggml_backend_tensor_set(id, &code, 0, sizeof(int32_t));
        if (h_in) ggml_backend_tensor_set(h_in, h_talker, 0, ggml_nbytes(h_in));
        std::vector<int32_t> positions(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = int32_t(pos0 + i);
        ggml_backend_tensor_set(pos, positions.data(), 0, ggml_nbytes(pos));
        const auto mk = causal_mask(pos0, n);
        ggml_backend_tensor_set(mask, mk.data(), 0, ggml_nbytes(mask));
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

    // ---- code predictor: one launch per frame, for several frames ------------------------------
    // All 15 sub-steps in one graph; each sub-step's code is chosen inside it (argmax, or Gumbel-max
    // over top-k of logits / T with noise drawn on the host) and its embedding feeds the next. Each
    // frame of a batch has its own cache, sampling settings and noise.
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

    struct cp_slot {
        const float * h;              // the talker's hidden state for this frame
        int32_t c0;
        const sampling_config * cfg;
        const float * noise;          // [15][vocab] when sampling
        int32_t * codes;              // out: codes 1..15
        float * logits = nullptr;     // out when given: [15][vocab], each sub-step's logits (tests)
    };
    struct frame_graph {
        bool built = false;
        std::vector<sampling_config> cfgs;
        ggml_tensor *h_in = nullptr, *id0 = nullptr;
        std::vector<ggml_tensor *> noise;                    // per frame, when it samples
        std::vector<std::pair<ggml_tensor *, std::vector<int32_t>>> positions;
        std::vector<std::pair<ggml_tensor *, std::vector<float>>> masks;
        std::vector<std::vector<ggml_tensor *>> chosen;      // per frame, per sub-step
        std::vector<ggml_tensor *> logits;                   // per sub-step [vocab, B]
    } frame_graph_;

    static bool same_choice(const sampling_config & a, const sampling_config & b) {
        return a.do_sample == b.do_sample && a.temperature == b.temperature && a.top_k == b.top_k;
    }

    void build_frame_graph(const std::vector<cp_slot> & slots) {
        const int steps = n_groups - 1;
        const int64_t B = int64_t(slots.size());
        frame_graph & g = frame_graph_;
        ggml_context * ctx = frame_runner.begin();
        ggml_cgraph * gf = frame_runner.graph();
        g = frame_graph{};
        for (const cp_slot & s : slots) g.cfgs.push_back(*s.cfg);
        g.h_in = input_f32(ctx, hidden, B);
        g.id0 = input_i32(ctx, B);
        for (const cp_slot & s : slots) g.noise.push_back(s.cfg->do_sample ? input_f32(ctx, cp_vocab, steps) : nullptr);
        g.chosen.assign(size_t(B), {});
        for (int j = 0; j < steps; ++j) {
            const int64_t n = j == 0 ? 2 : 1, pos0 = j == 0 ? 0 : j + 1;
            ggml_tensor * x = nullptr;
            for (int64_t b = 0; b < B; ++b) {
                ggml_tensor * xb;
                if (j == 0) {
                    ggml_tensor * id = B == 1 ? g.id0 : ggml_view_1d(ctx, g.id0, 1, size_t(b) * sizeof(int32_t));
                    xb = ggml_concat(ctx, column(ctx, g.h_in, b), ggml_get_rows(ctx, cp_codec_embd, id), 1);
                } else {
                    xb = ggml_get_rows(ctx, cp_embd[j - 1], g.chosen[size_t(b)].back());
                }
                x = side_by_side(ctx, x, xb);
            }
            if (cp_proj_w) x = ggml_add(ctx, product(ctx, cp_proj_w, x, cp_cpu, true), cp_proj_b);
            ggml_tensor * pos = input_i32(ctx, n * B);
            std::vector<int32_t> pos_values;
            std::vector<attention_segment> segments;
            for (int64_t b = 0; b < B; ++b) {
                ggml_tensor * mask = input_f32(ctx, pos0 + n, n);
                g.masks.push_back({mask, causal_mask(pos0, n)});
                for (int64_t i = 0; i < n; ++i) pos_values.push_back(int32_t(pos0 + i));
                segments.push_back({&cp_cache(size_t(b)), b * n, n, mask, pos0 + n, pos0});
            }
            g.positions.push_back({pos, pos_values});
            ggml_tensor * h = cp.build(ctx, gf, x, pos, segments, true);
            // each frame's last row
            if (n == 1) {
            } else if (B == 1) {
                h = ggml_view_2d(ctx, h, h->ne[0], 1, h->nb[1], (n - 1) * h->nb[1]);
            } else {
                h = ggml_cont(ctx, ggml_view_2d(ctx, h, h->ne[0], B, n * h->nb[1], (n - 1) * h->nb[1]));
            }
            ggml_tensor * lg = product(ctx, cp_head[j], h, cp_cpu, true);   // [vocab, B]
            ggml_set_output(lg);
            g.logits.push_back(lg);
            for (int64_t b = 0; b < B; ++b) {
                ggml_tensor * nz = g.noise[size_t(b)];
                if (nz) nz = ggml_view_2d(ctx, nz, cp_vocab, 1, nz->nb[1], j * nz->nb[1]);
                ggml_tensor * code = choose_in_graph(ctx, column(ctx, lg, b), *slots[size_t(b)].cfg, nz);
                ggml_set_output(code);
                ggml_build_forward_expand(gf, code);
                g.chosen[size_t(b)].push_back(code);
            }
        }
        frame_runner.allocate();
        g.built = true;
    }

    void cp_frames(const std::vector<cp_slot> & slots) {
        frame_graph & g = frame_graph_;
        bool same = g.built && g.cfgs.size() == slots.size();
        for (size_t b = 0; same && b < slots.size(); ++b) same = same_choice(g.cfgs[b], *slots[b].cfg);
        if (!same) build_frame_graph(slots);
        // inputs are set on every call: the allocator may reuse their memory within a launch
        for (size_t b = 0; b < slots.size(); ++b) {
            ggml_backend_tensor_set(g.h_in, slots[b].h, b * g.h_in->nb[1], size_t(hidden) * sizeof(float));
            ggml_backend_tensor_set(g.id0, &slots[b].c0, b * sizeof(int32_t), sizeof(int32_t));
            if (g.noise[b]) ggml_backend_tensor_set(g.noise[b], slots[b].noise, 0, ggml_nbytes(g.noise[b]));
        }
        for (const auto & [t, v] : g.positions) ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        for (const auto & [t, v] : g.masks) ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        frame_runner.compute();
        for (size_t b = 0; b < slots.size(); ++b) {
            for (size_t j = 0; j < g.chosen[b].size(); ++j) {
                ggml_backend_tensor_get(g.chosen[b][j], slots[b].codes + j, 0, sizeof(int32_t));
                if (slots[b].logits) {
                    ggml_backend_tensor_get(g.logits[j], slots[b].logits + j * cp_vocab, b * g.logits[j]->nb[1],
                                            size_t(cp_vocab) * sizeof(float));
                }
            }
        }
    }

    // ---- sessions ------------------------------------------------------------------------------
    std::unique_ptr<tts_session> open(const generation_request & req) {
        check_rows(req.prompt);
        if (req.max_frames < 1) throw std::invalid_argument("max_frames must be at least 1");
        auto s = std::make_unique<tts_session::state>(req);
        const int64_t L = req.prompt.n_rows;
        s->cache = new_talker_cache(L + req.max_frames + 1);
        s->frame.assign(size_t(n_groups), 0);
        const auto t0 = std::chrono::steady_clock::now();
        talker_forward(req.prompt, 0, *s->cache, s->logits, s->h_last, nullptr);
        s->result.prefill_ms = ms_since(t0);
        return std::unique_ptr<tts_session>(new tts_session(std::move(s)));
    }

    static void finish(tts_session::state & s, stop_reason why) {
        s.done = true;
        s.result.reason = why;
    }

    void step(const std::vector<tts_session *> & sessions) {
        std::vector<tts_session::state *> live;
        for (tts_session * s : sessions) {
            if (s && !s->s_->done) live.push_back(s->s_.get());
        }
        // 1. the talker reads each last frame (one launch for all that continue)
        std::vector<talker_slot> steps;
        std::vector<tts_session::state *> stepped;
        for (tts_session::state * s : live) {
            if (!s->step_pending) continue;
            const int64_t t = s->result.n_frames - 1;
            const int64_t pos = s->req.prompt.n_rows + t;
            if (s->req.talker_persistent) {
                steps.push_back({s->cache.get(), pos, step_rows(s->req, t, s->frame.data()), &s->logits, &s->h_last});
                stepped.push_back(s);
            } else {   // the step graph rebuilt every frame (a parity check of the persistent one)
                const auto ts = std::chrono::steady_clock::now();
                talker_forward(step_rows(s->req, t, s->frame.data()), pos, *s->cache, s->logits, s->h_last, nullptr);
                s->talker_ms = ms_since(ts);
            }
            s->step_pending = false;
        }
        if (!steps.empty()) {
            const auto ts = std::chrono::steady_clock::now();
            talker_steps(steps);
            const double ms = ms_since(ts);
            for (tts_session::state * s : stepped) s->talker_ms = ms;
        }
        // 2. code 0 of each frame, on the host with the session's own random stream
        std::vector<tts_session::state *> making;
        std::vector<std::vector<float>> cp_noise;
        for (tts_session::state * s : live) {
            const generation_request & req = s->req;
            process_talker_logits(s->logits, s->generated, req.repetition_penalty,
                                  int64_t(s->generated.size()) < req.min_new_tokens, eos_id, codec_vocab - 1024);
            const std::vector<float> talker_noise = req.talker.do_sample ? gumbel_noise(s->random, s->logits.size())
                                                                         : std::vector<float>();
            const int c0 = sample_token(s->logits, req.talker, talker_noise.data());
            s->generated.push_back(c0);
            if (c0 == eos_id) {
                finish(*s, stop_reason::eos);
                continue;
            }
            s->frame[0] = c0;
            making.push_back(s);
            cp_noise.push_back(req.code_predictor.do_sample ? gumbel_noise(s->random, size_t(n_groups - 1) * cp_vocab)
                                                            : std::vector<float>());
        }
        if (making.empty()) return;
        // 3. codes 1..15: one launch for every frame chosen in the graph; step by step on the host
        // for settings the graph does not do (top-p) or when asked to
        const auto tc = std::chrono::steady_clock::now();
        std::vector<cp_slot> frames;
        for (size_t i = 0; i < making.size(); ++i) {
            tts_session::state * s = making[i];
            if (s->req.cp_single_launch && s->req.code_predictor.top_p >= 1.0f) {
                frames.push_back({s->h_last.data(), s->frame[0], &s->req.code_predictor, cp_noise[i].data(), s->frame.data() + 1});
                continue;
            }
            for (int j = 0; j + 1 < n_groups; ++j) {
                std::vector<float> cl = cp_step(j, s->h_last.data(), s->frame[size_t(j)]);
                s->frame[size_t(j) + 1] = sample_token(cl, s->req.code_predictor,
                                                       cp_noise[i].empty() ? nullptr : cp_noise[i].data() + size_t(j) * cp_vocab);
            }
        }
        if (!frames.empty()) cp_frames(frames);
        const double cp_ms = ms_since(tc);
        for (tts_session::state * s : making) {
            generation_result & r = s->result;
            r.codes.insert(r.codes.end(), s->frame.begin(), s->frame.end());
            r.timings.push_back({s->talker_ms, cp_ms, r.prefill_ms});
            r.n_frames += 1;
            if (r.n_frames >= s->req.max_frames) {
                finish(*s, stop_reason::limit);
            } else {
                s->step_pending = true;
            }
        }
    }

    // ---- generation: one session, frame by frame, asking the caller after each -----------------
    generation_result generate(const generation_request & req, const frame_callback & on_frame) {
        std::unique_ptr<tts_session> session = open(req);
        tts_session::state & s = *session->s_;
        while (!s.done) {
            const int64_t before = s.result.n_frames;
            step({session.get()});
            if (s.result.n_frames == before || !on_frame) continue;
            const int64_t t = before;
            if (!on_frame(t, s.result.codes.data() + t * n_groups, s.result.timings.back())) {
                // a refused frame is not kept
                s.result.codes.resize(size_t(t * n_groups));
                s.result.timings.pop_back();
                s.result.n_frames = t;
                finish(s, stop_reason::cancelled);
            }
        }
        return std::move(s.result);
    }
};

tts_engine::tts_engine(const model & m, std::shared_ptr<thread_pool> pool, const stage_placement & talker,
                       const stage_placement & code_predictor)
    : p_(std::make_unique<impl>(m, std::move(pool), talker, code_predictor)) {}
tts_engine::~tts_engine() = default;

generation_result tts_engine::generate(const generation_request & request, const frame_callback & on_frame) {
    return p_->generate(request, on_frame);
}

std::unique_ptr<tts_session> tts_engine::open(const generation_request & request) { return p_->open(request); }

void tts_engine::step(const std::vector<tts_session *> & sessions) { p_->step(sessions); }

std::vector<float> tts_engine::embed(const prompt_rows & rows) {
    p_->check_rows(rows);
    auto cache = p_->new_talker_cache(rows.n_rows);
    std::vector<float> logits, hidden, embeds;
    p_->talker_forward(rows, 0, *cache, logits, hidden, &embeds);
    return embeds;
}

void tts_engine::prefill(const prompt_rows & rows, std::vector<float> & logits, std::vector<float> & hidden) {
    p_->check_rows(rows);
    auto cache = p_->new_talker_cache(rows.n_rows);
    p_->talker_forward(rows, 0, *cache, logits, hidden, nullptr);
}

void tts_engine::teacher_forced(const generation_request & req, const int32_t * codes, int64_t n_frames,
                                std::vector<float> & logits, std::vector<float> & hidden) {
    p_->check_rows(req.prompt);
    const int64_t L = req.prompt.n_rows;
    auto cache = p_->new_talker_cache(L + std::max(n_frames, req.max_frames) + 1);
    std::vector<float> l, h;
    logits.clear();
    hidden.clear();
    p_->talker_forward(req.prompt, 0, *cache, l, h, nullptr);
    for (int64_t t = 0;; ++t) {
        logits.insert(logits.end(), l.begin(), l.end());
        hidden.insert(hidden.end(), h.begin(), h.end());
        if (t == n_frames) break;
        const prompt_rows step = p_->step_rows(req, t, codes + t * p_->n_groups);
        if (req.talker_persistent) {
            p_->talker_steps({{cache.get(), L + t, step, &l, &h}});
        } else {
            p_->talker_forward(step, L + t, *cache, l, h, nullptr);
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

void tts_engine::code_predictor_frames(const float * hidden, const int32_t * c0, int n, const sampling_config & cfg,
                                       const float * noise, int32_t * codes, float * logits) {
    const size_t steps = size_t(p_->n_groups - 1), vocab = size_t(p_->cp_vocab);
    std::vector<impl::cp_slot> slots;
    for (int b = 0; b < n; ++b) {
        slots.push_back({hidden + size_t(b) * p_->hidden, c0[b], &cfg, noise ? noise + b * steps * vocab : nullptr,
                         codes + b * steps, logits + b * steps * vocab});
    }
    p_->cp_frames(slots);
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
int tts_engine::code_predictor_vocab() const { return p_->cp_vocab; }

}  // namespace kazeia
