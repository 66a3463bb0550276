// Where one graph launch ran: how the scheduler split it, how many ops each device computed, how
// many bytes crossed between devices, and which ops of a stage scheduled onto an accelerator stayed
// on the CPU and why.
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace kazeia {

struct launch_report {
    bool scheduled = false;                 // ran through ggml_backend_sched
    std::string device;                     // the accelerator it was scheduled onto ("" = CPU only)
    int splits = 1;                         // runs of consecutive ops on one device
    int nodes = 0;                          // compute ops (views and reshapes not counted)
    std::map<std::string, int> ops;         // device name -> compute ops it ran
    size_t bytes_copied = 0;                // split inputs copied between devices per launch
    std::map<std::string, int> fallbacks;   // "OP: why" -> count, ops left on the CPU by a scheduled stage
    double matmul_flops = 0;                // multiply-adds x 2 of its matrix products (MUL_MAT)
};

}  // namespace kazeia
