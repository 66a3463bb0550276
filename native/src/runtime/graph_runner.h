// One CPU backend on a shared persistent thread pool, and either a graph allocator (placement
// `cpu`: compute directly on the CPU) or a ggml_backend_sched over the accelerators plus the CPU
// (placement `accel-sched`: ops a device cannot run fall back to the CPU; with no accelerator it
// is the scheduler over the CPU alone). Build a graph in a scratch context, allocate, set inputs,
// compute. Graphs are rebuilt per call (a few hundred nodes take well under a millisecond).
#pragma once

#include <memory>
#include <stdexcept>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "runtime/thread_pool.h"

namespace kazeia {

enum class compute_placement { cpu, sched };

class graph_runner {
public:
    explicit graph_runner(std::shared_ptr<thread_pool> pool, int max_nodes = 8192,
                          compute_placement placement = compute_placement::cpu)
        : pool_(std::move(pool)), max_nodes_(max_nodes) {
        backend_ = ggml_backend_cpu_init();
        if (!backend_) throw std::runtime_error("cannot start the CPU backend");
        ggml_backend_cpu_set_n_threads(backend_, pool_->n_threads());
        ggml_backend_cpu_set_threadpool(backend_, pool_->get());
        if (placement == compute_placement::cpu) {
            galloc_ = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend_));
            return;
        }
        for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
            ggml_backend_dev_t dev = ggml_backend_dev_get(i);
            if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU) continue;
            if (ggml_backend_t b = ggml_backend_dev_init(dev, nullptr)) accel_.push_back(b);
        }
        std::vector<ggml_backend_t> all(accel_);
        all.push_back(backend_);   // the CPU last: the scheduler's fallback
        sched_ = ggml_backend_sched_new(all.data(), nullptr, int(all.size()), size_t(max_nodes_), false, true);
        if (!sched_) throw std::runtime_error("cannot create a backend scheduler");
    }
    ~graph_runner() {
        if (ctx_) ggml_free(ctx_);
        if (galloc_) ggml_gallocr_free(galloc_);
        if (sched_) ggml_backend_sched_free(sched_);
        for (ggml_backend_t b : accel_) ggml_backend_free(b);
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
        if (sched_) {
            ggml_backend_sched_reset(sched_);
            if (!ggml_backend_sched_alloc_graph(sched_, gf_)) throw std::runtime_error("cannot allocate a compute buffer");
            return;
        }
        if (!ggml_gallocr_alloc_graph(galloc_, gf_)) throw std::runtime_error("cannot allocate a compute buffer");
    }
    void compute() {
        const ggml_status st = sched_ ? ggml_backend_sched_graph_compute(sched_, gf_) : ggml_backend_graph_compute(backend_, gf_);
        if (st != GGML_STATUS_SUCCESS) throw std::runtime_error("graph compute failed");
    }
    ggml_backend_t backend() const { return backend_; }

private:
    std::shared_ptr<thread_pool> pool_;
    int max_nodes_;
    ggml_backend_t backend_ = nullptr;
    ggml_gallocr_t galloc_ = nullptr;
    ggml_backend_sched_t sched_ = nullptr;
    std::vector<ggml_backend_t> accel_;
    ggml_context * ctx_ = nullptr;
    ggml_cgraph * gf_ = nullptr;
};

}  // namespace kazeia
