// Text to codes, in the order of the reference's generation loop: prompt rows -> talker prefill ->
// per frame: choose code 0, code predictor (15 sub-steps, fresh cache) -> frame embedding +
// trailing text -> talker step.
//
// The engine binds both stages' weights once per placement (graphs/talker, graphs/code_predictor);
// each utterance's state (talker KV cache, random stream, tokens so far) is a tts_session. One step
// advances any number of sessions: one talker launch and one code-predictor launch for all of them,
// every product reading the weights once, and every sequence computed exactly as it would be alone.
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "graphs/code_predictor.h"
#include "graphs/talker.h"
#include "kazeia/tts.h"
#include "runtime/sampler.h"

namespace kazeia {

struct tts_session::state {
    generation_request req;
    kv_cache_pool::handle cache;       // the talker's keys and values of this utterance
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
    int hidden, n_groups, codec_vocab, cp_vocab, eos_id;
    // each stage's weights as its placement wants them (declared before the stages that bind them)
    weight_copies talker_layout, cp_layout;
    talker_stage talker;
    code_predictor_stage cp;

    impl(const model & model_, std::shared_ptr<thread_pool> pool, const stage_placement & talker_p,
         const stage_placement & cp_p)
        : m(model_), hp(model_.hparams()), hidden(hp.talker.tfm.hidden), n_groups(hp.talker.n_code_groups),
          codec_vocab(hp.talker.codec_vocab), cp_vocab(hp.code_predictor.vocab), eos_id(hp.talker.codec_eos),
          talker_layout(&model_, with_lanes(layout_for(talker_p))), cp_layout(&model_, with_lanes(layout_for(cp_p))),
          talker(model_, talker_layout, talker_p, pool),
          // the codebook tables are read by both stages: the talker's when placed alike, else a copy
          cp(model_, cp_layout, cp_p, pool,
             talker_p == cp_p ? talker.codec_table() : cp_layout.table(model_.require("talker.codec_embd.weight", "code predictor")),
             talker_p == cp_p ? talker.frame_tables() : own_tables(model_, cp_layout, hp.talker.n_code_groups)) {}

    // every matrix of the talker and code predictor goes through `product`, which reads the lanes
    // layout: on the CPU their q8_0 matrices are rearranged into it
    static weight_layout with_lanes(weight_layout l) {
        if (l.repack) l.lanes = cpu_lanes_layout().lanes;
        return l;
    }

    static std::vector<ggml_tensor *> own_tables(const model & m, weight_copies & layout, int n_groups) {
        std::vector<ggml_tensor *> t;
        for (int j = 0; j + 1 < n_groups; ++j) {
            t.push_back(layout.table(m.require("cp.codec_embd." + std::to_string(j) + ".weight", "code predictor")));
        }
        return t;
    }

