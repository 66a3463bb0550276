// The Base models' audio encoder (Mimi, 12.5 Hz): reference audio -> codes [frames][16] for
// in-context voice cloning.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace kazeia {

class model;
class thread_pool;

class audio_encoder {
public:
    audio_encoder(const model & m, std::shared_ptr<thread_pool> pool);
    ~audio_encoder();
    audio_encoder(const audio_encoder &) = delete;
    audio_encoder & operator=(const audio_encoder &) = delete;

    // audio: mono float samples at 24 kHz; returns codes [n_frames][n_quantizers] (frame-major)
    std::vector<int32_t> encode(const float * audio, int64_t n_samples, int64_t & n_frames);
    int n_quantizers() const;

private:
    struct impl;
    std::unique_ptr<impl> p_;
};

}  // namespace kazeia
