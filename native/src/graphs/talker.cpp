// The talker: prompt rows -> embeddings (text through text_projection, codec and frame codes from
// their tables, x-vectors added as they are) -> Qwen3 layers -> codec logits of the last row.
#include "graphs/talker.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/products.h"

namespace kazeia {

talker_weights::talker_weights(const model & m, weight_copies & layout, const stage_placement & p)
    : hp_(m.hparams()), placement_(p), hidden_(hp_.talker.tfm.hidden), n_groups_(hp_.talker.n_code_groups),
      codec_vocab_(hp_.talker.codec_vocab), cp_vocab_(hp_.code_predictor.vocab), cpu_(!p.scheduled),
      text_embd_(layout.table(m.require("talker.text_embd.weight", "talker"))),
      fc1_w_(layout(m.require("talker.text_proj.fc1.weight", "talker"))),
      fc1_b_(layout(m.require("talker.text_proj.fc1.bias", "talker"))),
      fc2_w_(layout(m.require("talker.text_proj.fc2.weight", "talker"))),
      fc2_b_(layout(m.require("talker.text_proj.fc2.bias", "talker"))),
      codec_embd_(layout.table(m.require("talker.codec_embd.weight", "talker"))),
      codec_head_(layout(m.require("talker.codec_head.weight", "talker"))),
      stack_(m, "talker.", hp_.talker.tfm, std::ref(layout), cpu_), pad_text_id_(hp_.talker.text_pad) {
    for (int j = 0; j + 1 < n_groups_; ++j) {
        frame_embd_.push_back(layout.table(m.require("cp.codec_embd." + std::to_string(j) + ".weight", "talker")));
    }
    caches_ = std::make_shared<kv_cache_pool>(stack_.n_layers(), stack_.kv_dim(), cache_buffer(p, layout));
}

void talker_weights::check_rows(const prompt_rows & r) const {
    const size_t n = size_t(r.n_rows);
    if (r.n_rows < 1) throw std::invalid_argument("the prompt has no rows");
    if (r.text_ids.size() != n || r.codec_ids.size() != n) throw std::invalid_argument("prompt arrays differ in length");
    if (!r.frame_codes.empty() && r.frame_codes.size() != n * (n_groups_ - 1)) {
        throw std::invalid_argument("frame_codes must hold n_rows x 15 codes");
    }
    if (!r.vectors.empty() && r.vectors.size() != n * size_t(hidden_)) {
        throw std::invalid_argument("vectors must hold n_rows x hidden values");
    }
    for (int32_t id : r.text_ids) {
        if (id < -1 || id >= hp_.talker.text_vocab) throw std::invalid_argument("text id " + std::to_string(id) + " out of range");
    }
    for (int32_t id : r.codec_ids) {
        if (id < -1 || id >= codec_vocab_) throw std::invalid_argument("codec id " + std::to_string(id) + " out of range");
    }
    for (int32_t id : r.frame_codes) {
        if (id < -1 || id >= cp_vocab_) throw std::invalid_argument("frame code " + std::to_string(id) + " out of range");
    }
}

std::vector<embed_part> talker_weights::embed_parts(const prompt_rows & r) const {
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
    part(text_embd_, r.text_ids.data(), 1, true);
    part(codec_embd_, r.codec_ids.data(), 1, false);
    if (!r.frame_codes.empty()) {
        for (int j = 0; j + 1 < n_groups_; ++j) part(frame_embd_[j], r.frame_codes.data() + j, n_groups_ - 1, false);
    }
    return parts;
}

ggml_tensor * talker_weights::build_embed(ggml_context * ctx, const prompt_rows & r, row_inputs & in, bool batch) const {
    const int64_t n = r.n_rows;
    ggml_tensor * sum = nullptr;
    auto add = [&](ggml_tensor * t) { sum = sum ? ggml_add(ctx, sum, t) : t; };
    for (embed_part & p : embed_parts(r)) {
        ggml_tensor * t_ids = input_i32(ctx, n);
        ggml_tensor * t_mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, n);
        ggml_set_input(t_mask);
        ggml_tensor * e = ggml_get_rows(ctx, p.table, t_ids);
        if (p.text) {   // text_projection: fc2(silu(fc1(x)))
            e = ggml_silu(ctx, ggml_add(ctx, product(ctx, fc1_w_, e, cpu_, batch), fc1_b_));
            e = ggml_add(ctx, product(ctx, fc2_w_, e, cpu_, batch), fc2_b_);
        }
        add(ggml_mul(ctx, e, t_mask));
        in.ids.push_back({t_ids, std::move(p.ids)});
        in.floats.push_back({t_mask, std::move(p.mask)});
    }
    if (!r.vectors.empty()) {
        ggml_tensor * v = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hidden_, n);
        ggml_set_input(v);
        add(v);
        in.floats.push_back({v, r.vectors});
    }
    if (!sum) throw std::invalid_argument("prompt rows carry no embedding parts");
    return sum;
}

