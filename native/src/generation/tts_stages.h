// What the generation loop and the parity probes share: the bound stages (tts_weights::stages) and
// one runner's compute (tts_runner::impl), apart from the loop itself.
#pragma once

#include <memory>

#include "graphs/code_predictor.h"
#include "graphs/talker.h"
#include "kazeia/tts.h"

namespace kazeia {

// Both stages' weights as their placements want them (the layouts declared before the stages that
// bind them). Only read once built.
struct tts_weights::stages {
    // the codec vocabulary's last ids are control tokens: never chosen as a code (EOS aside)
    static constexpr int k_control_tokens = 1024;

    const model & m;
    int hidden, n_groups, codec_vocab, cp_vocab, eos_id;
    weight_copies talker_layout, cp_layout;
    talker_weights talker;
    code_predictor_weights cp;

    stages(const model & m, const stage_placement & talker_p, const stage_placement & cp_p);
};

// One thread of compute over the stages.
struct tts_runner::impl {
    const tts_weights::stages & w;
    talker_runner talker;
    code_predictor_runner cp;

    impl(const tts_weights::stages & weights, std::shared_ptr<thread_pool> pool)
        : w(weights), talker(weights.talker, pool), cp(weights.cp, pool) {}
};

}  // namespace kazeia
