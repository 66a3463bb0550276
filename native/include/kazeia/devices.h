// ggml's device registry as plain data, for `kazeia devices` and placement checks.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kazeia {

struct buffer_type_info {
    std::string name;
    bool is_host = false;   // the CPU can read it directly
};

struct device_info {
    std::string name;
    std::string description;
    std::string type;          // cpu | gpu | igpu | accel
    std::string backend;       // registry that provides it (CPU, CUDA, ...)
    size_t memory_free = 0;
    size_t memory_total = 0;
    bool async = false;
    bool host_buffer = false;            // has a host-visible (pinned) buffer type
    std::string host_buffer_type;        // its name ("" when none): where accel-weights puts weights
    std::vector<buffer_type_info> buffer_types;   // its own, its host one, its extra ones (repacked layouts)
    bool buffer_from_host_ptr = false;   // can wrap host memory without copying
    bool events = false;
};

std::vector<device_info> devices_list();

}  // namespace kazeia
