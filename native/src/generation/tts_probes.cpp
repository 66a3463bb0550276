// A runner's parity probes: embeddings, prefill, teacher-forced logits and code-predictor frames,
// for tests and divergence measurements against the reference (not on the generation path).
#include <algorithm>
#include <stdexcept>

#include "generation/tts_stages.h"

namespace kazeia {

std::vector<float> tts_runner::embed(const prompt_rows & rows) {
    p_->w.talker.check_rows(rows);
    auto cache = p_->w.talker.new_cache(rows.n_rows);
    std::vector<float> logits, hidden, embeds;
    p_->talker.forward(rows, 0, *cache, logits, hidden, &embeds);
    return embeds;
}

void tts_runner::prefill(const prompt_rows & rows, std::vector<float> & logits, std::vector<float> & hidden) {
    p_->w.talker.check_rows(rows);
    auto cache = p_->w.talker.new_cache(rows.n_rows);
    p_->talker.forward(rows, 0, *cache, logits, hidden, nullptr);
}

void tts_runner::teacher_forced(const generation_request & req, const int32_t * codes, int64_t n_frames,
                                std::vector<float> & logits, std::vector<float> & hidden) {
    const tts_weights::stages & w = p_->w;
    w.talker.check_rows(req.prompt);
    const int64_t L = req.prompt.n_rows;
    auto cache = w.talker.new_cache(L + std::max(n_frames, req.max_frames) + 1);
    std::vector<float> l, h;
    logits.clear();
    hidden.clear();
    p_->talker.forward(req.prompt, 0, *cache, l, h, nullptr);
    for (int64_t t = 0;; ++t) {
        logits.insert(logits.end(), l.begin(), l.end());
        hidden.insert(hidden.end(), h.begin(), h.end());
        if (t == n_frames) break;
        const prompt_rows step = w.talker.step_rows(req.trailing_text_ids, t, codes + t * w.n_groups);
        if (req.talker_persistent) {
            p_->talker.steps({{cache.get(), L + t, step, &l, &h}});
        } else {
            p_->talker.forward(step, L + t, *cache, l, h, nullptr);
        }
    }
}

std::vector<float> tts_runner::code_predictor_logits(const float * hidden, const int32_t * codes) {
    const tts_weights::stages & w = p_->w;
    std::vector<float> out;
    for (int j = 0; j + 1 < w.n_groups; ++j) {
        if (codes[j] < 0 || codes[j] >= (j == 0 ? w.codec_vocab : w.cp_vocab)) throw std::invalid_argument("code out of range");
        std::vector<float> l = p_->cp.step_logits(j, hidden, codes[j]);
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

void tts_runner::code_predictor_frames(const float * hidden, const int32_t * c0, int n, const sampling_config & cfg,
                                       const float * noise, int32_t * codes, float * logits) {
    const tts_weights::stages & w = p_->w;
    const size_t steps = size_t(w.n_groups - 1), vocab = size_t(w.cp_vocab);
    std::vector<code_predictor_runner::frame> slots;
    for (int b = 0; b < n; ++b) {
        slots.push_back({hidden + size_t(b) * w.hidden, c0[b], &cfg, noise ? noise + b * steps * vocab : nullptr,
                         codes + b * steps, logits + b * steps * vocab});
    }
    p_->cp.frames(slots);
}

}  // namespace kazeia
