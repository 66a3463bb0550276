// The lanes kernels in 256-bit registers, for CPUs without AVX-512: a panel's 16 rows are two
// registers of 8, from the same bytes as the AVX-512 form (kernels/lanes_layout.h), with the same
// arithmetic. Two forms:
// - AVX-VNNI (Intel from Alder Lake on, AMD from Zen 5): vpdpbusd, every lanes type;
// - AVX2 alone (Intel before Alder Lake, AMD Zen 1-3): vpmaddubsw + vpmaddwd in its place, exact only
//   while a pair of products stays within int16: q6_K (values 0..63) and q5_K (0..31), never the
//   q8_0 and scratch panels (values w + 128).
#include <algorithm>
#include <cstring>

#include "kernels/gemv_common.h"
#include "kernels/lanes_tiles.h"

#ifdef KAZEIA_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")

namespace kazeia::lanes {
namespace avx_vnni {

#include "kernels/lanes_v256.inc"

struct V : ops256 {
    static constexpr bool any_bytes = true;
    static I dpbusd(I acc, I w, I x) { return {_mm256_dpbusd_avx_epi32(acc.lo, w.lo, x.lo), _mm256_dpbusd_avx_epi32(acc.hi, w.hi, x.hi)}; }
};

#include "kernels/lanes_tiles.inc"

}  // namespace avx_vnni

const tile_kernels k_avx_vnni = {avx_vnni::lanes_panels, avx_vnni::panels_product, avx_vnni::V::any_bytes};

}  // namespace kazeia::lanes

#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace kazeia::lanes {
namespace avx2 {

#include "kernels/lanes_v256.inc"

struct V : ops256 {
    static constexpr bool any_bytes = false;   // pairs of byte products must stay within int16
    // byte products summed in pairs (int16), pairs of those summed into int32 and added to acc
    static I pairs(I w, I x) { return {_mm256_maddubs_epi16(w.lo, x.lo), _mm256_maddubs_epi16(w.hi, x.hi)}; }
    static I add16(I a, I b) { return {_mm256_add_epi16(a.lo, b.lo), _mm256_add_epi16(a.hi, b.hi)}; }
    static I add_pairs(I acc, I p) {
        const __m256i one = _mm256_set1_epi16(1);
        return {_mm256_add_epi32(acc.lo, _mm256_madd_epi16(p.lo, one)), _mm256_add_epi32(acc.hi, _mm256_madd_epi16(p.hi, one))};
    }
    // (q8_0 and scratch panels, which never come here: kernels/gemm_int8.cpp)
    static I dpbusd(I acc, I w, I x) { return add_pairs(acc, pairs(w, x)); }
};

#include "kernels/lanes_tiles.inc"

}  // namespace avx2

const tile_kernels k_avx2 = {avx2::lanes_panels, avx2::panels_product, avx2::V::any_bytes};

}  // namespace kazeia::lanes

#pragma GCC pop_options
#endif  // KAZEIA_X86
