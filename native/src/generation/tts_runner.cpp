// Text to codes, in the order of the reference's generation loop: prompt rows -> talker prefill ->
// per frame: choose code 0, code predictor (15 sub-steps, fresh cache) -> frame embedding +
// trailing text -> talker step.
//
// A runner computes over weights bound once (tts_weights); each utterance's state (talker KV cache,
// random stream, tokens so far) is a tts_session. One step advances any number of sessions: one
// talker launch and one code-predictor launch for all of them, every product reading the weights
// once, and every sequence computed exactly as it would be alone.
#include <chrono>
#include <stdexcept>

#include "generation/tts_stages.h"
#include "runtime/sampler.h"

namespace kazeia {

struct tts_session::state {
    const tts_weights * weights;       // the only weights its cache fits
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
    state(const tts_weights * w, const generation_request & r) : weights(w), req(r), random(r.seed) {}
    // the talker's next step reads trailing text id n_frames - 1, which has not been written yet
    bool waiting() const {
        return !done && req.text_open && step_pending && result.n_frames - 1 >= int64_t(req.trailing_text_ids.size());
    }
};

tts_session::tts_session(std::unique_ptr<state> s) : s_(std::move(s)) {}
tts_session::~tts_session() = default;
bool tts_session::done() const { return s_->done; }
const generation_result & tts_session::result() const { return s_->result; }
size_t tts_session::cache_bytes() const { return s_->cache ? s_->cache->bytes() : 0; }
bool tts_session::waiting() const { return s_->waiting(); }

void tts_session::append_text(const std::vector<int32_t> & ids) {
    if (!s_->req.text_open) throw std::logic_error("the session's text is closed");
    s_->req.trailing_text_ids.insert(s_->req.trailing_text_ids.end(), ids.begin(), ids.end());
}

void tts_session::close_text(int64_t max_frames) {
    if (!s_->req.text_open) throw std::logic_error("the session's text is closed");
    if (max_frames < 1 || max_frames > s_->req.max_frames)
        throw std::invalid_argument("close_text: max_frames must be between 1 and the request's limit");
    s_->req.text_open = false;
    s_->req.max_frames = max_frames;
    if (!s_->done && s_->result.n_frames >= max_frames) {
        s_->done = true;
        s_->result.reason = stop_reason::limit;
    }
}

// The generation loop over one runner's compute.
struct generation_loop {
    const tts_weights & weights;
    const tts_weights::stages & w;
    tts_runner::impl & run;

