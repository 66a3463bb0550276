// One CPU backend on a shared persistent thread pool, and a graph allocator: build a graph in a
// scratch context, allocate, set inputs, compute. Graphs are rebuilt per call (ggml builds a few
// hundred nodes in well under a millisecond); the compute buffer is kept between calls.
#pragma once

#include <memory>
#include <stdexcept>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "runtime/thread_pool.h"

namespace kazeia {

class graph_runner {
public:
    explicit graph_runner(std::shared_ptr<thread_pool> pool, int max_nodes = 8192)
        : pool_(std::move(pool)), max_nodes_(max_nodes) {
        backend_ = ggml_backend_cpu_init();
        if (!backend_) throw std::runtime_error("cannot start the CPU backend");
        ggml_backend_cpu_set_n_threads(backend_, pool_->n_threads());
        ggml_backend_cpu_set_threadpool(backend_, pool_->get());
        galloc_ = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend_));
    }
    ~graph_runner() {
        if (ctx_) ggml_free(ctx_);
        ggml_gallocr_free(galloc_);
        ggml_backend_free(backend_);
    }
    graph_runner(const graph_runner &) = delete;
    graph_runner & operator=(const graph_runner &) = delete;

    // A fresh scratch context and graph (the previous ones are released).
    ggml_context * begin() {
        if (ctx_) ggml_free(ctx_);
        // (room for one extra single-node graph: profiling computes nodes one at a time)
        const size_t meta = ggml_tensor_overhead() * max_nodes_ + ggml_graph_overhead_custom(max_nodes_, false) +
                            ggml_graph_overhead_custom(1, false);
        ggml_init_params params{meta, nullptr, true};
        ctx_ = ggml_init(params);
        gf_ = ggml_new_graph_custom(ctx_, max_nodes_, false);
        return ctx_;
    }
    ggml_cgraph * graph() const { return gf_; }

    void allocate() {
        if (!ggml_gallocr_alloc_graph(galloc_, gf_)) throw std::runtime_error("cannot allocate a compute buffer");
    }
    void compute() {
        if (ggml_backend_graph_compute(backend_, gf_) != GGML_STATUS_SUCCESS) throw std::runtime_error("graph compute failed");
    }
    ggml_backend_t backend() const { return backend_; }

private:
    std::shared_ptr<thread_pool> pool_;
    int max_nodes_;
    ggml_backend_t backend_ = nullptr;
    ggml_gallocr_t galloc_ = nullptr;
    ggml_context * ctx_ = nullptr;
    ggml_cgraph * gf_ = nullptr;
};

}  // namespace kazeia