void row_inputs::upload() const {
    for (const auto & [t, v] : ids) ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    for (const auto & [t, v] : floats) ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
}

prompt_rows talker_weights::step_rows(const std::vector<int32_t> & trailing_text_ids, int64_t t,
                                      const int32_t * frame) const {
    prompt_rows step;
    step.n_rows = 1;
    step.codec_ids = {frame[0]};
    step.frame_codes.assign(frame + 1, frame + n_groups_);
    step.text_ids = {t < int64_t(trailing_text_ids.size()) ? trailing_text_ids[t] : pad_text_id_};
    return step;
}

// ---- runner ----------------------------------------------------------------------------------

talker_runner::talker_runner(const talker_weights & w, std::shared_ptr<thread_pool> pool)
    : w_(w), prefill_runner_(pool, 8192, where(w.placement()), w.placement().device),
      step_runner_(pool, k_batch_nodes, where(w.placement()), w.placement().device) {}

// rows at positions [pos0, pos0 + n) -> the last row's hidden state and logits
void talker_runner::forward(const prompt_rows & r, int64_t pos0, kv_cache & cache, std::vector<float> & logits,
                           std::vector<float> & h_last, std::vector<float> * embeds) {
    ggml_context * ctx = prefill_runner_.begin();
    ggml_cgraph * gf = prefill_runner_.graph();
    row_inputs in;
    ggml_tensor * x = w_.build_embed(ctx, r, in);
    if (embeds) ggml_set_output(x);
    const int64_t n = r.n_rows;
    ggml_tensor * pos = input_i32(ctx, n);
    ggml_tensor * mask = input_f32(ctx, pos0 + n, n);
    cache.prepare(pos0 + n, pos0 + n);
    // (one row: the step's arithmetic; a prompt: the fastest product for many rows)
    ggml_tensor * h = w_.stack().build(ctx, gf, x, pos, {{&cache, 0, n, mask, pos0 + n, pos0}}, n == 1, true);
    ggml_tensor * lg = product(ctx, w_.codec_head(), h, w_.cpu());
    ggml_set_output(h);
    ggml_set_output(lg);
    ggml_build_forward_expand(gf, lg);
    if (embeds) ggml_build_forward_expand(gf, x);
    prefill_runner_.allocate();
    in.upload();
    set_causal_inputs(pos, mask, pos0, n);
    prefill_runner_.compute();
    logits.resize(w_.codec_vocab());
    h_last.resize(w_.hidden());
    ggml_backend_tensor_get(lg, logits.data(), 0, ggml_nbytes(lg));
    ggml_backend_tensor_get(h, h_last.data(), 0, ggml_nbytes(h));
    if (embeds) {
        embeds->resize(size_t(w_.hidden()) * n);
        ggml_backend_tensor_get(x, embeds->data(), 0, ggml_nbytes(x));
    }
}

