// The talker (a Qwen3 LM over codec tokens): prompt rows -> embeddings -> its layers -> the logits of
// each frame's first code. A prefill runs one sequence's prompt; a step advances any number of
// sequences by one row each, every one in its own KV cache, in one persistent graph.
#pragma once

#include <memory>
#include <vector>

#include "generation/kv_cache.h"
#include "graphs/qwen3_stack.h"
#include "graphs/stage.h"

namespace kazeia {

class talker_stage {
public:
    talker_stage(const model & m, weight_copies & layout, const stage_placement & p, std::shared_ptr<thread_pool> pool);

    // One sequence's step: its one input row at position `pos` of its cache; out: logits and hidden.
    struct slot {
        kv_cache * cache;
        int64_t pos;
        prompt_rows row;
        std::vector<float> * logits;
        std::vector<float> * h;
    };

    void check_rows(const prompt_rows & r) const;
    // a zeroed cache of at least n_ctx positions (one a finished sequence gave back, when kept)
    kv_cache_pool::handle new_cache(int64_t n_ctx) const;
    // rows at positions [pos0, pos0 + n) of `cache` -> the last row's logits and final hidden state
    // (and every row's embedding when `embeds` is given)
    void forward(const prompt_rows & r, int64_t pos0, kv_cache & cache, std::vector<float> & logits,
                 std::vector<float> & h_last, std::vector<float> * embeds);
    // one launch for every slot (each sequence exactly as alone)
    void steps(const std::vector<slot> & slots);
    // the talker input that follows frame t: its embedding plus trailing text row t (or tts_pad)
    prompt_rows step_rows(const generation_request & req, int64_t t, const int32_t * frame) const;

    ggml_tensor * codec_table() const { return codec_embd_; }                 // codebook 0, as placed here
    const std::vector<ggml_tensor *> & frame_tables() const { return frame_embd_; }   // codebooks 1..15
    const graph_runner & prefill_runner() const { return prefill_runner_; }
    const graph_runner & step_runner() const { return step_runner_; }

private:
    struct row_inputs {   // host data for one embedding graph
        std::vector<std::pair<ggml_tensor *, std::vector<int32_t>>> ids;
        std::vector<std::pair<ggml_tensor *, std::vector<float>>> floats;
    };
    // One embedding table looked up for every row (rows without an id add nothing).
    struct embed_part {
        ggml_tensor * table;
        bool text;                    // text rows go through text_projection
        std::vector<int32_t> ids;     // -1 -> 0, masked out
        std::vector<float> mask;
    };
    std::vector<embed_part> embed_parts(const prompt_rows & r) const;
    ggml_tensor * build_embed(ggml_context * ctx, const prompt_rows & r, row_inputs & in, bool batch = false);
    static void upload(const row_inputs & in);

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

    const model_hparams & hp_;
    int hidden_, n_groups_, codec_vocab_, cp_vocab_;
    bool cpu_;                                   // computes on the CPU backend: Kazeia's kernels apply
    ggml_backend_buffer_type_t cache_buft_;
    std::shared_ptr<kv_cache_pool> caches_;   // finished sequences' caches, reused
    ggml_tensor *text_embd_, *fc1_w_, *fc1_b_, *fc2_w_, *fc2_b_, *codec_embd_, *codec_head_;
    std::vector<ggml_tensor *> frame_embd_;
    qwen3_stack stack_;
    int pad_text_id_;
    graph_runner prefill_runner_;   // prompts: graphs built per call
    graph_runner step_runner_;      // the step for a batch of sequences (persistent)
    step_graph step_graph_;
};

}  // namespace kazeia
