// Binding the talker's and code predictor's weights once per placement.
#include "generation/tts_stages.h"

namespace kazeia {
namespace {

// every matrix of the talker and code predictor goes through `product`, which reads the lanes
// layout: on the CPU their q8_0, q6_K and q5_K matrices are rearranged into it
weight_layout with_lanes(weight_layout l) {
    if (l.repack) l.lanes = cpu_lanes_layout().lanes;
    return l;
}

std::vector<ggml_tensor *> own_tables(const model & m, weight_copies & layout, int n_groups) {
    std::vector<ggml_tensor *> t;
    for (int j = 0; j + 1 < n_groups; ++j) {
        t.push_back(layout.table(m.require("cp.codec_embd." + std::to_string(j) + ".weight", "code predictor")));
    }
    return t;
}

}  // namespace

tts_weights::stages::stages(const model & model_, const stage_placement & talker_p, const stage_placement & cp_p)
    : m(model_), hidden(m.hparams().talker.tfm.hidden), n_groups(m.hparams().talker.n_code_groups),
      codec_vocab(m.hparams().talker.codec_vocab), cp_vocab(m.hparams().code_predictor.vocab),
      eos_id(m.hparams().talker.codec_eos), talker_layout(&model_, with_lanes(layout_for(talker_p))),
      cp_layout(&model_, with_lanes(layout_for(cp_p))), talker(model_, talker_layout, talker_p),
      // the codebook tables are read by both stages: the talker's when placed alike, else a copy
      cp(model_, cp_layout, cp_p,
         talker_p == cp_p ? talker.codec_table() : cp_layout.table(model_.require("talker.codec_embd.weight", "code predictor")),
         talker_p == cp_p ? talker.frame_tables() : own_tables(model_, cp_layout, n_groups)) {}

tts_weights::tts_weights(const model & m, const stage_placement & talker, const stage_placement & code_predictor)
    : p_(std::make_unique<stages>(m, talker, code_predictor)) {}
tts_weights::~tts_weights() = default;

int tts_weights::hidden_size() const { return p_->hidden; }
int tts_weights::n_code_groups() const { return p_->n_groups; }
int tts_weights::code_predictor_vocab() const { return p_->cp_vocab; }

}  // namespace kazeia
