#include "runtime/weight_copies.h"

#include <cstring>
#include <stdexcept>

#include <memory>
#include <random>

#include "ggml-cpu.h"
#include "kazeia/model.h"
#include "runtime/graph_runner.h"

namespace kazeia {
namespace {

constexpr size_t k_max_tensors = 4096;

ggml_backend_buffer_type_t cpu_repack_buffer_type() {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!cpu) return nullptr;
    auto get = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu), "ggml_backend_dev_get_extra_bufts"));
    if (!get) return nullptr;
    for (ggml_backend_buffer_type_t * b = get(cpu); b && *b; ++b) {
        if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) return *b;
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

weight_layout buffer_layout(const std::string & name) {
    std::string known;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        for (ggml_backend_buffer_type_t b : {ggml_backend_dev_buffer_type(dev), ggml_backend_dev_host_buffer_type(dev)}) {
            if (!b) continue;
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
    if (!layout_.buft || !t || (layout_.repack && !repackable(t)) || buffers_.size() >= k_max_tensors) return t;
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
    if (m_) m_->release_pages(t);
    return copy;
}

bool weight_copies::compare_repacked(int64_t rows, int64_t cols, int64_t n, uint64_t seed, std::vector<float> & plain,
                               std::vector<float> & repacked) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(size_t(rows * cols)), x(size_t(cols * n));
    for (float & v : w) v = normal(gen);
    for (float & v : x) v = normal(gen);
    ggml_init_params params{ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * wq = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_K, cols, rows);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type());
    std::vector<uint8_t> q(ggml_nbytes(wq));
    ggml_quantize_chunk(GGML_TYPE_Q4_K, w.data(), q.data(), 0, rows, cols, nullptr);
    ggml_backend_tensor_set(wq, q.data(), 0, q.size());
    weight_copies layout(nullptr, cpu_repack_layout());
    ggml_tensor * wr = layout(wq);
    const bool made = wr != wq;
    graph_runner runner(std::make_shared<thread_pool>(1));
    for (auto [weights, out] : {std::pair{wq, &plain}, std::pair{wr, &repacked}}) {
        ggml_context * g = runner.begin();
        ggml_tensor * xt = ggml_new_tensor_2d(g, GGML_TYPE_F32, cols, n);
        ggml_set_input(xt);
        ggml_tensor * y = ggml_mul_mat(g, weights, xt);
        ggml_set_output(y);
        ggml_build_forward_expand(runner.graph(), y);
        runner.allocate();
        ggml_backend_tensor_set(xt, x.data(), 0, ggml_nbytes(xt));
        runner.compute();
        out->resize(size_t(ggml_nelements(y)));
        ggml_backend_tensor_get(y, out->data(), 0, ggml_nbytes(y));
    }
    ggml_backend_buffer_free(wbuf);
    ggml_free(ctx);
    return made;
}

}  // namespace kazeia
