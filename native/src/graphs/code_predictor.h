// The code predictor: a frame's codes 1..15 from the talker's hidden state and code 0, in 15
// sequential sub-steps over a fresh 5-layer cache. Its weights are bound once and only read
// (code_predictor_weights); a runner holds one thread of compute's graphs and the per-launch caches.
// One launch runs all sub-steps of any number of frames (sampling inside the graph); a sub-step can
// also run alone (host sampling, parity checks). Every product runs column by column (the
// one-column arithmetic), so a frame's numbers are the same alone, in a batch and step by step.
#pragma once

#include <memory>
#include <vector>

#include "graphs/kv_cache.h"
#include "graphs/qwen3_stack.h"
#include "graphs/stage.h"
#include "kazeia/sampling.h"

namespace kazeia {

class code_predictor_weights {
public:
    // codec_table, frame_tables: codebook 0's and 1..15's embedding tables as this stage reads them
    // (the talker's own when both stages are placed alike)
    code_predictor_weights(const model & m, weight_copies & layout, const stage_placement & p,
                           ggml_tensor * codec_table, std::vector<ggml_tensor *> frame_tables);

    // the stage's input rows for sub-step j (x: [h, C(c0)] for j = 0, E_{j-1}(code) after), projected
    // to its width
    ggml_tensor * project(ggml_context * ctx, ggml_tensor * x) const;

    const qwen3_stack & stack() const { return stack_; }
    ggml_tensor * codec_table() const { return codec_embd_; }
    ggml_tensor * table(int j) const { return embd_[size_t(j)]; }   // codebook j + 1
    ggml_tensor * head(int j) const { return head_[size_t(j)]; }    // logits of codebook j + 1
    const stage_placement & placement() const { return placement_; }
    ggml_backend_buffer_type_t cache_buffer_type() const { return cache_buft_; }
    bool cpu() const { return cpu_; }
    int hidden() const { return hidden_; }
    int n_groups() const { return n_groups_; }
    int vocab() const { return vocab_; }

private:
    stage_placement placement_;
    int hidden_, n_groups_, vocab_;
    bool cpu_;
    ggml_backend_buffer_type_t cache_buft_;
    ggml_tensor * codec_embd_;
    std::vector<ggml_tensor *> embd_;   // codebooks 1..15
    std::vector<ggml_tensor *> head_;
    ggml_tensor *proj_w_ = nullptr, *proj_b_ = nullptr;   // talker width -> code-predictor width (1.7B)
    qwen3_stack stack_;
};

class code_predictor_runner {
public:
    code_predictor_runner(const code_predictor_weights & w, std::shared_ptr<thread_pool> pool);

    struct frame {
        const float * h;              // the talker's hidden state for this frame
        int32_t c0;
        const sampling_config * cfg;
        const float * noise;          // [15][vocab] when sampling
        int32_t * codes;              // out: codes 1..15
        float * logits = nullptr;     // out when given: [15][vocab], each sub-step's logits (tests)
    };
    // every frame's 15 sub-steps in one launch (sampling settings, noise and cache per frame)
    void frames(const std::vector<frame> & batch);
    // sub-step j alone: [h, C(c0)] at positions 0, 1 (j = 0), E_{j-1}(code) at position j + 1 after;
    // head j's logits [vocab] of codebook j + 1
    std::vector<float> step_logits(int j, const float * h_talker, int32_t code);

    const graph_runner & frame_runner() const { return frame_runner_; }
    const graph_runner & step_runner() const { return step_runner_; }

private:
    kv_cache & cache(size_t slot);
    ggml_tensor * choose_in_graph(ggml_context * ctx, ggml_tensor * logits, const sampling_config & cfg,
                                  ggml_tensor * noise);
    void build_frame_graph(const std::vector<frame> & batch);

    struct frame_graph {
        bool built = false;
        std::vector<sampling_config> cfgs;
        ggml_tensor *h_in = nullptr, *id0 = nullptr;
        std::vector<ggml_tensor *> noise;                    // per frame, when it samples
        std::vector<std::pair<ggml_tensor *, std::vector<int32_t>>> positions;
        std::vector<std::pair<ggml_tensor *, std::vector<float>>> masks;
        std::vector<std::vector<ggml_tensor *>> chosen;      // per frame, per sub-step
        std::vector<ggml_tensor *> logits;                   // per sub-step [vocab, frames]
    };

    const code_predictor_weights & w_;
    std::vector<std::unique_ptr<kv_cache>> caches_;   // one per frame of a launch, restarted every frame
    graph_runner step_runner_;    // sub-steps one at a time
    graph_runner frame_runner_;   // the persistent one-launch frame graph
    frame_graph frame_graph_;
};

}  // namespace kazeia
