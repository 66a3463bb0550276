#pragma once

#include <cstdint>
#include <vector>

namespace kazeia {

// One stage's token choice (talker or code predictor), as HF generate's warpers.
struct sampling_config {
    bool do_sample = true;
    float temperature = 0.9f;
    int top_k = 50;          // 0: off
    float top_p = 1.0f;      // 1: off
};

// n tokens drawn from `logits` with one seeded generator, as generation draws them (tests of the
// sampler itself).
std::vector<int32_t> sample_tokens(const std::vector<float> & logits, const sampling_config & cfg, uint64_t seed, int n);

}  // namespace kazeia
