#include "kazeia/devices.h"

#include <algorithm>

#include "ggml-backend.h"
#include "kazeia/ggml_log.h"
#include "runtime/buffer_types.h"

namespace kazeia {

std::vector<ggml_backend_buffer_type_t> device_buffer_types(ggml_backend_dev_t dev) {
    std::vector<ggml_backend_buffer_type_t> out;
    auto add = [&](ggml_backend_buffer_type_t b) {
        if (b && std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
    };
    add(ggml_backend_dev_buffer_type(dev));
    add(ggml_backend_dev_host_buffer_type(dev));
    auto get = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
    for (ggml_backend_buffer_type_t * b = get ? get(dev) : nullptr; b && *b; ++b) add(*b);
    return out;
}

std::vector<device_info> devices_list() {
    ggml_log_install();
    std::vector<device_info> out;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        ggml_backend_dev_props props{};
        ggml_backend_dev_get_props(dev, &props);
        device_info d;
        d.name = props.name ? props.name : "";
        d.description = props.description ? props.description : "";
        switch (props.type) {
            case GGML_BACKEND_DEVICE_TYPE_CPU: d.type = "cpu"; break;
            case GGML_BACKEND_DEVICE_TYPE_GPU: d.type = "gpu"; break;
            case GGML_BACKEND_DEVICE_TYPE_IGPU: d.type = "igpu"; break;
            default: d.type = "accel"; break;
        }
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
        d.backend = reg ? ggml_backend_reg_name(reg) : "";
        d.memory_free = props.memory_free;
        d.memory_total = props.memory_total;
        d.async = props.caps.async;
        d.host_buffer = props.caps.host_buffer;
        if (ggml_backend_buffer_type_t host = ggml_backend_dev_host_buffer_type(dev)) d.host_buffer_type = ggml_backend_buft_name(host);
        for (ggml_backend_buffer_type_t b : device_buffer_types(dev)) {
            d.buffer_types.push_back({ggml_backend_buft_name(b), ggml_backend_buft_is_host(b)});
        }
        d.buffer_from_host_ptr = props.caps.buffer_from_host_ptr;
        d.events = props.caps.events;
        out.push_back(d);
    }
    return out;
}

}  // namespace kazeia