    // ---- sessions ------------------------------------------------------------------------------
    std::unique_ptr<tts_session> open(const generation_request & req) {
        talker.check_rows(req.prompt);
        if (req.max_frames < 1) throw std::invalid_argument("max_frames must be at least 1");
        auto s = std::make_unique<tts_session::state>(req);
        const int64_t L = req.prompt.n_rows;
        s->cache = talker.new_cache(L + req.max_frames + 1);
        s->frame.assign(size_t(n_groups), 0);
        const auto t0 = std::chrono::steady_clock::now();
        talker.forward(req.prompt, 0, *s->cache, s->logits, s->h_last, nullptr);
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
        std::vector<talker_stage::slot> steps;
        std::vector<tts_session::state *> stepped;
        for (tts_session::state * s : live) {
            if (!s->step_pending) continue;
            const int64_t t = s->result.n_frames - 1;
            const int64_t pos = s->req.prompt.n_rows + t;
            if (s->req.talker_persistent) {
                steps.push_back({s->cache.get(), pos, talker.step_rows(s->req, t, s->frame.data()), &s->logits, &s->h_last});
                stepped.push_back(s);
            } else {   // the step graph rebuilt every frame (a parity check of the persistent one)
                const auto ts = std::chrono::steady_clock::now();
                talker.forward(talker.step_rows(s->req, t, s->frame.data()), pos, *s->cache, s->logits, s->h_last, nullptr);
                s->talker_ms = ms_since(ts);
            }
            s->step_pending = false;
        }
        if (!steps.empty()) {
            const auto ts = std::chrono::steady_clock::now();
            talker.steps(steps);
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
        std::vector<code_predictor_stage::frame> frames;
        for (size_t i = 0; i < making.size(); ++i) {
            tts_session::state * s = making[i];
            if (s->req.cp_single_launch && s->req.code_predictor.top_p >= 1.0f) {
                frames.push_back({s->h_last.data(), s->frame[0], &s->req.code_predictor, cp_noise[i].data(), s->frame.data() + 1});
                continue;
            }
            for (int j = 0; j + 1 < n_groups; ++j) {
                std::vector<float> cl = cp.step_logits(j, s->h_last.data(), s->frame[size_t(j)]);
                s->frame[size_t(j) + 1] = sample_token(cl, s->req.code_predictor,
                                                       cp_noise[i].empty() ? nullptr : cp_noise[i].data() + size_t(j) * cp_vocab);
            }
        }
        if (!frames.empty()) cp.frames(frames);
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
    p_->talker.check_rows(rows);
    auto cache = p_->talker.new_cache(rows.n_rows);
    std::vector<float> logits, hidden, embeds;
    p_->talker.forward(rows, 0, *cache, logits, hidden, &embeds);
    return embeds;
}

void tts_engine::prefill(const prompt_rows & rows, std::vector<float> & logits, std::vector<float> & hidden) {
    p_->talker.check_rows(rows);
    auto cache = p_->talker.new_cache(rows.n_rows);
    p_->talker.forward(rows, 0, *cache, logits, hidden, nullptr);
}

void tts_engine::teacher_forced(const generation_request & req, const int32_t * codes, int64_t n_frames,
                                std::vector<float> & logits, std::vector<float> & hidden) {
    p_->talker.check_rows(req.prompt);
    const int64_t L = req.prompt.n_rows;
    auto cache = p_->talker.new_cache(L + std::max(n_frames, req.max_frames) + 1);
    std::vector<float> l, h;
    logits.clear();
    hidden.clear();
    p_->talker.forward(req.prompt, 0, *cache, l, h, nullptr);
    for (int64_t t = 0;; ++t) {
        logits.insert(logits.end(), l.begin(), l.end());
        hidden.insert(hidden.end(), h.begin(), h.end());
        if (t == n_frames) break;
        const prompt_rows step = p_->talker.step_rows(req, t, codes + t * p_->n_groups);
        if (req.talker_persistent) {
            p_->talker.steps({{cache.get(), L + t, step, &l, &h}});
        } else {
            p_->talker.forward(step, L + t, *cache, l, h, nullptr);
        }
    }
}

std::vector<float> tts_engine::code_predictor_logits(const float * hidden, const int32_t * codes) {
    std::vector<float> out;
    for (int j = 0; j + 1 < p_->n_groups; ++j) {
        if (codes[j] < 0 || codes[j] >= (j == 0 ? p_->codec_vocab : p_->cp_vocab)) throw std::invalid_argument("code out of range");
        std::vector<float> l = p_->cp.step_logits(j, hidden, codes[j]);
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

void tts_engine::code_predictor_frames(const float * hidden, const int32_t * c0, int n, const sampling_config & cfg,
                                       const float * noise, int32_t * codes, float * logits) {
    const size_t steps = size_t(p_->n_groups - 1), vocab = size_t(p_->cp_vocab);
    std::vector<code_predictor_stage::frame> slots;
    for (int b = 0; b < n; ++b) {
        slots.push_back({hidden + size_t(b) * p_->hidden, c0[b], &cfg, noise ? noise + b * steps * vocab : nullptr,
                         codes + b * steps, logits + b * steps * vocab});
    }
    p_->cp.frames(slots);
}

std::vector<stage_launch_report> tts_engine::placement_report() const {
    std::vector<stage_launch_report> out;
    auto add = [&](const char * stage, const char * launch, const graph_runner & r) {
        if (r.allocated()) out.push_back({stage, launch, r.report()});
    };
    add("talker", "prefill", p_->talker.prefill_runner());
    add("talker", "step", p_->talker.step_runner());
    add("code_predictor", "frame", p_->cp.frame_runner());
    add("code_predictor", "substep", p_->cp.step_runner());
    return out;
}

int tts_engine::hidden_size() const { return p_->hidden; }
int tts_engine::n_code_groups() const { return p_->n_groups; }
int tts_engine::code_predictor_vocab() const { return p_->cp_vocab; }

}  // namespace kazeia
