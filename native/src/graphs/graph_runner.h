// One CPU backend on a shared persistent thread pool, and either a graph allocator (placement
// `cpu`: compute directly on the CPU) or a ggml_backend_sched over one accelerator plus the CPU
// (placement `accel-sched`: ops the device cannot run fall back to the CPU; with no accelerator it
// is the scheduler over the CPU alone). Each allocation records where the graph runs (launch_report). Build a graph in a scratch context, allocate, set inputs,
// compute. Graphs are rebuilt per call (a few hundred nodes take well under a millisecond).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "kazeia/thread_pool.h"
#include "graphs/launch_report.h"

namespace kazeia {

enum class compute_placement { cpu, sched };

// The accelerator named `name` (for a scheduled stage), or a clear error when ggml has none by that name.
inline ggml_backend_dev_t accelerator_device(const std::string & name) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_name(name.c_str());
    if (!dev || ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU) {
        throw std::invalid_argument("device '" + name + "' is unavailable: ggml has no accelerator of that name");
    }
    return dev;
}

// Bytes per node a graph's context keeps for small state its ops own (gemm_int8's panel claims:
// about 1.2 KB per lanes product, at most one product in six nodes).
constexpr size_t k_op_state_bytes = 256;

class graph_runner {
public:
    // device: with compute_placement::sched, the accelerator the scheduler runs the graph on (ops it
    // cannot run fall back to the CPU); "" schedules over the CPU alone
    explicit graph_runner(std::shared_ptr<thread_pool> pool, int max_nodes = 8192,
                          compute_placement placement = compute_placement::cpu, const std::string & device = "")
        : pool_(std::move(pool)), max_nodes_(max_nodes) {
        // (the device is looked up first: a bad name throws before anything needs freeing)
        ggml_backend_dev_t dev = placement == compute_placement::sched && !device.empty() ? accelerator_device(device) : nullptr;
        backend_ = ggml_backend_cpu_init();
        if (!backend_) throw std::runtime_error("cannot start the CPU backend");
        ggml_backend_cpu_set_n_threads(backend_, pool_->n_threads());
        ggml_backend_cpu_set_threadpool(backend_, pool_->get());
        if (placement == compute_placement::cpu) {
            galloc_ = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend_));
            return;
        }
        std::vector<ggml_backend_t> all;
        if (dev) {
            accel_ = ggml_backend_dev_init(dev, nullptr);
            if (!accel_) {
                ggml_backend_free(backend_);
                throw std::runtime_error("cannot start device " + device);
            }
            all.push_back(accel_);
        }
        all.push_back(backend_);   // the CPU last: the scheduler's fallback
        sched_ = ggml_backend_sched_new(all.data(), nullptr, int(all.size()), size_t(max_nodes_), false, true);
        if (!sched_) throw std::runtime_error("cannot create a backend scheduler");
    }
    ~graph_runner() {
        if (ctx_) ggml_free(ctx_);
        if (galloc_) ggml_gallocr_free(galloc_);
        if (sched_) ggml_backend_sched_free(sched_);
        if (accel_) ggml_backend_free(accel_);
        ggml_backend_free(backend_);
    }
    graph_runner(const graph_runner &) = delete;
    graph_runner & operator=(const graph_runner &) = delete;

    // A fresh scratch context and graph (the previous ones are released).
    ggml_context * begin() {
        if (ctx_) ggml_free(ctx_);
        // (room for one extra single-node graph: profiling computes nodes one at a time; and for
        // small per-op state that lives as long as the graph, such as lanes products' panel claims)
        const size_t meta = ggml_tensor_overhead() * max_nodes_ + ggml_graph_overhead_custom(max_nodes_, false) +
                            ggml_graph_overhead_custom(1, false) + k_op_state_bytes * max_nodes_;
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
            report_ = describe_sched_launch(sched_, gf_, accel_, backend_);
            return;
        }
        if (!ggml_gallocr_alloc_graph(galloc_, gf_)) throw std::runtime_error("cannot allocate a compute buffer");
        report_ = describe_cpu_launch(gf_);
    }
    // where the last allocated graph runs (empty before the first)
    const launch_report & report() const { return report_; }
    bool allocated() const { return report_.nodes > 0; }
    void compute() {
        std::lock_guard<std::mutex> turn(pool_->launches());
        ggml_backend_cpu_set_n_threads(backend_, pool_->active());
        const ggml_status st = sched_ ? ggml_backend_sched_graph_compute(sched_, gf_) : ggml_backend_graph_compute(backend_, gf_);
        if (st != GGML_STATUS_SUCCESS) throw std::runtime_error("graph compute failed");
    }
    // another graph of this runner's context (profiling: one node at a time), on its CPU backend
    void compute_on_cpu(ggml_cgraph * g) {
        std::lock_guard<std::mutex> turn(pool_->launches());
        ggml_backend_cpu_set_n_threads(backend_, pool_->active());
        if (ggml_backend_graph_compute(backend_, g) != GGML_STATUS_SUCCESS) throw std::runtime_error("graph compute failed");
    }

private:
    std::shared_ptr<thread_pool> pool_;
    int max_nodes_;
    ggml_backend_t backend_ = nullptr;
    ggml_gallocr_t galloc_ = nullptr;
    ggml_backend_sched_t sched_ = nullptr;
    ggml_backend_t accel_ = nullptr;
    launch_report report_;
    ggml_context * ctx_ = nullptr;
    ggml_cgraph * gf_ = nullptr;
};

}  // namespace kazeia
