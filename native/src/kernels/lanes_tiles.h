// The lanes kernels in three instruction sets, the same arithmetic (kernels/lanes_tiles.inc):
// AVX-512 VNNI (512-bit registers, 16 rows each), AVX-VNNI (256-bit, two registers for 16 rows: Intel
// laptop and desktop CPUs from Alder Lake on, which have no AVX-512) and AVX2 alone (the same, with
// vpmaddubsw + vpmaddwd for each vpdpbusd). kernels/gemm_int8.cpp picks one.
#pragma once

#include <cstdint>

#include "ggml.h"
#include "kernels/lanes_layout.h"

namespace kazeia::lanes {

struct tile_kernels {
    // panels [p0, p1) of the lanes weight w against every column of xq (n of them), into y [N, n]
    void (*lanes_panels)(const ggml_tensor * w, const quantized_columns & xq, int64_t n, int64_t p0, int64_t p1, float * y);
    // every column against one or two (scratch) panels: y[c][r0 .. r0 + 16 n_panels)
    void (*panels_product)(const panel_view * panel, int n_panels, const quantized_columns & x, int64_t k, int64_t group,
                           int64_t n, float * y, int64_t rows, int64_t r0);
    // what the columns' group sums are multiplied by for q8_0 and scratch panels (stored w + 128):
    // 128 where the kernels multiply the stored bytes (vpdpbusd) and take the excess off; 0 where
    // they multiply w itself (the AVX2 form)
    int32_t byte_bias;
};

extern const tile_kernels k_avx512_vnni;   // needs AVX-512 F/BW/VL and AVX-512 VNNI
extern const tile_kernels k_avx_vnni;      // needs AVX2, FMA, F16C and AVX-VNNI
extern const tile_kernels k_avx2;          // needs AVX2, FMA and F16C

}  // namespace kazeia::lanes
