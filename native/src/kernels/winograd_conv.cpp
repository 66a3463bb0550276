#include "kernels/winograd_conv.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "kazeia/cpu_level.h"
#include "kernels/fma_forms.h"
#include "kernels/gemm_fma.h"

namespace kazeia {
namespace {

// The evaluation points (the tenth is infinity) and, per point, the factor that makes its row of
// the input transform whole numbers; the weight transform divides it out again.
constexpr double k_points[k_winograd_points - 1] = {0, 1, -1, 2, -2, 0.5, -0.5, 1.5, -1.5};
constexpr double k_row_scale[k_winograd_points] = {36, 90, 90, 2520, 2520, 45, 45, 315, 315, 16};

// B^T: the transposed inverse of the points' Vandermonde matrix, rows times k_row_scale.
constexpr float k_input_transform[k_winograd_points][k_winograd_points] = {
    {36, 0, -205, 0, 273, 0, -120, 0, 16, 0},
    {0, -36, -36, 169, 169, -104, -104, 16, 16, 0},
    {0, 36, -36, -169, 169, 104, -104, -16, 16, 0},
    {0, -18, -9, 98, 49, -112, -56, 32, 16, 0},
    {0, 18, -9, -98, 49, 112, -56, -32, 16, 0},
    {0, 72, 144, -122, -244, 58, 116, -8, -16, 0},
    {0, -72, 144, 122, -244, -58, 116, 8, -16, 0},
    {0, 24, 16, -126, -84, 126, 84, -24, -16, 0},
    {0, -24, 16, 126, -84, -126, 84, 24, -16, 0},
    {0, 36, 0, -205, 0, 273, 0, -120, 0, 16},
};

// The same rows as the tiles compute them (kernels/winograd_tiles.inc): rows 0 and 9 (the point 0
// on the even inputs, infinity on the odd ones) share their constants; rows 2k+1 and 2k+2 (the
// points +-a) share their even inputs' constants, and their odd inputs' differ in sign.
struct input_rows {
    float ends[5] = {}, even[4][4] = {}, odd[4][4] = {};
    constexpr input_rows() {
        for (int j = 0; j < 5; ++j) ends[j] = k_input_transform[0][2 * j];
        for (int k = 0; k < 4; ++k) {
            for (int j = 0; j < 4; ++j) {
                even[k][j] = k_input_transform[2 * k + 1][2 * j + 2];
                odd[k][j] = k_input_transform[2 * k + 1][2 * j + 1];
            }
        }
    }
    // whether the transform has exactly that structure
    constexpr bool holds() const {
        for (int l = 0; l < k_winograd_points; ++l) {
            const float end = l % 2 == 0 && l < 9 ? ends[l / 2] : 0.0f;
            if (k_input_transform[0][l] != end) return false;
            if (k_input_transform[k_winograd_points - 1][l] != (l % 2 == 1 ? ends[l / 2] : 0.0f)) return false;
            for (int k = 0; k < 4; ++k) {
                const float e = l % 2 == 0 && l >= 2 && l <= 8 ? even[k][l / 2 - 1] : 0.0f;
                const float o = l % 2 == 1 && l <= 7 ? odd[k][l / 2] : 0.0f;
                if (k_input_transform[2 * k + 1][l] != e + o || k_input_transform[2 * k + 2][l] != e - o) return false;
            }
        }
        return true;
    }
};
constexpr input_rows k_input_rows{};
static_assert(k_input_rows.holds(), "the input transform's rows pair up by points +-a");
constexpr const float (&k_end_rows)[5] = k_input_rows.ends;
constexpr const float (&k_pair_even)[4][4] = k_input_rows.even;
constexpr const float (&k_pair_odd)[4][4] = k_input_rows.odd;

// A^T by pairs: the point +a of pair k is k_points[2k + 1] (its -a follows); a, a^2 and a^3
// (dyadic: exact in f32); the first pair's a is 1
struct pair_powers {
    float v[4][3] = {};
    constexpr pair_powers() {
        for (int k = 0; k < 4; ++k) {
            const double a = k_points[2 * k + 1];
            v[k][0] = float(a), v[k][1] = float(a * a), v[k][2] = float(a * a * a);
        }
    }
};
constexpr pair_powers k_powers{};
constexpr const float (&k_pair_powers)[4][3] = k_powers.v;
static_assert(k_points[1] == 1 && k_points[2] == -1 && k_points[3] == -k_points[4] && k_points[5] == -k_points[6] &&
              k_points[7] == -k_points[8], "the points pair up as +-a, the first pair at 1");

// G[xi][k]: point^k / row scale; the infinite point takes the last tap.
double weight_transform(int xi, int k) {
    if (xi == k_winograd_points - 1) return k == k_winograd_taps - 1 ? 1.0 / k_row_scale[xi] : 0.0;
    return std::pow(k_points[xi], k) / k_row_scale[xi];
}

}  // namespace
}  // namespace kazeia

