#include "kernels/custom_ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/gemm_bf16.h"

namespace kazeia {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KAZEIA_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KAZEIA_SIMD_CLONES
#endif

// sin(v)^2 via Cody-Waite reduction by pi (the square needs no quadrant sign) and a degree-11
// odd polynomial on [-pi/2, pi/2]: absolute error below 2e-7 for |v| < 1e5. Branch-free
// arithmetic only, so the vectorised body and the scalar tail compute identical values
// (this file is compiled with -ffp-contract=off).
inline float sin_squared(float v) {
    const float inv_pi = 0.318309886183790671f;
    const float pi_hi = 3.14159202575683593750f;      // 12 trailing zero bits: k * pi_hi is exact
    const float pi_lo = 6.27832832833519205451e-07f;
    const float k = std::nearbyint(v * inv_pi);
    const float r = (v - k * pi_hi) - k * pi_lo;
    const float r2 = r * r;
    float p = -2.3889859e-08f;
    p = p * r2 + 2.7525562e-06f;
    p = p * r2 - 1.9840874e-04f;
    p = p * r2 + 8.3333310e-03f;
    p = p * r2 - 1.6666667e-01f;
    const float s = r + r * r2 * p;
    return s * s;
}

KAZEIA_SIMD_CLONES
void snake_row(const float * x, float * y, const float * alpha, const float * inv_beta, int64_t channels) {
    for (int64_t c = 0; c < channels; ++c) {
        y[c] = x[c] + inv_beta[c] * sin_squared(x[c] * alpha[c]);
    }
}

void snake_op(ggml_tensor * dst, const ggml_tensor * x, const ggml_tensor * alpha, const ggml_tensor * inv_beta,
              int ith, int nth, void *) {
    const int64_t channels = x->ne[0];
    const int64_t rows = ggml_nrows(x);
    const int64_t per = (rows + nth - 1) / nth;
    const int64_t r0 = per * ith;
    const int64_t r1 = std::min(rows, r0 + per);
    for (int64_t r = r0; r < r1; ++r) {
        snake_row(static_cast<const float *>(x->data) + r * channels, static_cast<float *>(dst->data) + r * channels,
                  static_cast<const float *>(alpha->data), static_cast<const float *>(inv_beta->data), channels);
    }
}

// the same, rounded to bf16 as it is written (for a bf16 product that reads it next)
void snake_bf16_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const int64_t channels = x->ne[0];
    const int64_t rows = ggml_nrows(x);
    const int64_t per = (rows + nth - 1) / nth;
    const int64_t r1 = std::min(rows, per * (ith + 1));
    thread_local std::vector<float> row;
    row.resize(size_t(channels));
    for (int64_t r = per * ith; r < r1; ++r) {
        snake_row(static_cast<const float *>(x->data) + r * channels, row.data(),
                  static_cast<const float *>(dst->src[1]->data), static_cast<const float *>(dst->src[2]->data), channels);
        to_bf16(row.data(), static_cast<uint16_t *>(dst->data) + r * channels, channels);
    }
}

void im2col_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const int64_t c = x->ne[0];
    const int64_t kernel = dst->ne[0] / c;
    const int64_t n = dst->ne[1];
    const int64_t dilation = kernel > 1 ? (x->ne[1] - n) / (kernel - 1) : 1;
    const int64_t per = (n + nth - 1) / nth;
    const int64_t t1 = std::min(n, per * (ith + 1));
    const auto * src = static_cast<const float *>(x->data);
    auto * out = static_cast<float *>(dst->data);
    for (int64_t t = per * ith; t < t1; ++t) {
        for (int64_t k = 0; k < kernel; ++k) {
            std::memcpy(out + (t * kernel + k) * c, src + (t + k * dilation) * c, size_t(c) * sizeof(float));
        }
    }
}

// sum of a[i] * b[i] in 16 independent lanes (vectorised without reassociating), then the lanes
KAZEIA_SIMD_CLONES
float dot_lanes(const float * a, const float * b, int64_t n) {
    float lane[16] = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 16; ++j) lane[j] += a[i + j] * b[i + j];
    }
    for (; i < n; ++i) lane[i % 16] += a[i] * b[i];
    float sum = 0.0f;
    for (float v : lane) sum += v;
    return sum;
}

// y[o, t] = sum over taps k of w[o, k] . x[:, t + k * dilation]; threads split the time axis
void conv_few_outputs_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t channels = x->ne[0], taps = w->ne[0] / channels, outputs = w->ne[1], n = dst->ne[1];
    const int64_t dilation = taps > 1 ? (x->ne[1] - n) / (taps - 1) : 0;
    const auto * wd = static_cast<const float *>(w->data);
    const auto * xd = static_cast<const float *>(x->data);
    auto * y = static_cast<float *>(dst->data);
    for (int64_t t = n * ith / nth; t < n * (ith + 1) / nth; ++t) {
        for (int64_t o = 0; o < outputs; ++o) {
            float sum = 0.0f;
            for (int64_t k = 0; k < taps; ++k) {
                sum += dot_lanes(wd + o * w->ne[0] + k * channels, xd + (t + k * dilation) * channels, channels);
            }
            y[t * outputs + o] = sum;
        }
    }
}

