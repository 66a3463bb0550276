// The Base models' speaker encoder: a log-mel spectrogram of reference audio -> x-vector.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace kazeia {

class model;
class thread_pool;

class speaker_encoder {
public:
    speaker_encoder(const model & m, std::shared_ptr<thread_pool> pool);
    ~speaker_encoder();
    speaker_encoder(const speaker_encoder &) = delete;
    speaker_encoder & operator=(const speaker_encoder &) = delete;

    // mel: [frames][mel_dim] log-mel values (see kazeia.engine.voice); returns the x-vector [enc_dim]
    std::vector<float> embed(const float * mel, int64_t frames);
    int mel_dim() const;

private:
    struct impl;
    std::unique_ptr<impl> p_;
};

}  // namespace kazeia
