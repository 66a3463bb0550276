// Copies of a model's weights in another buffer type, made once per network, with the file's pages
// let go. Four uses: ggml's interleaved CPU layout (CPU_REPACK: on x86 with AVX2, q4_K matrices
// whose row count is a multiple of 8 multiply faster from it), Kazeia's lanes layout for q8_0, q6_K
// and q5_K matrices (AVX2 and up), placement `accel-weights` (every
// weight in an accelerator's host-visible buffer, computed on by the CPU) and `accel-sched` (every
// weight in the accelerator's own memory).
#pragma once

#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "weights/weight_arena.h"

namespace kazeia {

class model;

struct weight_layout {
    ggml_backend_buffer_type_t buft = nullptr;   // null: use the file's tensors as they are
    bool repack = false;                         // only what ggml can interleave for this CPU
    // an accelerator's own memory: a weight its device cannot hold (too large for one binding, a
    // type it has no use for) stays in CPU memory, where ggml's scheduler runs its ops on the CPU
    // and the launch report names them, instead of aborting the process on first use
    bool device_checked = false;
    // q8_0, q6_K and q5_K matrices rearranged into Kazeia's lanes layout (kernels/gemm_int8.h), which only
    // `product` reads: for stages whose every matrix goes through it (the talker, the code predictor)
    bool lanes = false;
};

weight_layout cpu_repack_layout();
// The same with q8_0, q6_K and q5_K matrices in the lanes layout where this CPU has a form of it (not when
// KAZEIA_GGML_PRODUCTS asks for ggml's products, nor with KAZEIA_NO_LANES, to measure against).
weight_layout cpu_lanes_layout();
// Every weight into the host-visible buffer type named `name` (a device's own, host or extra buffer
// type: placement accel-weights); throws std::invalid_argument naming the types ggml has when there
// is none of that name, or when the CPU cannot read it.
weight_layout buffer_layout(const std::string & name);
// Every weight into an accelerator's own memory (placement accel-sched: ops then run where their
// weights are); none for a device that computes from the CPU's buffers.
weight_layout device_layout(ggml_backend_dev_t dev);

class weight_copies {
public:
    // `m` (may be null): the file whose pages a copied tensor lets go
    weight_copies(const model * m, weight_layout layout);
    ~weight_copies();
    weight_copies(const weight_copies &) = delete;
    weight_copies & operator=(const weight_copies &) = delete;

    // The tensor a matrix product should read: its copy when the layout takes it, else `t`.
    ggml_tensor * operator()(ggml_tensor * t);
    // The same for a table read by other ops (rows looked up): never in a repacked layout.
    ggml_tensor * table(ggml_tensor * t) { return layout_.repack ? t : (*this)(t); }
    size_t count() const { return copies_; }
    // weights left in CPU memory because the device cannot hold them ("name: why")
    const std::vector<std::string> & kept_on_cpu() const { return kept_; }
    ggml_backend_buffer_type_t buffer_type() const { return layout_.buft; }


private:
    const model * m_;
    weight_layout layout_;
    ggml_context * ctx_ = nullptr;
    std::vector<ggml_backend_buffer_t> buffers_;
    std::vector<std::string> kept_;
    weight_arena arena_;                 // where lanes copies live (huge pages), else one buffer each
    size_t copies_ = 0;
};

}  // namespace kazeia
