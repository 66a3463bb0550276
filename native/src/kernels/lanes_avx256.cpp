// The lanes kernels in 256-bit registers, for CPUs without AVX-512: a panel's 16 rows are two
// registers of 8, from the same bytes as the AVX-512 form (kernels/lanes_layout.h), with the same
// arithmetic. Two forms:
// - AVX-VNNI (Intel from Alder Lake on, AMD from Zen 5): vpdpbusd, every lanes type;
// - AVX2 alone (Intel before Alder Lake, AMD Zen 1-3): vpmaddubsw + vpmaddwd in its place, exact
//   while a pair of products stays within int16: the K-quants' values (q6_K 0..63, q5_K 0..31) as
//   stored, q8_0's and the scratch panels' as w with its sign moved onto the column (|w| <= 128).
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
    static constexpr bool vnni = true;
    static constexpr int32_t byte_bias = 128;   // vpdpbusd multiplies the stored bytes w + 128
    static I dpbusd(I acc, I w, I x) { return {_mm256_dpbusd_avx_epi32(acc.lo, w.lo, x.lo), _mm256_dpbusd_avx_epi32(acc.hi, w.hi, x.hi)}; }
};

#include "kernels/lanes_tiles.inc"

}  // namespace avx_vnni

const tile_kernels k_avx_vnni = {avx_vnni::lanes_panels, avx_vnni::panels_product, avx_vnni::V::byte_bias};

}  // namespace kazeia::lanes

#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace kazeia::lanes {
namespace avx2 {

#include "kernels/lanes_v256.inc"

struct V : ops256 {
    static constexpr bool vnni = false;
    static constexpr int32_t byte_bias = 0;   // dpbusd below multiplies w itself
    // byte products summed in pairs (int16), pairs of those summed into int32 and added to acc
    static I pairs(I w, I x) { return {_mm256_maddubs_epi16(w.lo, x.lo), _mm256_maddubs_epi16(w.hi, x.hi)}; }
    static I add16(I a, I b) { return {_mm256_add_epi16(a.lo, b.lo), _mm256_add_epi16(a.hi, b.hi)}; }
    static I add_pairs(I acc, I p) {
        const __m256i one = _mm256_set1_epi16(1);
        return {_mm256_add_epi32(acc.lo, _mm256_madd_epi16(p.lo, one)), _mm256_add_epi32(acc.hi, _mm256_madd_epi16(p.hi, one))};
    }
    // q8_0 and scratch panels (stored w + 128, w in -128..127): w x exactly, as ggml's AVX2 q8_0 dot
    // does it: |w| (unsigned) times x with w's sign, each pair at most 2 x 128 x 127 in int16
    static __m256i signed_dot(__m256i acc, __m256i stored, __m256i x) {
        const __m256i w = _mm256_xor_si256(stored, _mm256_set1_epi8(char(0x80)));
        const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
        return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
    }
    static I dpbusd(I acc, I w, I x) { return {signed_dot(acc.lo, w.lo, x.lo), signed_dot(acc.hi, w.hi, x.hi)}; }
};

#include "kernels/lanes_tiles.inc"

}  // namespace avx2

const tile_kernels k_avx2 = {avx2::lanes_panels, avx2::panels_product, avx2::V::byte_bias};

}  // namespace kazeia::lanes

#pragma GCC pop_options
#endif  // KAZEIA_X86
