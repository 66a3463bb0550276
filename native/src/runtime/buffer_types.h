// The buffer types ggml offers for a device: the one place both the device list and the weights'
// placement ask.
#pragma once

#include <vector>

#include "ggml-backend.h"

namespace kazeia {

// A device's buffer types: its own, its host buffer type, its extra ones (repacked layouts).
std::vector<ggml_backend_buffer_type_t> device_buffer_types(ggml_backend_dev_t dev);

}  // namespace kazeia