#ifdef KAZEIA_X86
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")
namespace kazeia::fma_products::avx512 {
#include "kernels/winograd_tiles.inc"
}
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace kazeia::fma_products::avx2 {
#include "kernels/winograd_tiles.inc"
}
#pragma GCC pop_options
#endif
#ifdef KAZEIA_ARM64
namespace kazeia::fma_products::neon {
#include "kernels/winograd_tiles.inc"
}
#endif

namespace kazeia {

const winograd_pattern & winograd_pattern_of(int64_t period, int64_t dilation) {
    static std::mutex guard;
    static std::map<std::pair<int64_t, int64_t>, std::unique_ptr<winograd_pattern>> made;
    std::lock_guard<std::mutex> lock(guard);
    auto & slot = made[{period, dilation}];
    if (!slot) {
        slot = std::make_unique<winograd_pattern>();
        slot->period = period;
        slot->dilation = dilation;
        for (int64_t r = 0; r < std::min(period, dilation); ++r) {
            const int64_t count = (period - r + dilation - 1) / dilation;
            const int64_t tiles = (count + k_winograd_outputs - 1) / k_winograd_outputs;
            const int64_t first = r + (count - tiles * k_winograd_outputs) * dilation;   // (before the frame where < 0)
            for (int64_t j = 0; j < tiles; ++j) slot->tiles.push_back(first + j * k_winograd_outputs * dilation);
        }
        std::sort(slot->tiles.begin(), slot->tiles.end());   // (in time order: the input tiles overlap in cache)
    }
    return *slot;
}

#ifdef KAZEIA_FMA_PRODUCTS
namespace {
using namespace fma_products;

void tile_in(const float * x, int64_t step, int64_t channels, float * out, int64_t out_step) {
    with_form([&](auto v) { winograd_tile_in(v, x, step, channels, out, out_step); });
}

void tile_out(const float * m, int64_t m_step, int64_t rows, const float * bias, const float * residual, float * y,
              int64_t y_step, int skip) {
    with_form([&](auto v) { winograd_tile_out(v, m, m_step, rows, bias, residual, y, y_step, skip); });
}

// A launch's tiles: the pattern repeated over its frames.
struct launch_plan {
    const winograd_pattern & p;
    int64_t frames;
    int64_t tiles() const { return frames * int64_t(p.tiles.size()); }
    // tile t's first output, from the launch's first output (its frame's start plus its place)
    int64_t tile_at(int64_t t) const {
        const int64_t per = int64_t(p.tiles.size());
        return t / per * p.period + p.tiles[size_t(t % per)];
    }
    // how many of tile t's first outputs lie before its frame (and are not kept)
    int64_t outside(int64_t t) const {
        const int64_t place = p.tiles[size_t(t % int64_t(p.tiles.size()))];
        return place < 0 ? (-place + p.dilation - 1) / p.dilation : 0;
    }
};

const winograd_pattern & pattern_of(void * userdata) { return *static_cast<const winograd_pattern *>(userdata); }

// src: [x]; dst [channels, 10 * tiles]: the transformed tiles, point after point (point xi's
// columns contiguous). A tile's outputs start at launch column `at`, its inputs at x's column
// at + 3 dilations (x holds 9 dilations of history, its first tap reads 6 back).
void input_op(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const winograd_pattern & p = pattern_of(userdata);
    const ggml_tensor * x = dst->src[0];
    const int64_t channels = x->ne[0], n = x->ne[1] - winograd_history(p.dilation);
    const launch_plan plan{p, n / p.period};
    const auto * in = static_cast<const float *>(x->data) + (k_winograd_outputs - 1) * p.dilation * channels;
    auto * out = static_cast<float *>(dst->data);
    const int64_t tiles = plan.tiles(), step = p.dilation * channels;
    for (int64_t t = tiles * ith / nth; t < tiles * (ith + 1) / nth; ++t) {
        tile_in(in + plan.tile_at(t) * channels, step, channels, out + t * channels, tiles * channels);
    }
}

// U's matrix for point xi as one launch of the f32 products reads it: [channels, rows], laid out
ggml_tensor matrix_of(const ggml_tensor * u, int xi) {
    ggml_tensor t = *u;
    t.ne[2] = 1;
    t.nb[3] = t.nb[2];
    t.data = static_cast<char *>(u->data) + xi * u->nb[2];
    return t;
}

// src: [u, transformed input]; dst [rows, 10 * tiles]: point xi's products of the tiles
void product_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * u = dst->src[0];
    const ggml_tensor * in = dst->src[1];
    const int64_t channels = u->ne[0], rows = u->ne[1], tiles = dst->ne[1] / k_winograd_points;
    const auto * cols = static_cast<const float *>(in->data);
    auto * y = static_cast<float *>(dst->data);
    for (int xi = 0; xi < k_winograd_points; ++xi) {
        const ggml_tensor uxi = matrix_of(u, xi);
        launch_share({&uxi, {cols + xi * tiles * channels, channels, 0, 1, channels}, {nullptr, nullptr},
                      y + xi * tiles * rows, tiles, true},
                     ith, nth);
    }
}

// src: [products, bias?, residual?]; dst [rows, n]
void output_op(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const winograd_pattern & p = pattern_of(userdata);
    const ggml_tensor * m = dst->src[0];
    const int64_t rows = dst->ne[0], n = dst->ne[1];
    const launch_plan plan{p, n / p.period};
    const int64_t tiles = plan.tiles();
    const auto * prods = static_cast<const float *>(m->data);
    const float * bias = dst->src[1] ? static_cast<const float *>(dst->src[1]->data) : nullptr;
    const float * residual = dst->src[2] ? static_cast<const float *>(dst->src[2]->data) : nullptr;
    auto * y = static_cast<float *>(dst->data);
    for (int64_t t = tiles * ith / nth; t < tiles * (ith + 1) / nth; ++t) {
        const int64_t skip = plan.outside(t), at = (plan.tile_at(t) + skip * p.dilation) * rows;   // the first kept
        tile_out(prods + t * rows, tiles * rows, rows, bias, residual ? residual + at : nullptr, y + at, p.dilation * rows,
                 int(skip));
    }
}

// this thread's share of `tiles` in groups of `group`: fn(first tile, count) for each
template <typename Fn>
void each_group(int64_t tiles, int64_t group, int ith, int nth, Fn && fn) {
    const int64_t groups = (tiles + group - 1) / group;
    for (int64_t gi = groups * ith / nth; gi < groups * (ith + 1) / nth; ++gi) fn(gi * group, std::min(group, tiles - gi * group));
}

// The tiles one thread takes at a time in the fused form: their transformed input and products
// (10 x (channels + rows) values a tile) within ~512 KB, a whole number of the products' column
// tiles, at most one chunk of them.
int64_t fused_group_tiles(int64_t channels, int64_t rows) {
    const int64_t fit = k_fused_tile_bytes / (k_winograd_points * (channels + rows) * int64_t(sizeof(float)));
    return std::clamp<int64_t>(fit / 6 * 6, 6, k_chunk_columns);
}

// src: [u, x, bias?, residual?]; dst [rows, n]: all three steps, a group of tiles at a time in this
// thread's cache (transform in, the ten products, transform out), for U small enough to stay in
// cache beside them. The same steps in the same order as the three ops: the same bits.
void fused_op(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const winograd_pattern & p = pattern_of(userdata);
    const ggml_tensor * u = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t channels = u->ne[0], rows = u->ne[1], n = dst->ne[1];
    const launch_plan plan{p, n / p.period};
    const int64_t tiles = plan.tiles(), group = fused_group_tiles(channels, rows);
    const auto * in = static_cast<const float *>(x->data) + (k_winograd_outputs - 1) * p.dilation * channels;
    const float * bias = dst->src[2] ? static_cast<const float *>(dst->src[2]->data) : nullptr;
    const float * residual = dst->src[3] ? static_cast<const float *>(dst->src[3]->data) : nullptr;
    auto * y = static_cast<float *>(dst->data);
    thread_local std::vector<float> transformed, products;
    transformed.resize(size_t(k_winograd_points * group * channels));
    products.resize(size_t(k_winograd_points * group * rows));
    each_group(tiles, group, ith, nth, [&](int64_t t0, int64_t count) {
        for (int64_t t = 0; t < count; ++t) {
            tile_in(in + plan.tile_at(t0 + t) * channels, p.dilation * channels, channels, transformed.data() + t * channels,
                    count * channels);
        }
        for (int xi = 0; xi < k_winograd_points; ++xi) {
            const ggml_tensor uxi = matrix_of(u, xi);
            launch_share({&uxi, {transformed.data() + xi * count * channels, channels, 0, 1, channels}, {nullptr, nullptr},
                          products.data() + xi * count * rows, count, true},
                         0, 1);
        }
        for (int64_t t = 0; t < count; ++t) {
            const int64_t skip = plan.outside(t0 + t), at = (plan.tile_at(t0 + t) + skip * p.dilation) * rows;
            tile_out(products.data() + t * rows, count * rows, rows, bias, residual ? residual + at : nullptr, y + at,
                     p.dilation * rows, int(skip));
        }
    });
}

constexpr int k_pair_points = 3;

// src: [u, x, bias]; dst [rows, n]: F(2, 2) over pairs of inputs, a group of tiles at a time per
// thread (its two differences, the three products, the two outputs); the middle input of a tile
// is multiplied where it lies in x.
void pairs_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * u = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t channels = u->ne[0], rows = u->ne[1], tiles = dst->ne[1] / 2;
    // (U in cache: groups that fit beside it; else one group a thread, so U passes once)
    const int64_t per_tile = (2 * channels + k_pair_points * rows) * int64_t(sizeof(float));
    const int64_t budget = int64_t(ggml_nbytes(u)) <= k_fused_weight_bytes ? k_fused_tile_bytes : 8 * k_fused_tile_bytes;
    const int64_t group = std::clamp<int64_t>(budget / per_tile, 6, std::max<int64_t>(6, (tiles + nth - 1) / nth));
    const auto * in = static_cast<const float *>(x->data);   // (tile t's inputs: columns 2t, 2t + 1, 2t + 2)
    const auto * bias = static_cast<const float *>(dst->src[2]->data);
    auto * y = static_cast<float *>(dst->data);
    thread_local std::vector<float> differences, products;
    differences.resize(size_t(2 * group * channels));
    products.resize(size_t(k_pair_points * group * rows));
    each_group(tiles, group, ith, nth, [&](int64_t t0, int64_t count) {
        for (int64_t t = 0; t < count; ++t) {
            with_form([&](auto v) {
                pair_tile_in(v, in + 2 * (t0 + t) * channels, channels, channels, differences.data() + t * channels,
                             count * channels);
            });
        }
        const column_source sources[k_pair_points] = {{differences.data(), channels, 0, 1, channels},
                                                      {in + (2 * t0 + 1) * channels, 2 * channels, 0, 1, channels},
                                                      {differences.data() + count * channels, channels, 0, 1, channels}};
        for (int p = 0; p < k_pair_points; ++p) {
            const ggml_tensor up = matrix_of(u, p);
            launch_share({&up, sources[p], {nullptr, nullptr}, products.data() + p * count * rows, count, true}, 0, 1);
        }
        for (int64_t t = 0; t < count; ++t) {
            with_form([&](auto v) {
                pair_tile_out(v, products.data() + t * rows, count * rows, rows, bias, y + 2 * (t0 + t) * rows, rows);
            });
        }
    });
}

