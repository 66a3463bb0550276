// Row-wise conversion of f32 data into a ggml storage type (f16, bf16, q8_0, q4_K, ...),
// so the converter writes exactly the bytes ggml's kernels expect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kazeia {

// Throws std::invalid_argument for an unknown type or a row length the type cannot hold.
std::vector<uint8_t> quantize_rows(const float * data, int64_t n_rows, int64_t n_per_row, const std::string & type);
// Elements per block of a type (1 for f32/f16/bf16, 32 for q8_0, 256 for q4_K).
int64_t type_block_size(const std::string & type);

}  // namespace kazeia
