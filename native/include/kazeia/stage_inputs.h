// What the talker and code-predictor stages are given: a prompt's rows and where a stage runs. The
// graphs read these and nothing else of the generation API (kazeia/tts.h), which is built on them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kazeia {

// One prompt row = T(text id) + C(codec id) + sum_j E_j(frame code j) + vector; absent parts are -1
// (or empty arrays).
struct prompt_rows {
    int64_t n_rows = 0;
    std::vector<int32_t> text_ids;      // [n_rows]
    std::vector<int32_t> codec_ids;     // [n_rows]
    std::vector<int32_t> frame_codes;   // [n_rows][n_code_groups - 1] codes of codebooks 1..15, or empty
    std::vector<float> vectors;         // [n_rows][hidden] added as they are (x-vectors), or empty
};

// A stage's placement: `scheduled` computes it through ggml_backend_sched (accel-sched) on `device`
// (an accelerator: weights, caches and every op it can run there; "" = the scheduler over the CPU
// alone); `weights_buffer` names a host-visible buffer type its weights are copied into, computed on
// by the CPU (accel-weights); neither: the CPU on the file's weights (q4_K matrices repacked).
struct stage_placement {
    bool scheduled = false;
    std::string weights_buffer;
    std::string device;
    bool operator==(const stage_placement & o) const {
        return scheduled == o.scheduled && weights_buffer == o.weights_buffer && device == o.device;
    }
};

}  // namespace kazeia
