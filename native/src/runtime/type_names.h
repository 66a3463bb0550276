// ggml types by the names users and files give them ("q8_0", "Q6_K", "bf16").
#pragma once

#include <string>

#include "ggml.h"

namespace kazeia {

// Case-insensitive; throws std::invalid_argument naming an unknown type.
ggml_type type_from_name(const std::string & name);

}  // namespace kazeia