// x's bytes, then zeros to the end of dst (x may be a view of whole columns: contiguous)
void pad_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const size_t nx = ggml_nbytes(x), total = ggml_nbytes(dst);
    const size_t begin = total * size_t(ith) / size_t(nth), end = total * size_t(ith + 1) / size_t(nth);
    auto * out = static_cast<char *>(dst->data);
    if (begin < nx) std::memcpy(out + begin, static_cast<const char *>(x->data) + begin, std::min(end, nx) - begin);
    if (end > nx) std::memset(out + std::max(begin, nx), 0, end - std::max(begin, nx));
}

// [a ++ b] along time: both channel-major and contiguous, so two byte ranges, split across threads
void join_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const size_t na = ggml_nbytes(a), total = ggml_nbytes(dst);
    const size_t begin = total * size_t(ith) / size_t(nth), end = total * size_t(ith + 1) / size_t(nth);
    auto * out = static_cast<char *>(dst->data);
    if (begin < na) std::memcpy(out + begin, static_cast<const char *>(a->data) + begin, std::min(end, na) - begin);
    if (end > na) {
        const size_t from = std::max(begin, na);
        std::memcpy(out + from, static_cast<const char *>(b->data) + (from - na), end - from);
    }
}

}  // namespace

ggml_tensor * im2col_channel_major(ggml_context * ctx, ggml_tensor * x, int kernel, int dilation, bool standard) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && ggml_is_contiguous(x));
    const int64_t n = x->ne[1] - int64_t(kernel - 1) * dilation;
    GGML_ASSERT(n > 0);
    if (standard) {
        ggml_tensor * cols = nullptr;
        for (int k = 0; k < kernel; ++k) {
            ggml_tensor * window = ggml_view_2d(ctx, x, x->ne[0], n, x->nb[1], size_t(k) * dilation * x->nb[1]);
            cols = cols ? ggml_concat(ctx, cols, window, 0) : window;
        }
        return cols;
    }
    ggml_tensor * args[] = {x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0] * kernel, n, 1, 1, args, 1, im2col_op, GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor * conv_few_outputs(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, int dilation) {
    GGML_ASSERT(w->type == GGML_TYPE_F32 && x->type == GGML_TYPE_F32 && ggml_is_contiguous(w) && ggml_is_contiguous(x));
    GGML_ASSERT(ggml_n_dims(w) <= 2 && ggml_n_dims(x) <= 2 && w->ne[0] % x->ne[0] == 0);
    const int64_t taps = w->ne[0] / x->ne[0], n = x->ne[1] - (taps - 1) * dilation;
    GGML_ASSERT(n > 0);
    ggml_tensor * args[] = {w, x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], n, 1, 1, args, 2, conv_few_outputs_op, GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor * pad_columns(ggml_context * ctx, ggml_tensor * x, int64_t columns, bool standard) {
    if (standard) return ggml_pad(ctx, x, 0, int(columns - x->ne[1]), 0, 0);
    GGML_ASSERT(ggml_is_contiguous(x) && ggml_n_dims(x) <= 2 && columns >= x->ne[1]);
    ggml_tensor * args[] = {x};
    return ggml_custom_4d(ctx, x->type, x->ne[0], columns, 1, 1, args, 1, pad_op, GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor * join_columns(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, bool standard) {
    if (standard) return ggml_concat(ctx, a, b, 1);
    GGML_ASSERT(a->type == b->type && a->ne[0] == b->ne[0] && ggml_is_contiguous(a) && ggml_is_contiguous(b));
    GGML_ASSERT(ggml_n_dims(a) <= 2 && ggml_n_dims(b) <= 2);
    ggml_tensor * args[] = {a, b};
    return ggml_custom_4d(ctx, a->type, a->ne[0], a->ne[1] + b->ne[1], 1, 1, args, 2, join_op, GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor * snake_beta(ggml_context * ctx, ggml_tensor * x, ggml_tensor * alpha, ggml_tensor * inv_beta,
                         bool standard, ggml_type out) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && ggml_is_contiguous(x));
    GGML_ASSERT(alpha->ne[0] == x->ne[0] && inv_beta->ne[0] == x->ne[0]);
    GGML_ASSERT(out == GGML_TYPE_F32 || (out == GGML_TYPE_BF16 && !standard));
    if (standard) {
        ggml_tensor * s = ggml_sqr(ctx, ggml_sin(ctx, ggml_mul(ctx, x, alpha)));
        return ggml_add(ctx, x, ggml_mul(ctx, s, inv_beta));
    }
    if (out == GGML_TYPE_BF16) {
        ggml_tensor * args[] = {x, alpha, inv_beta};
        return ggml_custom_4d(ctx, GGML_TYPE_BF16, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 3, snake_bf16_op,
                              GGML_N_TASKS_MAX, nullptr);
    }
    return ggml_map_custom3(ctx, x, alpha, inv_beta, snake_op, GGML_N_TASKS_MAX, nullptr);
}

void snake_beta_rows(const float * x, float * y, const float * alpha, const float * inv_beta, int64_t channels,
                     int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) snake_row(x + r * channels, y + r * channels, alpha, inv_beta, channels);
}

}  // namespace kazeia
