// The lanes kernels for AVX-VNNI (Intel from Alder Lake on, AMD from Zen 5: 256-bit vpdpbusd
// without AVX-512): a panel's 16 rows are two 256-bit registers of 8, from the same bytes as the
// AVX-512 form (kernels/lanes_layout.h), with the same arithmetic.
#include <algorithm>
#include <cstring>

#include "kernels/gemv_common.h"
#include "kernels/lanes_tiles.h"

#ifdef KAZEIA_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")

namespace kazeia::lanes {
namespace avx_vnni {

struct V {
    struct I {
        __m256i lo, hi;   // rows 0-7, rows 8-15
    };
    struct F {
        __m256 lo, hi;
    };
    // 16 registers: q8_0 one panel x 3 columns (6 float and 6 integer sums); K-quants 2 columns
    // for steps, 3 for prompts
    static constexpr int tile_columns = 3, prompt_panels = 1, k_quant_step_columns = 2, k_quant_prompt_columns = 3;
    static constexpr int split(int tiles) { return tiles <= 1 ? 2 : 1; }

    static __m256i u(const uint8_t * p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
    static __m128i u128(const uint8_t * p) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)); }
    static __m128i u64(const uint8_t * p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)); }

    static I zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
    static F zero_f() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
    static I load(const uint8_t * p) { return {u(p), u(p + 32)}; }
    static F load(const float * p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
    static F load_half(const uint8_t * p) { return {_mm256_cvtph_ps(u128(p)), _mm256_cvtph_ps(u128(p + 16))}; }
    static F int8_to_float(const uint8_t * p) {
        return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(u64(p))), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(u64(p + 8)))};
    }
    static F uint8_to_float(const uint8_t * p) {
        return {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(u64(p))), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(u64(p + 8)))};
    }
    static void store(float * y, F v) {
        _mm256_storeu_ps(y, v.lo);
        _mm256_storeu_ps(y + 8, v.hi);
    }
    static I bcast32(int32_t v) { return {_mm256_set1_epi32(v), _mm256_set1_epi32(v)}; }
    static I bytes(char v) { return {_mm256_set1_epi8(v), _mm256_set1_epi8(v)}; }
    static F set1(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
    static I dpbusd(I acc, I w, I x) { return {_mm256_dpbusd_avx_epi32(acc.lo, w.lo, x.lo), _mm256_dpbusd_avx_epi32(acc.hi, w.hi, x.hi)}; }
    static I add32(I a, I b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
    static I sub32(I a, I b) { return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)}; }
    static I and_(I a, I b) { return {_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)}; }
    static I or_(I a, I b) { return {_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)}; }
    template <int N> static I shl16(I a) { return {_mm256_slli_epi16(a.lo, N), _mm256_slli_epi16(a.hi, N)}; }
    template <int N> static I shr16(I a) { return {_mm256_srli_epi16(a.lo, N), _mm256_srli_epi16(a.hi, N)}; }
    static F to_float(I a) { return {_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)}; }
    static F mul(F a, F b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
    static F fmadd(F a, F b, F c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
    static F fnmadd(F a, F b, F c) { return {_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)}; }

    // low + 16 in the bytes whose bit U is set in fifth: bit U moved to bit 4 (16-bit shifts: bit 4
    // of a byte then only ever comes from that byte), or-ed in
    template <int U> static I add_fifth_bit(I low, I fifth) {
        I at4;
        if constexpr (U <= 4) {
            at4 = shl16<4 - U>(fifth);
        } else {
            at4 = shr16<U - 4>(fifth);
        }
        return or_(low, and_(at4, bytes(0x10)));
    }

    // One kind of 6-bit value of a q5_K super-block (scales or mins: 96 bytes at src) as 128 bytes at
    // out, sub-block j's 16 rows at out + 16 j (kernels/lanes_layout.h).
    static void six_bit_values(const uint8_t * src, uint8_t * out) {
        const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
        const __m256i lo0 = u(src), lo1 = u(src + 32), top = u(src + 64);
        // 16-bit shifts: the two bits kept of each byte only ever come from that byte
        auto top_bits = [&](__m256i t) { return _mm256_slli_epi16(_mm256_and_si256(t, m3), 4); };
        auto store = [&](uint8_t * o, __m256i low, __m256i t) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o), _mm256_or_si256(_mm256_and_si256(low, m4), top_bits(t)));
        };
        store(out, lo0, top);
        store(out + 32, lo1, _mm256_srli_epi16(top, 2));
        store(out + 64, _mm256_srli_epi16(lo0, 4), _mm256_srli_epi16(top, 4));
        store(out + 96, _mm256_srli_epi16(lo1, 4), _mm256_srli_epi16(top, 6));
    }
};

#include "kernels/lanes_tiles.inc"

}  // namespace avx_vnni

const tile_kernels k_avx_vnni = {avx_vnni::lanes_panels, avx_vnni::panels_product};

}  // namespace kazeia::lanes

#pragma GCC pop_options
#endif  // KAZEIA_X86