// U's matrices laid out one after another in the f32 products' panels
std::vector<uint8_t> laid_matrices(const std::vector<float> & u, int matrices, int64_t channels, int64_t rows) {
    std::vector<uint8_t> out;
    out.reserve(u.size() * sizeof(float));
    for (int xi = 0; xi < matrices; ++xi) {
        const float * matrix = u.data() + xi * rows * channels;
        const std::vector<uint8_t> laid = with_form([&](auto v) { return panels_of(v, matrix, channels, rows); });
        out.insert(out.end(), laid.begin(), laid.end());
    }
    return out;
}

// a file's f16 or bf16 value i, in double
double weight_value(const std::vector<uint8_t> & bytes, ggml_type type, int64_t i) {
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    return double(type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(bits) : ggml_bf16_to_fp32(ggml_bf16_t{bits}));
}

}  // namespace
#endif  // KAZEIA_FMA_PRODUCTS

bool winograd_applies(ggml_type type, int taps, int64_t channels, int64_t rows) {
#ifdef KAZEIA_FMA_PRODUCTS
    // (whole registers of channels in every form: the transforms have no tail)
    return taps == k_winograd_taps && channels % 16 == 0 && !measurement_switches_in_force().no_winograd &&
           fma_panels_apply(type, int64_t(taps) * channels, rows);
#else
    (void)type, (void)taps, (void)channels, (void)rows;
    return false;
#endif
}

