// Speech decoder (Qwen3TTSTokenizerV2Decoder): 16 codes per frame -> 1920 samples at 24 kHz.
//
// Three parts, as the talker's: the weights (speech_decoder, bound once and shared), the compute
// (speech_decoder_runner: a graph runner and its buffer) and a session per utterance
// (speech_decoder_session: its history). One implementation serves offline and streaming decoding:
// a session carries every piece of history the network looks back at (causal-conv inputs, the transposed convs' previous input,
// the attention window's keys and values), so feeding frames in any pattern gives the same audio
// as decoding them at once. The reference decodes in 300-frame chunks that restart with 25 frames
// of left context; with `reference_chunking` the session restarts the same way.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kazeia {

class model;
class thread_pool;
struct launch_report;

struct speech_decoder_options {
    bool reference_chunking = true;   // restart every chunk_frames with left_context frames, as the reference
    int chunk_frames = 300;
    int left_context = 25;
    int max_graph_frames = 8;         // frames per graph launch (bounds the compute buffer)
    bool profile = false;             // time every node (slow: one launch per node); see profile()
    bool scheduled = false;           // compute through ggml_backend_sched (placement accel-sched), on the
                                      // decoder's device when it has one, else over the CPU alone
};

// The decoder's weights, bound and rearranged for its graphs once per model; only read after, by any
// number of runners and sessions.
class speech_decoder {
public:
    // weights_buffer: a host-visible buffer type to keep the weights in (placement accel-weights);
    // device: an accelerator whose memory holds them, for streams scheduled onto it (accel-sched)
    explicit speech_decoder(const model & m, const std::string & weights_buffer = "", const std::string & device = "");
    ~speech_decoder();
    speech_decoder(const speech_decoder &) = delete;
    speech_decoder & operator=(const speech_decoder &) = delete;

    struct weights;
    const weights & prepared() const;
    const model & source() const;
    // how many bf16 matrices were re-laid as f16 at load (a CPU without the bf16 kernels)
    int bf16_relaid() const;

private:
    std::unique_ptr<weights> w_;
};

// Compute for decoder sessions: a graph runner and its compute buffer (tens of MB at full size).
// Sessions that share one take turns, whatever thread pushes.
class speech_decoder_runner {
public:
    // scheduled: through ggml_backend_sched (placement accel-sched), as speech_decoder_options says
    speech_decoder_runner(std::shared_ptr<const speech_decoder> decoder, std::shared_ptr<thread_pool> pool,
                          bool scheduled = false);
    ~speech_decoder_runner();
    speech_decoder_runner(const speech_decoder_runner &) = delete;
    speech_decoder_runner & operator=(const speech_decoder_runner &) = delete;

    bool scheduled() const;
    struct impl;
    impl & compute() const { return *p_; }

private:
    std::unique_ptr<impl> p_;
};

class speech_decoder_session {
public:
    // with a runner of its own
    speech_decoder_session(std::shared_ptr<const speech_decoder> decoder, std::shared_ptr<thread_pool> pool,
                           const speech_decoder_options & options);
    // on a runner shared with other sessions (its `scheduled` must be the options')
    speech_decoder_session(std::shared_ptr<speech_decoder_runner> runner, const speech_decoder_options & options);
    ~speech_decoder_session();
    speech_decoder_session(const speech_decoder_session &) = delete;
    speech_decoder_session & operator=(const speech_decoder_session &) = delete;

    // codes: n_frames rows of n_quantizers int32 (row-major); throws std::invalid_argument for
    // out-of-range codes. Returns the n_frames * samples_per_frame samples these frames determine.
    std::vector<float> push(const int32_t * codes, int64_t n_frames);
    // Forget all history: the next frame is decoded as the first of an utterance.
    void reset();
    int64_t frames_decoded() const;
    int samples_per_frame() const;
    int n_quantizers() const;

    struct stage_output {
        std::vector<float> values;   // [time][channels]: channels vary fastest
        int64_t channels = 0;
    };
    // For parity tests: decode from a fresh state in one graph and return every stage's output
    // by the reference's stage names. Leaves the session reset.
    std::map<std::string, stage_output> decode_stages(const int32_t * codes, int64_t n_frames);

    // Where its runner's last launch ran (splits, ops per device, copies, CPU fallbacks).
    const struct launch_report & placement_report() const;

    // With options.profile: seconds spent per "<stage it follows>/<op>" since construction.
    std::map<std::string, double> profile() const;
    // With options.profile: matrix-product flops per "<stage it follows>/<op>", on the same keys.
    std::map<std::string, double> profile_flops() const;

private:
    struct impl;
    std::unique_ptr<impl> p_;
};

}  // namespace kazeia
