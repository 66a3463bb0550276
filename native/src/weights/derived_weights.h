// Weights a network derives once at load (kernels rearranged for its graphs, Snake exponentials),
// kept in their own backend buffer beside the memory-mapped file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"

namespace kazeia {

class derived_weights {
public:
    explicit derived_weights(size_t max_tensors);
    ~derived_weights();
    derived_weights(const derived_weights &) = delete;
    derived_weights & operator=(const derived_weights &) = delete;

    // Declares a tensor (ggml order ne) whose bytes `fill` writes once the buffer exists.
    ggml_tensor * add(const std::string & name, ggml_type type, std::vector<int64_t> ne,
                      std::function<void(std::vector<uint8_t> &)> fill);
    // Allocates in `buft` (null: the CPU backend's buffer) and runs every fill; then `after_fill`
    // (e.g. releasing the source pages of a memory-mapped file).
    void allocate(const std::function<void()> & after_fill = {}, ggml_backend_buffer_type_t buft = nullptr);

private:
    ggml_context * ctx_ = nullptr;
    ggml_backend_buffer_t buffer_ = nullptr;
    std::vector<std::pair<ggml_tensor *, std::function<void(std::vector<uint8_t> &)>>> pending_;
};

// Host copy of a tensor's bytes.
std::vector<uint8_t> tensor_bytes(const ggml_tensor * t);

// Rearranges elements of a tensor with ggml shape `ne` (up to 3 dims): output index order is
// given by `order`, e.g. {1, 2, 0} makes old axis 1 the new fastest axis. Element size from type.
std::vector<uint8_t> permute_elements(const ggml_tensor * t, const int (&order)[3]);

}  // namespace kazeia