std::vector<uint8_t> winograd_weights(const std::vector<uint8_t> & file_bytes, ggml_type type, int64_t channels,
                                      int64_t rows) {
#ifdef KAZEIA_FMA_PRODUCTS
    if (!winograd_applies(type, k_winograd_taps, channels, rows) ||
        file_bytes.size() != size_t(rows * channels * k_winograd_taps) * 2) {
        throw std::invalid_argument("winograd_weights: not a convolution this form applies to");
    }
    // U[xi][row][channel] = sum_k G[xi][k] W[row][channel][k], in double, rounded once to f32
    std::vector<float> u(size_t(k_winograd_points * rows * channels));
    double g[k_winograd_points][k_winograd_taps];
    for (int xi = 0; xi < k_winograd_points; ++xi) {
        for (int k = 0; k < k_winograd_taps; ++k) g[xi][k] = weight_transform(xi, k);
    }
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < channels; ++c) {
            double w[k_winograd_taps];
            for (int k = 0; k < k_winograd_taps; ++k) {
                w[k] = weight_value(file_bytes, type, (r * channels + c) * k_winograd_taps + k);
            }
            for (int xi = 0; xi < k_winograd_points; ++xi) {
                double s = 0;
                for (int k = 0; k < k_winograd_taps; ++k) s += g[xi][k] * w[k];
                u[size_t((xi * rows + r) * channels + c)] = float(s);
            }
        }
    }
    return laid_matrices(u, k_winograd_points, channels, rows);
