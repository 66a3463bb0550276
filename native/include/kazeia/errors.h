#pragma once

#include <stdexcept>
#include <string>

namespace kazeia {

// Anything wrong with a model file or its metadata: missing key, unknown tensor, bad shape,
// truncated data. Surfaces in Python as kazeia.engine.ModelLoadError.
class model_error : public std::runtime_error {
public:
    explicit model_error(const std::string & what) : std::runtime_error(what) {}
};

// A device or placement that this build or machine cannot provide.
class device_error : public std::runtime_error {
public:
    explicit device_error(const std::string & what) : std::runtime_error(what) {}
};

}  // namespace kazeia
