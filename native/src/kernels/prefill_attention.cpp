#include "kernels/prefill_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "kazeia/cpu_level.h"
#include "kernels/gemv_common.h"

namespace kazeia {
namespace {

#ifdef KAZEIA_X86
bool cpu_has_avx512f() {
    static const bool yes = cpu_allows(cpu_level::avx512);
    return yes;
}

// e^x for x <= 0 (scores less their row's maximum) to about one ulp; exactly 0 below -87, as
// expf(-inf) is for masked keys
__attribute__((target("avx512f,fma"))) inline __m512 exp_nonpositive(__m512 x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);   // x - n ln 2, in two parts
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny), _mm512_scalef_ps(p, n));
}

struct scratch {
    std::vector<float> keys_t;   // [hd][n_kv padded]: key j's dimension d at d * padded + j
    std::vector<float> values;   // [n_kv padded][hd]
    std::vector<float> scores;   // [n_kv padded]
};

constexpr int64_t k_rows_per_task = 16;

constexpr int k_rows = 4;   // query rows sharing each load of keys and values

// Rows i0 .. i0 + rows of head h against the kv head transposed in t.
__attribute__((target("avx512f,fma")))
void rows_attention(scratch & t, const ggml_tensor * q, const ggml_tensor * mask, ggml_tensor * dst, int64_t h, int64_t i0,
                    int rows, int64_t hd, int64_t padded, int64_t n_kv, float scale) {
    const float * qi[k_rows];
    const float * mi[k_rows];
    float * s[k_rows];
    t.scores.resize(size_t(k_rows * padded));
    for (int r = 0; r < k_rows; ++r) {
        const int64_t i = i0 + std::min(r, rows - 1);   // rows past the end repeat the last (not stored)
        qi[r] = reinterpret_cast<const float *>(static_cast<const char *>(q->data) + i * q->nb[2] + h * q->nb[1]);
        mi[r] = reinterpret_cast<const float *>(static_cast<const char *>(mask->data) + i * mask->nb[1]);
        s[r] = t.scores.data() + r * padded;
    }
    // keys past the last one any of these rows may see (a causal mask hides the rest) are skipped
    int64_t live_keys = 0;
    for (int r = 0; r < k_rows; ++r) {
        int64_t j = n_kv;
        while (j > live_keys && mi[r][j - 1] == -INFINITY) --j;
        live_keys = std::max(live_keys, j);
    }
    const int64_t live_padded = std::max<int64_t>(16, (live_keys + 15) / 16 * 16);
    for (int r = 0; r < k_rows; ++r) {
        std::fill(s[r] + live_padded, s[r] + padded, 0.0f);
    }
    // scores: q . k over the head's dimensions, 32 keys x 4 rows at a time
    __m512 row_max[k_rows];
    for (int r = 0; r < k_rows; ++r) row_max[r] = _mm512_set1_ps(-INFINITY);
    for (int64_t j0 = 0; j0 < live_padded; j0 += 32) {
        const int nblk = live_padded - j0 >= 32 ? 2 : 1;
        __m512 acc[k_rows][2];
        for (int r = 0; r < k_rows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        const float * kt = t.keys_t.data() + j0;
        for (int64_t d = 0; d < hd; ++d, kt += padded) {
            const __m512 k0 = _mm512_loadu_ps(kt), k1 = nblk == 2 ? _mm512_loadu_ps(kt + 16) : k0;
            for (int r = 0; r < k_rows; ++r) {
                const __m512 qd = _mm512_set1_ps(qi[r][d]);
                acc[r][0] = _mm512_fmadd_ps(qd, k0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(qd, k1, acc[r][1]);
            }
        }
        for (int u = 0; u < nblk; ++u) {
            const int64_t j = j0 + 16 * u;
            const __mmask16 live = n_kv - j >= 16 ? __mmask16(0xFFFF) : n_kv > j ? __mmask16((1u << (n_kv - j)) - 1) : 0;
            for (int r = 0; r < k_rows; ++r) {
                const __m512 m = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), live, mi[r] + j);
                const __m512 sc = _mm512_fmadd_ps(acc[r][u], _mm512_set1_ps(scale), m);
                _mm512_storeu_ps(s[r] + j, sc);
                row_max[r] = _mm512_max_ps(row_max[r], sc);
            }
        }
    }
    __m512 inv[k_rows];
    for (int r = 0; r < k_rows; ++r) {
        const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(row_max[r]));
        __m512 total = _mm512_setzero_ps();
        for (int64_t j0 = 0; j0 < live_padded; j0 += 16) {
            const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s[r] + j0), mx));
            _mm512_storeu_ps(s[r] + j0, e);
            total = _mm512_add_ps(total, e);
        }
        inv[r] = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(total));
    }
    // p . v, 64 value dimensions x 4 rows at a time
    for (int64_t d0 = 0; d0 < hd; d0 += 64) {
        const int regs = int(std::min<int64_t>(4, (hd - d0) / 16));
        __m512 o[k_rows][4];
        for (int r = 0; r < k_rows; ++r) {
            for (int u = 0; u < 4; ++u) o[r][u] = _mm512_setzero_ps();
        }
        const float * v = t.values.data() + d0;
        for (int64_t j = 0; j < std::min(n_kv, live_padded); ++j, v += hd) {
            __m512 vu[4];
            for (int u = 0; u < regs; ++u) vu[u] = _mm512_loadu_ps(v + 16 * u);
            for (int r = 0; r < k_rows; ++r) {
                const __m512 p = _mm512_set1_ps(s[r][j]);
                for (int u = 0; u < regs; ++u) o[r][u] = _mm512_fmadd_ps(p, vu[u], o[r][u]);
            }
        }
        for (int r = 0; r < rows; ++r) {
            float * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + (i0 + r) * dst->nb[1]) + h * hd + d0;
            for (int u = 0; u < regs; ++u) _mm512_storeu_ps(out + 16 * u, _mm512_mul_ps(o[r][u], inv[r]));
        }
    }
}

