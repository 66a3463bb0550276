#pragma once

#include <pybind11/pybind11.h>

namespace kazeia {
struct launch_report;
}

namespace kazeia::bindings {

// A launch report as a dict: scheduled, device, splits, nodes, ops {device: n}, bytes_copied,
// fallbacks {"OP: why": n}.
pybind11::dict report_dict(const launch_report & r);

void register_model(pybind11::module_ & m);
void register_kernel_checks(pybind11::module_ & m);   // (kazeia._native_checks)
void register_devices(pybind11::module_ & m);
void register_decoder(pybind11::module_ & m);
void register_tts(pybind11::module_ & m);

}  // namespace kazeia::bindings
