#include "weights/weight_copies.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "ggml-cpu.h"
#include "kazeia/cpu_level.h"
#include "kazeia/model.h"
#include "kernels/gemm_int8.h"
#include "kernels/lanes_layout.h"
#include "runtime/buffer_types.h"

namespace kazeia {
namespace {

constexpr size_t k_max_tensors = 4096;

ggml_backend_buffer_type_t cpu_repack_buffer_type() {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    for (ggml_backend_buffer_type_t b : cpu ? device_buffer_types(cpu) : std::vector<ggml_backend_buffer_type_t>{}) {
        if (std::strcmp(ggml_backend_buft_name(b), "CPU_REPACK") == 0) return b;
    }
    return nullptr;
}

// ggml's repack layouts need whole groups of 8 rows; ggml aborts on a tensor it cannot repack, so
// only the layout known to exist on this CPU is asked for.
bool repackable(const ggml_tensor * t) {
    return t->type == GGML_TYPE_Q4_K && ggml_n_dims(t) == 2 && t->ne[1] % 8 == 0 && ggml_cpu_has_avx2();
}

}  // namespace

weight_layout cpu_repack_layout() { return {cpu_repack_buffer_type(), true}; }

weight_layout cpu_lanes_layout() {
    weight_layout l = cpu_repack_layout();
    const measurement_switches & off = measurement_switches_in_force();
    l.lanes = lanes_available() && !off.ggml_products && !off.no_lanes;
    return l;
}

weight_layout buffer_layout(const std::string & name) {
    std::string known;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        for (ggml_backend_buffer_type_t b : device_buffer_types(ggml_backend_dev_get(i))) {
            if (name == ggml_backend_buft_name(b)) {
                if (!ggml_backend_buft_is_host(b)) {
                    throw std::invalid_argument("buffer type " + name + " is not host-visible: the CPU cannot compute from it");
                }
                return {b, false};
            }
            known += (known.empty() ? "" : ", ") + std::string(ggml_backend_buft_name(b));
        }
    }
    throw std::invalid_argument("ggml has no buffer type named '" + name + "' (it has: " + known + ")");
}

weight_layout device_layout(ggml_backend_dev_t dev) {
    ggml_backend_buffer_type_t b = ggml_backend_dev_buffer_type(dev);
    if (b == ggml_backend_cpu_buffer_type()) return {};
    return {b, false, true};
}

weight_copies::weight_copies(const model * m, weight_layout layout) : m_(m), layout_(layout) {
    ggml_init_params params{ggml_tensor_overhead() * k_max_tensors, nullptr, /*no_alloc=*/true};
    ctx_ = ggml_init(params);
    if (!ctx_) throw std::runtime_error("cannot create a ggml context");
}

weight_copies::~weight_copies() {
    for (ggml_backend_buffer_t b : buffers_) ggml_backend_buffer_free(b);
    if (ctx_) ggml_free(ctx_);
}

ggml_tensor * weight_copies::operator()(ggml_tensor * t) {
    if (layout_.lanes && lanes_eligible(t) && ggml_backend_buffer_is_host(t->buffer) && copies_ < k_max_tensors) {
        ggml_tensor * copy = ggml_dup_tensor(ctx_, t);
        ggml_set_name(copy, t->name);
        weight_arena::room room = arena_.take(ggml_nbytes(t));
        ggml_backend_buffer_t own = room.buffer ? nullptr
                                                : ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), ggml_nbytes(t));
        ggml_backend_buffer_t buf = room.buffer ? room.buffer : own;
        void * at = room.buffer ? room.address : own ? ggml_backend_buffer_get_base(own) : nullptr;
        if (buf && ggml_backend_tensor_alloc(buf, copy, at) == GGML_STATUS_SUCCESS) {
            if (own) {
                ggml_backend_buffer_set_usage(own, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
                buffers_.push_back(own);
            }
            lanes::pack(t, t->data, copy->data);
            ++copies_;
            mark_lanes(copy);
            if (m_) m_->release_pages(t);
            return copy;
        }
        if (own) ggml_backend_buffer_free(own);   // no memory for it: the file's layout still works
    }
    if (!layout_.buft || !t || (layout_.repack && !repackable(t)) || copies_ >= k_max_tensors) return t;
    if (layout_.device_checked) {
        // ggml_backend_sched aborts on a weight in device memory that its device does not
        // support as a tensor (e.g. larger than Vulkan's maxStorageBufferRange): keep those here
        ggml_backend_dev_t dev = ggml_backend_buft_get_device(layout_.buft);
        const char * why = nullptr;
        if (ggml_nbytes(t) > ggml_backend_buft_get_max_size(layout_.buft)) {
            why = "larger than one buffer of the device";
        } else if (dev && !ggml_backend_dev_supports_op(dev, t)) {
            why = "the device cannot bind it (too large or an unsupported type)";
        }
        if (why) {
            kept_.push_back(std::string(t->name) + ": " + why);
            return t;
        }
    }
    ggml_tensor * copy = ggml_dup_tensor(ctx_, t);
    ggml_set_name(copy, t->name);
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(layout_.buft, ggml_backend_buft_get_alloc_size(layout_.buft, copy));
    if (!buf) {
        if (layout_.repack) return t;   // no memory for a faster copy: the file's layout still works
        throw std::runtime_error(std::string("cannot allocate ") + ggml_backend_buft_name(layout_.buft) + " memory for " + t->name);
    }
    const bool placed = ggml_backend_tensor_alloc(buf, copy, ggml_backend_buffer_get_base(buf)) == GGML_STATUS_SUCCESS;
    if (!placed || (layout_.repack && !copy->extra)) {
        ggml_backend_buffer_free(buf);
        if (layout_.repack) return t;
        throw std::runtime_error(std::string("cannot place ") + t->name + " in " + ggml_backend_buft_name(layout_.buft));
    }
    ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ggml_backend_tensor_set(copy, t->data, 0, ggml_nbytes(t));   // a repack buffer interleaves as it stores
    buffers_.push_back(buf);
    ++copies_;
    if (m_) m_->release_pages(t);
    return copy;
}

}  // namespace kazeia