#else
    (void)file_bytes, (void)type, (void)channels, (void)rows;
    throw std::invalid_argument("winograd_weights: no f32 products on this CPU");
#endif
}

ggml_tensor * conv_winograd(ggml_context * ctx, ggml_tensor * u, ggml_tensor * x, int dilation, int64_t period,
                            ggml_tensor * bias, ggml_tensor * residual, winograd_steps steps) {
#ifdef KAZEIA_FMA_PRODUCTS
    const int64_t channels = u->ne[0], rows = u->ne[1], n = x->ne[1] - winograd_history(dilation);
    GGML_ASSERT(x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[0] == channels && u->type == GGML_TYPE_F32 &&
                u->ne[2] == k_winograd_points);
    GGML_ASSERT(period > 0 && n > 0 && n % period == 0 && (!residual || bias));
    const winograd_pattern & p = winograd_pattern_of(period, dilation);
    void * pattern = const_cast<winograd_pattern *>(&p);
    const int64_t tiles = n / period * int64_t(p.tiles.size());
    if (steps == winograd_steps::in_cache && ggml_nbytes(u) <= size_t(k_fused_weight_bytes)) {
        ggml_tensor * args[] = {u, x, bias, residual};
        return ggml_custom_4d(ctx, GGML_TYPE_F32, rows, n, 1, 1, args, residual ? 4 : bias ? 3 : 2, fused_op,
                              GGML_N_TASKS_MAX, pattern);
    }
    ggml_tensor * in_args[] = {x};
    ggml_tensor * in = ggml_custom_4d(ctx, GGML_TYPE_F32, channels, k_winograd_points * tiles, 1, 1, in_args, 1, input_op,
                                      GGML_N_TASKS_MAX, pattern);
    ggml_tensor * prod_args[] = {u, in};
    ggml_tensor * prods = ggml_custom_4d(ctx, GGML_TYPE_F32, rows, k_winograd_points * tiles, 1, 1, prod_args, 2, product_op,
                                         GGML_N_TASKS_MAX, nullptr);
    ggml_tensor * out_args[] = {prods, bias, residual};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, rows, n, 1, 1, out_args, residual ? 3 : bias ? 2 : 1, output_op,
                          GGML_N_TASKS_MAX, pattern);
#else
    (void)ctx, (void)u, (void)x, (void)dilation, (void)period, (void)bias, (void)residual;
    return nullptr;
#endif
}

