// Matrices the CPU backend multiplies faster from its own interleaved layout (ggml's CPU_REPACK
// buffer type: on x86 with AVX2, q4_K matrices whose row count is a multiple of 8). Each eligible
// matrix is copied once into that layout and the file's pages are let go; every other tensor is
// used as it is. For compute on the CPU only: an accelerator cannot read the layout.
#pragma once

#include <vector>

#include "ggml-backend.h"
#include "ggml.h"

namespace kazeia {

class model;

class repacked_weights {
public:
    // `m` (may be null): the file whose pages a repacked matrix lets go
    repacked_weights(const model * m, bool enabled);
    ~repacked_weights();
    repacked_weights(const repacked_weights &) = delete;
    repacked_weights & operator=(const repacked_weights &) = delete;

    // The tensor a matrix product should read: the repacked copy when one is made, else `t`.
    ggml_tensor * operator()(ggml_tensor * t);
    size_t count() const { return buffers_.size(); }

    // Checks ggml's repacked kernel against the plain one: y = W x for a random q4_K W [rows, cols]
    // and x [cols, n] through both layouts. Returns false when this CPU has no repacked layout.
    static bool compare(int64_t rows, int64_t cols, int64_t n, uint64_t seed, std::vector<float> & plain,
                        std::vector<float> & repacked);

private:
    const model * m_;
    ggml_backend_buffer_type_t buft_ = nullptr;
    ggml_context * ctx_ = nullptr;
    std::vector<ggml_backend_buffer_t> buffers_;
};

}  // namespace kazeia
