// CPU memory for weight copies, in 2 MB-aligned chunks that Linux is asked to back with transparent
// huge pages (MADV_HUGEPAGE: most systems turn THP on only where asked). A frame of the talker and
// code predictor reads about 1 GB of weights: some 250k pages of 4 KB, each a TLB miss on first
// touch in the frame, against about 500 pages of 2 MB.
#pragma once

#include <cstddef>
#include <vector>

#include "ggml-backend.h"

namespace kazeia {

class weight_arena {
public:
    weight_arena() = default;
    ~weight_arena();
    weight_arena(const weight_arena &) = delete;
    weight_arena & operator=(const weight_arena &) = delete;

    // Room for `bytes` (64-byte aligned) and the ggml CPU buffer holding it, for ggml_backend_tensor_alloc;
    // {nullptr, nullptr} where there is none (not Linux, no memory, KAZEIA_NO_HUGE_PAGES set): the
    // caller allocates as it would otherwise.
    struct room {
        ggml_backend_buffer_t buffer;
        void * address;
    };
    room take(size_t bytes);

private:
    struct chunk {
        void * mapping;
        size_t mapped;
        char * base;   // 2 MB-aligned within the mapping
        size_t size, used;
        ggml_backend_buffer_t buffer;
    };
    std::vector<chunk> chunks_;
};

}  // namespace kazeia