bool tconv_pairs_applies(ggml_type type, int64_t c_in, int64_t rows) {
#ifdef KAZEIA_FMA_PRODUCTS
    // (whole registers of channels and rows in every form: the transforms have no tail)
    return c_in % 16 == 0 && !measurement_switches_in_force().no_winograd && fma_panels_apply(type, 2 * c_in, rows) &&
           k_pair_points * c_in * rows * int64_t(sizeof(float)) <= k_pairs_weight_bytes;
#else
    (void)type, (void)c_in, (void)rows;
    return false;
#endif
}

std::vector<uint8_t> tconv_pairs_weights(const std::vector<uint8_t> & two_taps, ggml_type type, int64_t c_in,
                                         int64_t rows) {
#ifdef KAZEIA_FMA_PRODUCTS
    if (!tconv_pairs_applies(type, c_in, rows) || two_taps.size() != size_t(rows * 2 * c_in) * 2) {
        throw std::invalid_argument("tconv_pairs_weights: not a transposed convolution this form applies to");
    }
    // U[p][row][channel]: A, A + B (exact in double, rounded once), B
    std::vector<float> u(size_t(k_pair_points * rows * c_in));
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < c_in; ++c) {
            const double a = weight_value(two_taps, type, 2 * r * c_in + c);
            const double b = weight_value(two_taps, type, (2 * r + 1) * c_in + c);
            const double points[k_pair_points] = {a, a + b, b};
            for (int p = 0; p < k_pair_points; ++p) u[size_t((p * rows + r) * c_in + c)] = float(points[p]);
        }
    }
    return laid_matrices(u, k_pair_points, c_in, rows);
#else
    (void)two_taps, (void)type, (void)c_in, (void)rows;
    throw std::invalid_argument("tconv_pairs_weights: no f32 products on this CPU");
#endif
}

ggml_tensor * tconv_pairs(ggml_context * ctx, ggml_tensor * u, ggml_tensor * x, ggml_tensor * bias) {
#ifdef KAZEIA_FMA_PRODUCTS
    const int64_t n = x->ne[1] - 1;
    GGML_ASSERT(x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[0] == u->ne[0] && u->type == GGML_TYPE_F32 &&
                u->ne[2] == k_pair_points && bias && bias->type == GGML_TYPE_F32 && bias->ne[0] == u->ne[1]);
    GGML_ASSERT(n > 0 && n % 2 == 0);
    ggml_tensor * args[] = {u, x, bias};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, u->ne[1], n, 1, 1, args, 3, pairs_op, GGML_N_TASKS_MAX, nullptr);
#else
    (void)ctx, (void)u, (void)x, (void)bias;
    return nullptr;
#endif
}

namespace {

// ggml_custom_4d's parameters as ggml keeps them in op_params (its ggml_custom_op_params)
struct custom_params {
    ggml_custom_op_t fun;
    int n_tasks;
    void * userdata;
};
static_assert(sizeof(custom_params) <= GGML_MAX_OP_PARAMS);

custom_params params_of(const ggml_tensor * t) {
    custom_params p{};
    if (t->op == GGML_OP_CUSTOM) std::memcpy(&p, t->op_params, sizeof p);
    return p;
}
ggml_custom_op_t custom_function(const ggml_tensor * t) { return params_of(t).fun; }

}  // namespace

bool is_winograd_op(const ggml_tensor * t) {
#ifdef KAZEIA_FMA_PRODUCTS
    const ggml_custom_op_t fun = custom_function(t);
    return fun && (fun == input_op || fun == product_op || fun == output_op || fun == fused_op || fun == pairs_op);
#else
    (void)t;
    return false;
#endif
}

int64_t winograd_product_macs(const ggml_tensor * t) {
#ifdef KAZEIA_FMA_PRODUCTS
    const ggml_custom_op_t fun = custom_function(t);
    const ggml_tensor * u = t->src[0];
    if (fun == product_op) return t->ne[1] * u->ne[0] * u->ne[1];   // (10 columns a tile, each a full product)
    if (fun == pairs_op) return t->ne[1] / 2 * k_pair_points * u->ne[0] * u->ne[1];
    if (fun == fused_op) {
        const winograd_pattern & p = pattern_of(params_of(t).userdata);
        return t->ne[1] / p.period * int64_t(p.tiles.size()) * k_winograd_points * u->ne[0] * u->ne[1];
    }
#else
    (void)t;
#endif
    return 0;
}

}  // namespace kazeia
