// One persistent ggml thread pool per engine, shared by all its graphs: creating and joining
// threads for every launch costs 0.1 ms on a quiet machine and many ms on a loaded one. Each launch
// uses `active()` of its threads (at most all of them): on a busy machine one fewer spinning worker
// can be faster, and the engine's thread policy moves it between frames.
#pragma once

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "ggml-cpu.h"
#include "ggml.h"

namespace kazeia {

class thread_pool {
public:
    explicit thread_pool(int n_threads) : n_threads_(n_threads), active_(n_threads) {
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
    // Held for each launch: a ggml pool runs one graph at a time, so graph runners on several
    // threads that share a pool take turns instead of corrupting each other's launch.
    std::mutex & launches() { return launches_; }
    int n_threads() const { return n_threads_; }
    int active() const { return active_.load(std::memory_order_relaxed); }
    void set_active(int n) {
        if (n < 1 || n > n_threads_) throw std::invalid_argument("active threads must be from 1 to the pool's size");
        active_.store(n, std::memory_order_relaxed);
    }

private:
    int n_threads_;
    std::atomic<int> active_;
    std::mutex launches_;
    ggml_threadpool_t pool_ = nullptr;
};

}  // namespace kazeia
