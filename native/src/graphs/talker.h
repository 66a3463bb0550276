// The talker (a Qwen3 LM over codec tokens): prompt rows -> embeddings -> its layers -> the logits of
// each frame's first code. Its weights are bound once and only read (talker_weights: shared by every
// runner and session); a runner holds what one thread of compute needs (graph runners, the
// persistent step graph). A prefill runs one sequence's prompt; a step advances any number of
// sequences by one row each, every one in its own KV cache (the session's), in one launch.
#pragma once

#include <memory>
#include <vector>

#include "graphs/kv_cache.h"
#include "graphs/qwen3_stack.h"
#include "graphs/stage.h"

namespace kazeia {

// Host data for one embedding graph: the tensors its rows' ids and floats go into.
struct row_inputs {
    std::vector<std::pair<ggml_tensor *, std::vector<int32_t>>> ids;
    std::vector<std::pair<ggml_tensor *, std::vector<float>>> floats;
    void upload() const;
};

// One embedding table looked up for every row (rows without an id add nothing).
struct embed_part {
    ggml_tensor * table;
    bool text;                    // text rows go through text_projection
    std::vector<int32_t> ids;     // -1 -> 0, masked out
    std::vector<float> mask;
};

class talker_weights {
public:
    talker_weights(const model & m, weight_copies & layout, const stage_placement & p);

    void check_rows(const prompt_rows & r) const;
    // a zeroed cache of at least n_ctx positions (one a finished sequence gave back, when kept)
    kv_cache_pool::handle new_cache(int64_t n_ctx) const { return caches_->take(n_ctx); }
    // the talker input that follows frame t: its embedding plus trailing text id t (or tts_pad)
    prompt_rows step_rows(const std::vector<int32_t> & trailing_text_ids, int64_t t, const int32_t * frame) const;

    // the parts the rows use, in graph order; parts no row uses are left out
    std::vector<embed_part> embed_parts(const prompt_rows & r) const;
    // sum of the parts (and of the rows' extra vectors); their inputs are recorded in `in`
    // (`batch`: the rows are separate sequences, each computed exactly as it would be alone)
    ggml_tensor * build_embed(ggml_context * ctx, const prompt_rows & r, row_inputs & in, bool batch = false) const;

    const qwen3_stack & stack() const { return stack_; }
    ggml_tensor * codec_head() const { return codec_head_; }
    ggml_tensor * codec_table() const { return codec_embd_; }                 // codebook 0, as placed here
    const std::vector<ggml_tensor *> & frame_tables() const { return frame_embd_; }   // codebooks 1..15
    const stage_placement & placement() const { return placement_; }
    bool cpu() const { return cpu_; }
    int hidden() const { return hidden_; }
    int codec_vocab() const { return codec_vocab_; }

private:
    const model_hparams & hp_;
    stage_placement placement_;
    int hidden_, n_groups_, codec_vocab_, cp_vocab_;
    bool cpu_;                                   // computes on the CPU backend: Kazeia's kernels apply
    std::shared_ptr<kv_cache_pool> caches_;      // finished sequences' caches, reused (thread-safe)
    ggml_tensor *text_embd_, *fc1_w_, *fc1_b_, *fc2_w_, *fc2_b_, *codec_embd_, *codec_head_;
    std::vector<ggml_tensor *> frame_embd_;
    qwen3_stack stack_;
    int pad_text_id_;
};

class talker_runner {
public:
    talker_runner(const talker_weights & w, std::shared_ptr<thread_pool> pool);

    // One sequence's step: its one input row at position `pos` of its cache; out: logits and hidden.
    struct slot {
        kv_cache * cache;
        int64_t pos;
        prompt_rows row;
        std::vector<float> * logits;
        std::vector<float> * h;
    };

    // rows at positions [pos0, pos0 + n) of `cache` -> the last row's logits and final hidden state
    // (and every row's embedding when `embeds` is given)
    void forward(const prompt_rows & r, int64_t pos0, kv_cache & cache, std::vector<float> & logits,
                 std::vector<float> & h_last, std::vector<float> * embeds);
    // one launch for every slot (each sequence exactly as alone)
    void steps(const std::vector<slot> & slots);

    const graph_runner & prefill_runner() const { return prefill_runner_; }
    const graph_runner & step_runner() const { return step_runner_; }

private:
    struct step_graph {
        bool built = false;
        std::vector<std::pair<uint64_t, int64_t>> key;   // per sequence: cache allocation, keys attended
        std::vector<ggml_tensor *> tables;                // embedding parts, in order
        row_inputs in;
        ggml_tensor *pos = nullptr, *h = nullptr, *logits = nullptr;
        std::vector<ggml_tensor *> mask, k_rows, v_cells;
    };
    void build_step_graph(const std::vector<slot> & slots, const prompt_rows & rows,
                          const std::vector<std::pair<uint64_t, int64_t>> & key);

    const talker_weights & w_;
    graph_runner prefill_runner_;   // prompts: graphs built per call
    graph_runner step_runner_;      // the step for a batch of sequences (persistent)
    step_graph step_graph_;
};

}  // namespace kazeia
