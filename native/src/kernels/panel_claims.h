// Sharing a launch's panels (units of rows) among its threads while it runs. Each thread starts on
// its own contiguous run (one linear stream, what the prefetchers want) and claims chunks of it from
// the front; a thread done with its run claims chunks from the back of the run with most left. With
// a fixed split, a thread woken late or slowed by another process left the other waiting at the
// launch's end: 17-28 us of 84-114 per lanes product on average here (0.6B steps, two threads).
// Which thread computes a panel must not change its numbers: the caller's kernels guarantee that.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>

#include "ggml.h"

namespace kazeia {

struct panel_claims {
    static constexpr int k_max_threads = 16;
    static constexpr int64_t k_max_run = 0xFFFF;
    // a cache line each: claims on a thread's own run move no line between cores until another helps
    struct alignas(64) counter {
        std::atomic<uint32_t> value{0};
    };
    counter done;                   // threads finished with this launch
    counter taken[k_max_threads];   // per run: panels taken from its front (low 16 bits) and back (high 16)

    // Claims for one op, in its graph's context (they live as long as the graph); nullptr when the
    // context has no room left (the op then splits its panels the fixed way).
    static panel_claims * create(ggml_context * ctx) {
        const size_t bytes = sizeof(panel_claims) + alignof(panel_claims);
        if (ggml_used_mem(ctx) + bytes + 64 > ggml_get_mem_size(ctx)) return nullptr;   // (64: ggml's object header)
        auto raw = reinterpret_cast<uintptr_t>(ggml_new_buffer(ctx, bytes));
        raw = (raw + alignof(panel_claims) - 1) & ~uintptr_t(alignof(panel_claims) - 1);
        return new (reinterpret_cast<void *>(raw)) panel_claims;
    }
};

// `count` panels from offset `first` of a run of `len`, taken from its front (or back); 0: none left
inline int64_t take_panels(std::atomic<uint32_t> & taken, int64_t len, int64_t chunk, bool back, int64_t & first) {
    uint32_t v = taken.load(std::memory_order_relaxed);
    for (;;) {
        const int64_t front = v & 0xFFFF, rear = v >> 16, left = len - front - rear;
        if (left <= 0) return 0;
        const int64_t count = std::min(chunk, left);
        const uint32_t next = v + (back ? uint32_t(count) << 16 : uint32_t(count));
        if (taken.compare_exchange_weak(v, next, std::memory_order_relaxed)) {
            first = back ? len - rear - count : front;
            return count;
        }
    }
}

// Thread ith of nth: compute(q0, q1) on panels [q0, q1) of [0, panels) until every panel has been
// computed once by some thread. Without claims (or beyond their limits): the fixed split. The last
// thread out resets the claims for the graph's next launch; the launch's barrier orders the rest.
template <class Compute>
void claim_panels(panel_claims * claims, int ith, int nth, int64_t panels, int64_t chunk, Compute && compute) {
    auto run_start = [&](int r) { return panels * r / nth; };
    if (!claims || nth > panel_claims::k_max_threads || panels / nth + 1 > panel_claims::k_max_run) {
        compute(run_start(ith), run_start(ith + 1));
        return;
    }
    int64_t first = 0, count = 0;
    const int64_t own = run_start(ith), own_len = run_start(ith + 1) - own;
    while ((count = take_panels(claims->taken[ith].value, own_len, chunk, false, first)) > 0) {
        compute(own + first, own + first + count);
    }
    for (;;) {
        int busiest = -1;
        int64_t most = 0;
        for (int r = 0; r < nth; ++r) {
            const uint32_t v = claims->taken[r].value.load(std::memory_order_relaxed);
            const int64_t left = run_start(r + 1) - run_start(r) - (v & 0xFFFF) - (v >> 16);
            if (left > most) most = left, busiest = r;
        }
        if (busiest < 0) break;
        const int64_t start = run_start(busiest), len = run_start(busiest + 1) - start;
        if ((count = take_panels(claims->taken[busiest].value, len, chunk, true, first)) > 0) {
            compute(start + first, start + first + count);
        }
    }
    if (claims->done.value.fetch_add(1, std::memory_order_acq_rel) + 1 == uint32_t(nth)) {
        for (int r = 0; r < nth; ++r) claims->taken[r].value.store(0, std::memory_order_relaxed);
        claims->done.value.store(0, std::memory_order_release);
    }
}

}  // namespace kazeia
