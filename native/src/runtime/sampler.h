// Token choice as the reference's HF generate does it: logits processing (repetition penalty,
// EOS blocked for the first steps, suppressed ids) then greedy argmax, or temperature -> top-k
// -> top-p -> a categorical draw. The draw is Gumbel-max, argmax(logits / T + g) over the kept
// tokens with g = -log(-log(u)) from a seeded generator: exact categorical sampling whose noise
// can be drawn ahead, so a graph can sample inside itself and match this host path bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kazeia/sampling.h"

namespace kazeia {

// xoshiro256** seeded through splitmix64: identical streams on every platform.
class rng {
public:
    explicit rng(uint64_t seed);
    uint64_t next();
    double uniform();   // [0, 1)

private:
    uint64_t s_[4];
};

int argmax(const std::vector<float> & v);
// n Gumbel(0, 1) values.
std::vector<float> gumbel_noise(rng & r, size_t n);
// Picks a token from logits (modified in place); noise: one Gumbel value per logit (unused when greedy).
int sample_token(std::vector<float> & logits, const sampling_config & cfg, const float * noise);

// Talker logits processing before the choice (in place).
void process_talker_logits(std::vector<float> & logits, const std::vector<int32_t> & generated, float repetition_penalty,
                           bool block_eos, int eos_id, int suppress_from);

}  // namespace kazeia
