// kazeia._native: thin bindings; the Python API lives in kazeia.engine.
#include "bindings.h"
#include "kazeia/ggml_log.h"

PYBIND11_MODULE(_native, m) {
    m.doc() = "Kazeia native core (ggml): model files, devices, quantisation";
    kazeia::ggml_log_install();   // ggml's own logger would print its debug chatter
    kazeia::bindings::register_model(m);
    kazeia::bindings::register_devices(m);
    kazeia::bindings::register_decoder(m);
    kazeia::bindings::register_tts(m);
}
