// The lanes kernels for AVX-512 VNNI: one 512-bit register holds four values of a panel's 16 rows.
#include <algorithm>
#include <cstring>

#include "kernels/gemv_common.h"
#include "kernels/lanes_tiles.h"

#ifdef KAZEIA_X86
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")

namespace kazeia::lanes {
namespace avx512_vnni {

struct V {
    using I = __m512i;
    using F = __m512;
    // columns per tile: q8_0 2 panels x 6 columns (12 float and 12 integer sums of 32 registers);
    // K-quants, one panel: 4 columns for steps, 8 for prompts
    static constexpr int tile_columns = 6, prompt_panels = 2, k_quant_step_columns = 4, k_quant_prompt_columns = 8;
    static constexpr int split(int tiles) { return tiles <= 4 ? 2 : 1; }
    static constexpr bool vnni = true;
    static constexpr int32_t byte_bias = 128;   // vpdpbusd multiplies the stored bytes w + 128

    static I zero() { return _mm512_setzero_si512(); }
    static F zero_f() { return _mm512_setzero_ps(); }
    static I load(const uint8_t * p) { return _mm512_loadu_si512(p); }
    static F load(const float * p) { return _mm512_loadu_ps(p); }
    static F load_half(const uint8_t * p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))); }
    static F int8_to_float(const uint8_t * p) {
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))));
    }
    static F uint8_to_float(const uint8_t * p) {
        return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))));
    }
    static void store(float * y, F v) { _mm512_storeu_ps(y, v); }
    static I bcast32(int32_t v) { return _mm512_set1_epi32(v); }
    static I bytes(char v) { return _mm512_set1_epi8(v); }
    static F set1(float v) { return _mm512_set1_ps(v); }
    static I dpbusd(I acc, I w, I x) { return _mm512_dpbusd_epi32(acc, w, x); }
    static I add32(I a, I b) { return _mm512_add_epi32(a, b); }
    static I sub32(I a, I b) { return _mm512_sub_epi32(a, b); }
    static I and_(I a, I b) { return _mm512_and_si512(a, b); }
    static I or_(I a, I b) { return _mm512_or_si512(a, b); }
    template <int N> static I shl16(I a) { return _mm512_slli_epi16(a, N); }
    template <int N> static I shr16(I a) { return _mm512_srli_epi16(a, N); }
    static F to_float(I a) { return _mm512_cvtepi32_ps(a); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
    // low + 16 in the bytes whose bit U is set in fifth (vptestmb, then a masked add)
    template <int U> static I add_fifth_bit(I low, I fifth) {
        return _mm512_mask_add_epi8(low, _mm512_test_epi8_mask(fifth, bytes(char(1 << U))), low, bytes(16));
    }

    // One kind of 6-bit value of a q5_K super-block (scales or mins: 96 bytes at src) as 128 bytes at
    // out, sub-block j's 16 rows at out + 16 j (kernels/lanes_layout.h).
    static void six_bit_values(const uint8_t * src, uint8_t * out) {
        const __m512i m4 = bytes(0x0F), m3 = bytes(0x03);
        const __m512i lo = _mm512_loadu_si512(src);
        const __m256i top = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + 64));
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(top), top, 1);
        // 16-bit shifts: the two bits kept of each byte only ever come from that byte
        const __m512i t0 = _mm512_and_si512(_mm512_srlv_epi16(both, _mm512_set_epi64(0x0002000200020002, 0x0002000200020002,
            0x0002000200020002, 0x0002000200020002, 0, 0, 0, 0)), m3);
        const __m512i t1 = _mm512_and_si512(_mm512_srlv_epi16(both, _mm512_set_epi64(0x0006000600060006, 0x0006000600060006,
            0x0006000600060006, 0x0006000600060006, 0x0004000400040004, 0x0004000400040004, 0x0004000400040004,
            0x0004000400040004)), m3);
        _mm512_storeu_si512(out, _mm512_or_si512(_mm512_and_si512(lo, m4), _mm512_slli_epi16(t0, 4)));
        _mm512_storeu_si512(out + 64, _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), m4), _mm512_slli_epi16(t1, 4)));
    }
};

#include "kernels/lanes_tiles.inc"

}  // namespace avx512_vnni

const tile_kernels k_avx512_vnni = {avx512_vnni::lanes_panels, avx512_vnni::panels_product, avx512_vnni::V::byte_bias};

}  // namespace kazeia::lanes

#pragma GCC pop_options
#endif  // KAZEIA_X86