// One generation step for several sequences, through a persistent graph. Each sequence feeds one row at its own position into its own cache. Every step has the same
// shapes but for the number of keys, so a sequence attends over keys [0, n_kv) with n_kv a whole
// kv_cache bucket (the mask hides the rest) and writes its key and value at cache rows given as
// inputs: the graph is built once per batch composition and bucket, then only fed.
void talker_runner::build_step_graph(const std::vector<slot> & slots, const prompt_rows & rows,
                                    const std::vector<std::pair<uint64_t, int64_t>> & key) {
    step_graph & g = step_graph_;
    ggml_context * ctx = step_runner_.begin();
    ggml_cgraph * gf = step_runner_.graph();
    g = step_graph{};
    const bool batch = slots.size() > 1;
    ggml_tensor * x = w_.build_embed(ctx, rows, g.in, batch);
    for (const embed_part & p : w_.embed_parts(rows)) g.tables.push_back(p.table);
    g.pos = input_i32(ctx, int64_t(slots.size()));
    std::vector<attention_segment> segments;
    for (size_t b = 0; b < slots.size(); ++b) {
        const int64_t n_kv = key[b].second;
        g.mask.push_back(input_f32(ctx, n_kv, 1));
        g.k_rows.push_back(ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 1));
        g.v_cells.push_back(ggml_new_tensor_1d(ctx, GGML_TYPE_I64, w_.stack().kv_dim()));
        ggml_set_input(g.k_rows.back());
        ggml_set_input(g.v_cells.back());
        segments.push_back({slots[b].cache, int64_t(b), 1, g.mask.back(), n_kv, 0, g.k_rows.back(), g.v_cells.back()});
    }
    g.h = w_.stack().build(ctx, gf, x, g.pos, segments, true);
    g.logits = product(ctx, w_.codec_head(), g.h, w_.cpu(), batch);
    ggml_set_output(g.h);
    ggml_set_output(g.logits);
    ggml_build_forward_expand(gf, g.logits);
    step_runner_.allocate();
    g.key = key;
    g.built = true;
}

void talker_runner::steps(const std::vector<slot> & slots) {
    const size_t n = slots.size();
    prompt_rows rows;   // the sequences' rows, one per sequence
    rows.n_rows = int64_t(n);
    std::vector<std::pair<uint64_t, int64_t>> key;
    for (const slot & s : slots) {
        rows.text_ids.push_back(s.row.text_ids[0]);
        rows.codec_ids.push_back(s.row.codec_ids[0]);
        rows.frame_codes.insert(rows.frame_codes.end(), s.row.frame_codes.begin(), s.row.frame_codes.end());
        const int64_t n_kv = kv_cache::keys_for(s.pos);
        if (n_kv > s.cache->capacity()) throw std::logic_error("talker cache too small for its position");
        s.cache->prepare(n_kv, s.pos + 1);
        key.emplace_back(s.cache->id(), n_kv);
    }
    std::vector<embed_part> parts = w_.embed_parts(rows);
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
        const slot & s = slots[b];
        positions.push_back(int32_t(s.pos));
        const std::vector<float> mask = step_mask(s.pos, key[b].second);
        ggml_backend_tensor_set(g.mask[b], mask.data(), 0, ggml_nbytes(g.mask[b]));
        const int64_t row = s.pos;
        ggml_backend_tensor_set(g.k_rows[b], &row, 0, sizeof(row));
        const std::vector<int64_t> cells = s.cache->value_cells(s.pos, 1);
        ggml_backend_tensor_set(g.v_cells[b], cells.data(), 0, ggml_nbytes(g.v_cells[b]));
    }
    ggml_backend_tensor_set(g.pos, positions.data(), 0, ggml_nbytes(g.pos));
    step_runner_.compute();
    for (size_t b = 0; b < n; ++b) {
        const size_t vocab = size_t(w_.codec_vocab()), hidden = size_t(w_.hidden());
        slots[b].logits->resize(vocab);
        slots[b].h->resize(hidden);
        ggml_backend_tensor_get(g.logits, slots[b].logits->data(), b * g.logits->nb[1], vocab * sizeof(float));
        ggml_backend_tensor_get(g.h, slots[b].h->data(), b * g.h->nb[1], hidden * sizeof(float));
    }
}

}  // namespace kazeia