__attribute__((target("avx512f,fma")))
void attention_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * keys = dst->src[1];
    const ggml_tensor * vals = dst->src[2];
    const ggml_tensor * mask = dst->src[3];
    const int64_t hd = q->ne[0], heads = q->ne[1], n = q->ne[2], n_kv = keys->ne[1], kv_heads = keys->ne[2];
    const int64_t per_kv = heads / kv_heads, padded = (n_kv + 15) / 16 * 16;
    const float scale = 1.0f / std::sqrt(float(hd));
    thread_local scratch t;
    t.keys_t.assign(size_t(hd * padded), 0.0f);
    t.values.assign(size_t(padded * hd), 0.0f);
    t.scores.resize(size_t(padded));
    const int64_t blocks = (n + k_rows_per_task - 1) / k_rows_per_task;
    int64_t loaded = -1;
    // a contiguous run of tasks per thread, kv head by kv head: each kv head is transposed by the
    // threads that serve it, once each
    const int64_t tasks = kv_heads * blocks;
    for (int64_t task = tasks * ith / nth; task < tasks * (ith + 1) / nth; ++task) {
        const int64_t g = task / blocks, b = task % blocks;
        if (g != loaded) {
            for (int64_t j = 0; j < n_kv; ++j) {
                const auto * k = reinterpret_cast<const float *>(static_cast<const char *>(keys->data) + j * keys->nb[1] +
                                                                 g * keys->nb[2]);
                for (int64_t d = 0; d < hd; ++d) t.keys_t[size_t(d * padded + j)] = k[d];
            }
            for (int64_t d = 0; d < hd; ++d) {
                const auto * v = reinterpret_cast<const float *>(static_cast<const char *>(vals->data) + d * vals->nb[1] +
                                                                 g * vals->nb[2]);
                for (int64_t j = 0; j < n_kv; ++j) t.values[size_t(j * hd + d)] = v[j];
            }
            loaded = g;
        }
        for (int64_t h = g * per_kv; h < (g + 1) * per_kv; ++h) {
            const int64_t i_end = std::min(n, (b + 1) * k_rows_per_task);
            for (int64_t i0 = b * k_rows_per_task; i0 < i_end; i0 += k_rows) {
                const int rows = int(std::min<int64_t>(k_rows, i_end - i0));
                rows_attention(t, q, mask, dst, h, i0, rows, hd, padded, n_kv, scale);
            }
        }
    }
}

#endif  // KAZEIA_X86

}  // namespace

ggml_tensor * prefill_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * keys, ggml_tensor * values,
                                ggml_tensor * mask) {
#ifdef KAZEIA_X86
    const bool ggml_only = measurement_switches_in_force().ggml_products;
    const int64_t hd = q->ne[0];
    if (ggml_only || !cpu_has_avx512f() || q->type != GGML_TYPE_F32 || keys->type != GGML_TYPE_F32 ||
        values->type != GGML_TYPE_F32 || mask->type != GGML_TYPE_F32 || hd % 16 != 0 || !ggml_is_contiguous(q) ||
        keys->ne[0] != hd || values->ne[1] != hd || values->ne[0] != keys->ne[1] || keys->ne[2] != values->ne[2] ||
        q->ne[1] % keys->ne[2] != 0 || mask->ne[0] != keys->ne[1] || mask->ne[1] != q->ne[2] ||
        keys->nb[0] != sizeof(float) || values->nb[0] != sizeof(float) || mask->nb[0] != sizeof(float)) {
        return nullptr;
    }
    ggml_tensor * args[] = {q, keys, values, mask};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, hd * q->ne[1], q->ne[2], 1, 1, args, 4, attention_op, GGML_N_TASKS_MAX,
                          nullptr);
#else
    (void)ctx, (void)q, (void)keys, (void)values, (void)mask;
    return nullptr;
#endif
}

}  // namespace kazeia
