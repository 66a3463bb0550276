#include "weights/weight_arena.h"

#include <cstdint>
#include <cstdlib>

#include "ggml-cpu.h"
#include "kazeia/cpu_level.h"

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace kazeia {
namespace {

constexpr size_t k_huge_page = size_t(2) << 20;
constexpr size_t k_chunk = size_t(64) << 20;   // untouched pages of a chunk's tail cost nothing
constexpr size_t k_align = 64;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

weight_arena::~weight_arena() {
    for (chunk & c : chunks_) {
        ggml_backend_buffer_free(c.buffer);
#ifdef __linux__
        munmap(c.mapping, c.mapped);
#endif
    }
}

weight_arena::room weight_arena::take(size_t bytes) {
#ifdef __linux__
    if (measurement_switches_in_force().no_huge_pages || bytes == 0) return {nullptr, nullptr};
    bytes = round_up(bytes, k_align);
    if (chunks_.empty() || chunks_.back().size - chunks_.back().used < bytes) {
        const size_t size = std::max(k_chunk, round_up(bytes, k_huge_page));
        const size_t mapped = size + k_huge_page;   // room to align the start
        void * mapping = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mapping == MAP_FAILED) return {nullptr, nullptr};
        auto * base = reinterpret_cast<char *>(round_up(reinterpret_cast<uintptr_t>(mapping), k_huge_page));
        madvise(base, size, MADV_HUGEPAGE);   // before the first touch; harmless where THP is off
        ggml_backend_buffer_t buffer = ggml_backend_cpu_buffer_from_ptr(base, size);
        if (!buffer) {
            munmap(mapping, mapped);
            return {nullptr, nullptr};
        }
        ggml_backend_buffer_set_usage(buffer, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        chunks_.push_back({mapping, mapped, base, size, 0, buffer});
    }
    chunk & c = chunks_.back();
    void * at = c.base + c.used;
    c.used += bytes;
    return {c.buffer, at};
#else
    (void)bytes;
    return {nullptr, nullptr};
#endif
}

}  // namespace kazeia
