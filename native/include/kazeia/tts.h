// Text to codes: the talker (Qwen3 LM over codec tokens) and the code predictor (15 more codes
// per frame), driven frame by frame. Three parts, as whisper.cpp's context and state: weights bound
// once and shared (tts_weights), a runner per thread of compute (tts_runner), a session per
// utterance (tts_session). Prompt rows (kazeia/stage_inputs.h) come from Python
// (kazeia.engine.prompt); the native side computes their embeddings.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kazeia/launch_report.h"
#include "kazeia/sampling.h"
#include "kazeia/stage_inputs.h"

namespace kazeia {

class model;
class thread_pool;

struct generation_request {
    prompt_rows prompt;
    std::vector<int32_t> trailing_text_ids;   // text ids added to frames 0, 1, ...; then tts_pad
    sampling_config talker;
    sampling_config code_predictor;
    float repetition_penalty = 1.05f;
    int min_new_tokens = 2;                   // EOS is blocked for this many talker steps
    int64_t max_frames = 0;
    uint64_t seed = 0;
    bool cp_single_launch = true;             // false: 15 launches per frame (same codes for the same seed)
    bool talker_persistent = true;            // false: the talker step graph is rebuilt every frame
    bool text_open = false;                   // the trailing text is still being written: more comes
                                              // by tts_session::append_text until close_text
};

struct frame_timing {
    double talker_ms = 0;           // the talker step that produced this frame's first code
    double code_predictor_ms = 0;   // the 15 sub-steps of this frame
    double prefill_ms = 0;          // the prompt's prefill (known from frame 0 on: live views show it)
};

enum class stop_reason { eos, limit, cancelled };

struct generation_result {
    std::vector<int32_t> codes;     // [n_frames][n_code_groups]
    int64_t n_frames = 0;
    stop_reason reason = stop_reason::eos;
    double prefill_ms = 0;
    std::vector<frame_timing> timings;
};

// Called after every frame with its codes; return false to cancel (that frame is dropped).
using frame_callback = std::function<bool(int64_t frame, const int32_t * codes, const frame_timing & timing)>;

// Where one kind of launch of a stage ran.
struct stage_launch_report {
    std::string stage;    // talker | code_predictor
    std::string launch;   // prefill | step | frame | substep
    launch_report report;
};

class tts_runner;
class tts_weights;
struct generation_loop;

// One utterance being generated: its request, its talker KV cache, its random stream and where it
// stands. Made (and prefilled) by tts_runner::open; advanced by tts_runner::step, alone or beside
// others, by any runner over the same weights. A session's codes depend only on its own request:
// not on what shares its steps, nor on which runner steps it.
class tts_session {
public:
    ~tts_session();
    tts_session(const tts_session &) = delete;
    tts_session & operator=(const tts_session &) = delete;

    bool done() const;                          // stopped at EOS or its frame limit
    const generation_result & result() const;   // the frames so far (reason: valid once done)
    size_t cache_bytes() const;                 // its KV cache
    // Text still being written (generation_request::text_open). A session that has read every
    // trailing id it has and may get more waits: steps leave it as it is (no padding is fed), so its
    // codes are those of the whole text given at once, whenever each id arrives.
    void append_text(const std::vector<int32_t> & ids);
    // No more text; max_frames: the whole text's frame limit (at most the request's, which sized the
    // cache). A session already past it stops there.
    void close_text(int64_t max_frames);
    bool waiting() const;

private:
    friend class tts_runner;
    friend struct generation_loop;
    struct state;
    explicit tts_session(std::unique_ptr<state> s);
    std::unique_ptr<state> s_;
};

// The talker's and code predictor's weights of one model under one placement, bound (copied into
// the layouts the placement wants) once and only read after: shared by every runner and session.
class tts_weights {
public:
    tts_weights(const model & m, const stage_placement & talker = {}, const stage_placement & code_predictor = {});
    ~tts_weights();
    tts_weights(const tts_weights &) = delete;
    tts_weights & operator=(const tts_weights &) = delete;

    int hidden_size() const;
    int n_code_groups() const;
    int code_predictor_vocab() const;

    struct stages;                 // the bound stages (generation/tts_runner.cpp)
    const stages & bound() const { return *p_; }

private:
    std::unique_ptr<stages> p_;
};

// What one thread of compute needs to run the talker and code predictor over shared weights: graph
// runners, persistent step and frame graphs, the code predictor's per-launch caches. One caller at
// a time per runner; runners over the same weights may run at once on their own threads (each with
// its own pool: a pool runs one launch at a time, so runners that share one take turns).
class tts_runner {
public:
    tts_runner(std::shared_ptr<const tts_weights> weights, std::shared_ptr<thread_pool> pool);
    ~tts_runner();
    tts_runner(const tts_runner &) = delete;
    tts_runner & operator=(const tts_runner &) = delete;

    generation_result generate(const generation_request & request, const frame_callback & on_frame);

    // A session for `request`, its prompt prefilled.
    std::unique_ptr<tts_session> open(const generation_request & request);
    // Advances every session that is not done by one frame: one talker launch and one code-predictor
    // launch for all of them (the products read the weights once). A session stops at EOS or at its
    // frame limit; to cancel one, stop passing it. Sessions of other weights are refused.
    void step(const std::vector<tts_session *> & sessions);

    // Parity probes (generation/tts_probes.cpp).
    std::vector<float> embed(const prompt_rows & rows);   // [n_rows][hidden]
    // logits [codec_vocab] and final-norm hidden [hidden] of the prompt's last row
    void prefill(const prompt_rows & rows, std::vector<float> & logits, std::vector<float> & hidden);
    // Talker logits [n_frames + 1][codec_vocab] and final-norm hidden states [n_frames + 1][hidden]
    // when the given frames (teacher forcing) follow the prompt: for divergence measurements.
    void teacher_forced(const generation_request & request, const int32_t * codes, int64_t n_frames,
                        std::vector<float> & logits, std::vector<float> & hidden);
    // teacher-forced code-predictor logits [15][vocab] for a talker hidden state and a frame's codes
    std::vector<float> code_predictor_logits(const float * hidden, const int32_t * codes);
    // The code predictor's one-launch frames for n talker hidden states [n][hidden] and codes 0 [n],
    // as a batch of n: codes [n][15] and each sub-step's logits [n][15][vocab] (tests: a frame's
    // numbers must not depend on the batch). noise: [n][15][vocab] when cfg samples.
    void code_predictor_frames(const float * hidden, const int32_t * c0, int n, const sampling_config & cfg,
                               const float * noise, int32_t * codes, float * logits);

    // Where each launch kind that has run so far ran.
    std::vector<stage_launch_report> placement_report() const;

    const std::shared_ptr<const tts_weights> & weights() const { return w_; }

private:
    friend struct generation_loop;
    struct impl;
    std::shared_ptr<const tts_weights> w_;
    std::unique_ptr<impl> p_;
};

}  // namespace kazeia
