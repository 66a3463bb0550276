#include "kazeia/quantize.h"

#include <stdexcept>

#include "ggml.h"
#include "runtime/type_names.h"

namespace kazeia {

ggml_type type_from_name(const std::string & name) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * n = ggml_type_name(ggml_type(t));
        if (!n || ggml_blck_size(ggml_type(t)) == 0) continue;
        std::string lower = n;
        for (auto & c : lower) c = char(std::tolower(c));
        std::string want = name;
        for (auto & c : want) c = char(std::tolower(c));
        if (lower == want) return ggml_type(t);
    }
    throw std::invalid_argument("unknown ggml type '" + name + "'");
}

int64_t type_block_size(const std::string & type) { return ggml_blck_size(type_from_name(type)); }

std::vector<uint8_t> quantize_rows(const float * data, int64_t n_rows, int64_t n_per_row, const std::string & type) {
    const ggml_type t = type_from_name(type);
    if (t == GGML_TYPE_F32 || ggml_get_type_traits(t)->from_float_ref == nullptr) {
        if (t != GGML_TYPE_F32) throw std::invalid_argument("ggml cannot convert f32 into " + type);
    }
    if (n_per_row % ggml_blck_size(t) != 0) {
        throw std::invalid_argument("rows of " + std::to_string(n_per_row) + " values cannot be stored as " + type +
                                    " (blocks of " + std::to_string(ggml_blck_size(t)) + ")");
    }
    if (ggml_quantize_requires_imatrix(t)) throw std::invalid_argument(type + " needs an importance matrix");
    std::vector<uint8_t> out(ggml_row_size(t, n_per_row) * size_t(n_rows));
    if (t == GGML_TYPE_F32) {
        std::copy(reinterpret_cast<const uint8_t *>(data), reinterpret_cast<const uint8_t *>(data + n_rows * n_per_row),
                  out.begin());
        return out;
    }
    ggml_quantize_init(t);
    ggml_quantize_chunk(t, data, out.data(), 0, n_rows, n_per_row, nullptr);
    return out;
}

}  // namespace kazeia
