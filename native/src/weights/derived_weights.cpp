#include "weights/derived_weights.h"

#include <cstring>
#include <stdexcept>

#include "ggml-cpu.h"

namespace kazeia {

derived_weights::derived_weights(size_t max_tensors) {
    ggml_init_params params{ggml_tensor_overhead() * max_tensors, nullptr, /*no_alloc=*/true};
    ctx_ = ggml_init(params);
    if (!ctx_) throw std::runtime_error("cannot create a ggml context");
}

derived_weights::~derived_weights() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    if (ctx_) ggml_free(ctx_);
}

ggml_tensor * derived_weights::add(const std::string & name, ggml_type type, std::vector<int64_t> ne,
                                   std::function<void(std::vector<uint8_t> &)> fill) {
    ggml_tensor * t = ggml_new_tensor(ctx_, type, int(ne.size()), ne.data());
    ggml_set_name(t, name.c_str());
    pending_.emplace_back(t, std::move(fill));
    return t;
}

void derived_weights::allocate(const std::function<void()> & after_fill, ggml_backend_buffer_type_t buft) {
    buffer_ = ggml_backend_alloc_ctx_tensors_from_buft(ctx_, buft ? buft : ggml_backend_cpu_buffer_type());
    if (!buffer_) throw std::runtime_error("cannot allocate memory for derived weights");
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (auto & [t, fill] : pending_) {
        std::vector<uint8_t> bytes;
        fill(bytes);
        if (bytes.size() != ggml_nbytes(t)) throw std::logic_error(std::string("derived weight size mismatch: ") + t->name);
        ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
    }
    pending_.clear();
    if (after_fill) after_fill();
}

std::vector<uint8_t> tensor_bytes(const ggml_tensor * t) {
    std::vector<uint8_t> out(ggml_nbytes(t));
    ggml_backend_tensor_get(t, out.data(), 0, out.size());
    return out;
}

std::vector<uint8_t> permute_elements(const ggml_tensor * t, const int (&order)[3]) {
    if (ggml_is_quantized(t->type)) throw std::invalid_argument(std::string("cannot rearrange quantised ") + t->name);
    const size_t es = ggml_type_size(t->type);
    const std::vector<uint8_t> src = tensor_bytes(t);
    std::vector<uint8_t> dst(src.size());
    const int64_t ne[3] = {t->ne[0], t->ne[1], t->ne[2]};
    const int64_t new_ne[3] = {ne[order[0]], ne[order[1]], ne[order[2]]};
    int64_t idx[3];
    for (idx[2] = 0; idx[2] < ne[2]; ++idx[2]) {
        for (idx[1] = 0; idx[1] < ne[1]; ++idx[1]) {
            for (idx[0] = 0; idx[0] < ne[0]; ++idx[0]) {
                const int64_t s = idx[0] + ne[0] * (idx[1] + ne[1] * idx[2]);
                const int64_t d = idx[order[0]] + new_ne[0] * (idx[order[1]] + new_ne[1] * idx[order[2]]);
                std::memcpy(&dst[d * es], &src[s * es], es);
            }
        }
    }
    return dst;
}

}  // namespace kazeia
