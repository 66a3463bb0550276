#pragma once

#include <pybind11/pybind11.h>

namespace kazeia::bindings {

void register_model(pybind11::module_ & m);
void register_devices(pybind11::module_ & m);
void register_decoder(pybind11::module_ & m);
void register_tts(pybind11::module_ & m);

}  // namespace kazeia::bindings
