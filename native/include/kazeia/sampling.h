#pragma once

namespace kazeia {

// One stage's token choice (talker or code predictor), as HF generate's warpers.
struct sampling_config {
    bool do_sample = true;
    float temperature = 0.9f;
    int top_k = 50;          // 0: off
    float top_p = 1.0f;      // 1: off
};

}  // namespace kazeia