    // ---- sessions ------------------------------------------------------------------------------
    std::unique_ptr<tts_session> open(const generation_request & req) {
        w.talker.check_rows(req.prompt);
        if (req.max_frames < 1) throw std::invalid_argument("max_frames must be at least 1");
        auto s = std::make_unique<tts_session::state>(&weights, req);
        const int64_t L = req.prompt.n_rows;
        s->cache = w.talker.new_cache(L + req.max_frames + 1);
        s->frame.assign(size_t(w.n_groups), 0);
        const auto t0 = std::chrono::steady_clock::now();
        run.talker.forward(req.prompt, 0, *s->cache, s->logits, s->h_last, nullptr);
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
            if (s && s->s_->weights != &weights) throw std::invalid_argument("a session of other weights");
            if (s && !s->s_->done && !s->s_->waiting()) live.push_back(s->s_.get());
        }
        // 1. the talker reads each last frame (one launch for all that continue)
        std::vector<talker_runner::slot> steps;
        std::vector<tts_session::state *> stepped;
        for (tts_session::state * s : live) {
            if (!s->step_pending) continue;
            const int64_t t = s->result.n_frames - 1;
            const int64_t pos = s->req.prompt.n_rows + t;
            prompt_rows row = w.talker.step_rows(s->req.trailing_text_ids, t, s->frame.data());
            if (s->req.talker_persistent) {
                steps.push_back({s->cache.get(), pos, std::move(row), &s->logits, &s->h_last});
                stepped.push_back(s);
            } else {   // the step graph rebuilt every frame (a parity check of the persistent one)
                const auto ts = std::chrono::steady_clock::now();
                run.talker.forward(row, pos, *s->cache, s->logits, s->h_last, nullptr);
                s->talker_ms = ms_since(ts);
            }
            s->step_pending = false;
        }
        if (!steps.empty()) {
            const auto ts = std::chrono::steady_clock::now();
            run.talker.steps(steps);
            const double ms = ms_since(ts);
            for (tts_session::state * s : stepped) s->talker_ms = ms;
        }
        // 2. code 0 of each frame, on the host with the session's own random stream
        std::vector<tts_session::state *> making;
        std::vector<std::vector<float>> cp_noise;
        for (tts_session::state * s : live) {
            const generation_request & req = s->req;
            process_talker_logits(s->logits, s->generated, req.repetition_penalty,
                                  int64_t(s->generated.size()) < req.min_new_tokens, w.eos_id,
                                  w.codec_vocab - tts_weights::stages::k_control_tokens);
            const std::vector<float> talker_noise = req.talker.do_sample ? gumbel_noise(s->random, s->logits.size())
                                                                         : std::vector<float>();
            const int c0 = sample_token(s->logits, req.talker, talker_noise.data());
            s->generated.push_back(c0);
            if (c0 == w.eos_id) {
                finish(*s, stop_reason::eos);
                continue;
            }
            s->frame[0] = c0;
            making.push_back(s);
            cp_noise.push_back(req.code_predictor.do_sample ? gumbel_noise(s->random, size_t(w.n_groups - 1) * w.cp_vocab)
                                                            : std::vector<float>());
        }
        if (making.empty()) return;
        // 3. codes 1..15: one launch for every frame chosen in the graph; step by step on the host
        // for settings the graph does not do (top-p) or when asked to
        const auto tc = std::chrono::steady_clock::now();
        std::vector<code_predictor_runner::frame> frames;
        for (size_t i = 0; i < making.size(); ++i) {
            tts_session::state * s = making[i];
            if (s->req.cp_single_launch && s->req.code_predictor.top_p >= 1.0f) {
                frames.push_back({s->h_last.data(), s->frame[0], &s->req.code_predictor, cp_noise[i].data(), s->frame.data() + 1});
                continue;
            }
            for (int j = 0; j + 1 < w.n_groups; ++j) {
                std::vector<float> cl = run.cp.step_logits(j, s->h_last.data(), s->frame[size_t(j)]);
                s->frame[size_t(j) + 1] = sample_token(cl, s->req.code_predictor,
                                                       cp_noise[i].empty() ? nullptr : cp_noise[i].data() + size_t(j) * w.cp_vocab);
            }
        }
        if (!frames.empty()) run.cp.frames(frames);
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
        if (req.text_open) throw std::invalid_argument("generate needs the whole text: open a session to stream it");
        std::unique_ptr<tts_session> session = open(req);
        tts_session::state & s = *session->s_;
        while (!s.done) {
            const int64_t before = s.result.n_frames;
            step({session.get()});
            if (s.result.n_frames == before || !on_frame) continue;
            const int64_t t = before;
            if (!on_frame(t, s.result.codes.data() + t * w.n_groups, s.result.timings.back())) {
                // a refused frame is not kept
                s.result.codes.resize(size_t(t * w.n_groups));
                s.result.timings.pop_back();
                s.result.n_frames = t;
                finish(s, stop_reason::cancelled);
            }
        }
        return std::move(s.result);
    }
};

tts_runner::tts_runner(std::shared_ptr<const tts_weights> weights, std::shared_ptr<thread_pool> pool)
    : w_(std::move(weights)) {
    if (!w_ || !pool) throw std::invalid_argument("a runner needs weights and a thread pool");
    p_ = std::make_unique<impl>(w_->bound(), std::move(pool));
}
tts_runner::~tts_runner() = default;

generation_result tts_runner::generate(const generation_request & request, const frame_callback & on_frame) {
    return generation_loop{*w_, w_->bound(), *p_}.generate(request, on_frame);
}

std::unique_ptr<tts_session> tts_runner::open(const generation_request & request) {
    return generation_loop{*w_, w_->bound(), *p_}.open(request);
}

void tts_runner::step(const std::vector<tts_session *> & sessions) {
    generation_loop{*w_, w_->bound(), *p_}.step(sessions);
}

std::vector<stage_launch_report> tts_runner::placement_report() const {
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

}  // namespace kazeia
