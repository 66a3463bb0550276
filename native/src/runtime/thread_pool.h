// One persistent ggml thread pool per engine, shared by all its graphs: creating and joining
// threads for every launch costs 0.1 ms on a quiet machine and many ms on a loaded one.
#pragma once

#include <stdexcept>

#include "ggml-cpu.h"
#include "ggml.h"

namespace kazeia {

class thread_pool {
public:
    explicit thread_pool(int n_threads) : n_threads_(n_threads) {
        if (n_threads < 1) throw std::invalid_argument("n_threads must be at least 1");
        ggml_threadpool_params params = ggml_threadpool_params_default(n_threads);
        params.poll = 0;   // sleep between launches: steadier when the machine is shared
        pool_ = ggml_threadpool_new(&params);
        if (!pool_) throw std::runtime_error("cannot create a thread pool");
    }
    ~thread_pool() { ggml_threadpool_free(pool_); }
    thread_pool(const thread_pool &) = delete;
    thread_pool & operator=(const thread_pool &) = delete;

    ggml_threadpool_t get() const { return pool_; }
    int n_threads() const { return n_threads_; }

private:
    int n_threads_;
    ggml_threadpool_t pool_ = nullptr;
};

}  // namespace kazeia
