#include "checks/product_check.h"

#include "checks/kernel_checks.h"
#include "graphs/blocks.h"
#include "kernels/custom_ops.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_fma.h"
#include "kernels/gemv_q8_0.h"
#include "kernels/prefill_attention.h"
#include "kernels/products.h"
#include "kernels/winograd_conv.h"
#include "runtime/type_names.h"
#include "kernels/panel_claims.h"
#include "weights/weight_copies.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "ggml-backend.h"
#include "graphs/graph_runner.h"

namespace kazeia {
namespace {

// W [rows, cols] of `type`, quantised by ggml from f32 values, in CPU memory.
struct cpu_weight {
    ggml_context * ctx;
    ggml_backend_buffer_t buf;
    ggml_tensor * t;
    cpu_weight(ggml_type type, int64_t rows, int64_t cols, const float * values) {
        ggml_init_params params{ggml_tensor_overhead() * 2, nullptr, true};
        ctx = ggml_init(params);
        t = ggml_new_tensor_2d(ctx, type, cols, rows);
        buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type());
        std::vector<uint8_t> q(ggml_nbytes(t));
        ggml_quantize_chunk(type, values, q.data(), 0, rows, cols, nullptr);
        ggml_backend_tensor_set(t, q.data(), 0, q.size());
    }
    ~cpu_weight() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
    }
    cpu_weight(const cpu_weight &) = delete;
    cpu_weight & operator=(const cpu_weight &) = delete;
};

}  // namespace

std::vector<std::vector<float>> compare_products(ggml_type type, int64_t rows, int64_t cols, int64_t n, uint64_t seed,
                                                 int threads, const std::vector<product_builder> & builders) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(cols * n));
    for (float & v : w) v = normal(gen);
    for (float & v : x) v = normal(gen);
    const cpu_weight wq(type, rows, cols, w.data());
    graph_runner runner(std::make_shared<thread_pool>(threads));
    std::vector<std::vector<float>> out;
    for (const product_builder & build : builders) {
        ggml_context * g = runner.begin();
        ggml_tensor * xt = ggml_new_tensor_2d(g, GGML_TYPE_F32, cols, n);
        ggml_set_input(xt);
        ggml_tensor * y = build(g, wq.t, xt);
        out.emplace_back();
        if (!y) continue;
        ggml_set_output(y);
        ggml_build_forward_expand(runner.graph(), y);
        runner.allocate();
        ggml_backend_tensor_set(xt, x.data(), 0, ggml_nbytes(xt));
        runner.compute();
        out.back().resize(size_t(ggml_nelements(y)));
        ggml_backend_tensor_get(y, out.back().data(), 0, ggml_nbytes(y));
    }
    return out;
}

double gemm_gflops_of(ggml_type type, int64_t rows, int64_t cols, int64_t n, int threads, int reps, bool kazeia) {
    std::mt19937_64 gen(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(size_t(rows * cols)), x(size_t(cols * n));
    for (float & v : w) v = normal(gen);
    for (float & v : x) v = normal(gen);
    const cpu_weight wq(type, rows, cols, w.data());
    graph_runner runner(std::make_shared<thread_pool>(threads));
    ggml_context * g = runner.begin();
    ggml_tensor * xt = ggml_new_tensor_2d(g, GGML_TYPE_F32, cols, n);
    ggml_set_input(xt);
    weight_copies lanes(nullptr, cpu_lanes_layout());   // the layout the talker and code predictor get
    ggml_tensor * y = !kazeia                                             ? ggml_mul_mat(g, wq.t, xt)
                      : type == GGML_TYPE_BF16 || type == GGML_TYPE_F16 ? product_any_columns(g, wq.t, xt, true)
                                                                        : product(g, lanes(wq.t), xt, true);
    ggml_set_output(y);
    ggml_build_forward_expand(runner.graph(), y);
    runner.allocate();
    ggml_backend_tensor_set(xt, x.data(), 0, ggml_nbytes(xt));
    runner.compute();   // warm-up
    double best = 1e30;
    for (int i = 0; i < std::max(reps, 1); ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        runner.compute();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return 2.0 * double(rows) * double(cols) * double(n) / best / 1e9;
}

product_pair check_gemv_q8_0(int64_t rows, int64_t cols, uint64_t seed, bool avx2_only) {
    use_avx2_only(avx2_only);
    auto y = compare_products(GGML_TYPE_Q8_0, rows, cols, 1, seed, 2,
                              {ggml_mul_mat, [](ggml_context * c, ggml_tensor * w, ggml_tensor * x) { return gemv_q8_0(c, w, x); }});
    use_avx2_only(false);
    return {!y[1].empty(), y[0], y[1], {}};
}

product_pair check_gemv_k_quant(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
    auto ours = [](ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) { return gemv_k_quant(ctx, w, x); };
    auto y = compare_products(type_from_name(type), rows, cols, n, seed, 2, {ggml_mul_mat, ours});
    return {!y[1].empty(), y[0], y[1].empty() ? y[0] : y[1], {}};
}

product_pair check_repacked_matmul(int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
    weight_copies layout(nullptr, cpu_repack_layout());
    bool made = false;
    auto y = compare_products(GGML_TYPE_Q4_K, rows, cols, n, seed, 1,
                              {ggml_mul_mat, [&](ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
                                   ggml_tensor * r = layout(w);
                                   made = r != w;
                                   return ggml_mul_mat(ctx, r, x);
                               }});
    return {made, y[0], y[1], {}};
}

product_pair check_batch_columns(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
    auto batched = [](ggml_context * c, ggml_tensor * w, ggml_tensor * x) { return product(c, w, x, true, true); };
    auto alone = [](ggml_context * c, ggml_tensor * w, ggml_tensor * x) {
        ggml_tensor * y = nullptr;
        for (int64_t i = 0; i < x->ne[1]; ++i) {
            ggml_tensor * yi = product(c, w, ggml_view_2d(c, x, x->ne[0], 1, x->nb[1], i * x->nb[1]), true);
            y = y ? ggml_concat(c, y, yi, 1) : yi;
        }
        return y;
    };
    auto y = compare_products(type_from_name(type), rows, cols, n, seed, 2, {batched, alone});
    return {true, y[0], y[1], {}};
}

product_pair check_gemm_int8(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
    auto dequantised = [](ggml_context * c, ggml_tensor * w, ggml_tensor * x) {
        return ggml_mul_mat(c, ggml_cast(c, w, GGML_TYPE_F32), x);
    };
    auto y = compare_products(type_from_name(type), rows, cols, n, seed, 2, {ggml_mul_mat, gemm_int8, dequantised});
    return {!y[1].empty(), y[0], y[1].empty() ? y[0] : y[1], y[2]};
}

product_pair check_lanes(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
    weight_copies layout(nullptr, cpu_lanes_layout());
    bool made = false;
    auto batch = [&](ggml_context * c, ggml_tensor * w, ggml_tensor * x) {
        ggml_tensor * l = layout(w);
        made = is_lanes(l);
        return product(c, l, x, true, true);
    };
    auto alone = [&](ggml_context * c, ggml_tensor * w, ggml_tensor * x) {
        ggml_tensor * l = layout(w);
        ggml_tensor * y = nullptr;
        for (int64_t i = 0; i < x->ne[1]; ++i) {
            ggml_tensor * yi = product(c, l, ggml_view_2d(c, x, x->ne[0], 1, x->nb[1], i * x->nb[1]), true);
            y = y ? ggml_concat(c, y, yi, 1) : yi;
        }
        return y;
    };
    auto y = compare_products(type_from_name(type), rows, cols, n, seed, 2, {ggml_mul_mat, batch, alone});
    return {made, y[0], y[1], y[2]};
}

product_pair check_lanes_fused(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
    weight_copies layout(nullptr, cpu_lanes_layout());
    bool made = false;
    auto one = [&](ggml_context * c, ggml_tensor * w, ggml_tensor * x) { return product(c, layout(w), x, true); };
    auto split = [&](ggml_context * c, ggml_tensor * w, ggml_tensor * x) -> ggml_tensor * {
        ggml_tensor * l = layout(w);
        const int64_t panels = l->ne[1] / 16;
        if (!is_lanes(l) || panels < 3) return nullptr;
        // rows (panels are 16 rows), cut off the threads' halves so that a thread spans two weights
        const int64_t cut[4] = {0, panels / 3 * 16, panels * 3 / 4 * 16, l->ne[1]};
        std::vector<ggml_tensor *> ws;
        for (int i = 0; i < 3; ++i) {
            ws.push_back(ggml_view_2d(c, l, l->ne[0], cut[i + 1] - cut[i], l->nb[1], size_t(cut[i]) * l->nb[1]));
            mark_lanes(ws.back());   // parts of a lanes weight, in its layout
        }
        const std::vector<ggml_tensor *> ys = products(c, ws, x, true);
        made = ys.size() == 3 && ys[0]->op == GGML_OP_VIEW && ys[0]->view_src == ys[1]->view_src;
        return ggml_concat(c, ggml_concat(c, ys[0], ys[1], 0), ys[2], 0);
    };
    auto y = compare_products(type_from_name(type), rows, cols, n, seed, 2, {one, split});
    if (y[1].empty()) return {false, y[0], y[0], {}};
    return {made, y[0], y[1], {}};
}

panel_claims_result check_panel_claims(int threads, int64_t panels, int64_t chunk, int launches) {
    auto claims = std::make_unique<panel_claims>();
    panel_claims_result out;
    out.per_thread.assign(size_t(threads), 0);
    for (int l = 0; l < launches; ++l) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(panels));
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                claim_panels(claims.get(), t, threads, panels, chunk, [&](int64_t a, int64_t b) {
                    for (int64_t p = a; p < b; ++p) hits[size_t(p)].fetch_add(1);
                    out.per_thread[size_t(t)] += b - a;
                    if (t == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                });
            });
        }
        for (std::thread & th : pool) th.join();
        for (const auto & h : hits) out.each_once = out.each_once && h.load() == 1;
        out.reset = out.reset && claims->done.value.load() == 0;
        for (const auto & c : claims->taken) out.reset = out.reset && c.value.load() == 0;
    }
    return out;
}

product_pair check_prefill_attention(int64_t head_dim, int64_t heads, int64_t kv_heads, int64_t n, int64_t pos0,
                                     uint64_t seed) {
    // keys [kv_dim, capacity] and values [capacity, kv_dim] laid out as a KV cache holds them
    const int64_t n_kv = pos0 + n, capacity = n_kv + 13, kv_dim = head_dim * kv_heads;
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> q(size_t(head_dim * heads * n)), k(size_t(kv_dim * capacity)), v(size_t(kv_dim * capacity));
    for (float & x : q) x = normal(gen);
    for (float & x : k) x = normal(gen);
    for (float & x : v) x = normal(gen);
    std::vector<float> mask(size_t(n_kv * n));
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n_kv; ++j) mask[size_t(i * n_kv + j)] = j <= pos0 + i ? 0.0f : -INFINITY;
    }
    graph_runner runner(std::make_shared<thread_pool>(2));
    product_pair out;
    for (int way = 0; way < 2; ++way) {
        ggml_context * g = runner.begin();
        ggml_tensor * qt = ggml_new_tensor_3d(g, GGML_TYPE_F32, head_dim, heads, n);
        ggml_tensor * kc = ggml_new_tensor_2d(g, GGML_TYPE_F32, kv_dim, capacity);
        ggml_tensor * vc = ggml_new_tensor_2d(g, GGML_TYPE_F32, capacity, kv_dim);
        ggml_tensor * mt = ggml_new_tensor_2d(g, GGML_TYPE_F32, n_kv, n);
        for (ggml_tensor * t : {qt, kc, vc, mt}) ggml_set_input(t);
        ggml_tensor * keys = ggml_view_3d(g, kc, head_dim, n_kv, kv_heads, kc->nb[1], head_dim * sizeof(float), 0);
        ggml_tensor * vals = ggml_view_3d(g, vc, n_kv, head_dim, kv_heads, vc->nb[1], vc->nb[1] * head_dim, 0);
        ggml_tensor * y = way == 0 ? attention(g, qt, keys, vals, mt) : prefill_attention(g, qt, keys, vals, mt);
        if (!y) break;
        out.applied = way == 1;
        ggml_set_output(y);
        ggml_build_forward_expand(runner.graph(), y);
        runner.allocate();
        ggml_backend_tensor_set(qt, q.data(), 0, ggml_nbytes(qt));
        ggml_backend_tensor_set(kc, k.data(), 0, ggml_nbytes(kc));
        ggml_backend_tensor_set(vc, v.data(), 0, ggml_nbytes(vc));
        ggml_backend_tensor_set(mt, mask.data(), 0, ggml_nbytes(mt));
        runner.compute();
        std::vector<float> & dst = way == 0 ? out.ggml : out.theirs;
        dst.resize(size_t(ggml_nelements(y)));
        ggml_backend_tensor_get(y, dst.data(), 0, ggml_nbytes(y));
    }
    if (!out.applied) out.theirs = out.ggml;
    return out;
}

namespace {

using gemm_fn = ggml_tensor * (*)(ggml_context *, ggml_tensor *, ggml_tensor *);
using conv_fn = ggml_tensor * (*)(ggml_context *, ggml_tensor *, ggml_tensor *, int, ggml_tensor *, ggml_tensor *);
using conv_applies_fn = bool (*)(const ggml_tensor *, int64_t);

// ggml_mul_mat, the decoder kernel `gemm` over all columns and column by column
product_pair check_decoder_gemm(ggml_type type, gemm_fn gemm, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
    auto alone = [gemm](ggml_context * c, ggml_tensor * w, ggml_tensor * x) -> ggml_tensor * {
        ggml_tensor * y = nullptr;
        for (int64_t i = 0; i < x->ne[1]; ++i) {
            ggml_tensor * yi = gemm(c, w, ggml_view_2d(c, x, x->ne[0], 1, x->nb[1], i * x->nb[1]));
            if (!yi) return nullptr;
            y = y ? ggml_concat(c, y, yi, 1) : yi;
        }
        return y;
    };
    auto y = compare_products(type, rows, cols, n, seed, 2, {ggml_mul_mat, gemm, alone});
    return {!y[1].empty(), y[0], y[1].empty() ? y[0] : y[1], y[2].empty() ? y[0] : y[2]};
}

// im2col + `gemm` + separate adds, the convolution op on f32 input and (bf16_input) on bf16 input
product_pair check_decoder_conv(ggml_type type, gemm_fn gemm, conv_fn conv, conv_applies_fn applies, bool bf16_input,
                                int64_t channels, int64_t rows, int taps, int dilation, int64_t n, uint64_t seed) {
    // compare_products' columns [taps x channels, n] read as a signal [channels, taps x n]; bias and
    // residual (one column repeated) come from its first values
    const int64_t length = taps * n, out = length - int64_t(taps - 1) * dilation;
    auto terms = [rows, out](ggml_context * c, ggml_tensor * x) {
        ggml_tensor * bias = ggml_cont(c, ggml_view_1d(c, x, rows, 0));
        ggml_tensor * column = ggml_view_2d(c, x, rows, 1, rows * sizeof(float), rows * sizeof(float));
        return std::make_pair(bias, ggml_repeat(c, column, ggml_new_tensor_2d(c, GGML_TYPE_F32, rows, out)));
    };
    auto signal = [channels, length](ggml_context * c, ggml_tensor * x) { return ggml_reshape_2d(c, x, channels, length); };
    auto separate = [&](ggml_context * c, ggml_tensor * w, ggml_tensor * x) -> ggml_tensor * {
        const auto [bias, residual] = terms(c, x);
        ggml_tensor * y = gemm(c, w, im2col_channel_major(c, signal(c, x), taps, dilation));
        return y ? ggml_add(c, residual, ggml_add(c, y, bias)) : nullptr;
    };
    auto fused = [&](ggml_context * c, ggml_tensor * w, ggml_tensor * x, bool bf16_in) -> ggml_tensor * {
        if (!applies(w, channels)) return nullptr;
        const auto [bias, residual] = terms(c, x);
        ggml_tensor * s = signal(c, x);
        return conv(c, w, bf16_in ? ggml_cast(c, s, GGML_TYPE_BF16) : s, dilation, bias, residual);
    };
    std::vector<product_builder> ways = {separate, [&](ggml_context * c, ggml_tensor * w, ggml_tensor * x) {
                                             return fused(c, w, x, false);
                                         }};
    if (bf16_input) ways.push_back([&](ggml_context * c, ggml_tensor * w, ggml_tensor * x) { return fused(c, w, x, true); });
    auto y = compare_products(type, rows, taps * channels, n, seed, 2, ways);
    return {!y[1].empty(), y[0], y[1], bf16_input ? y[2] : y[1]};
}

}  // namespace

product_pair check_gemm_bf16(int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
    return check_decoder_gemm(GGML_TYPE_BF16, gemm_bf16, rows, cols, n, seed);
}

product_pair check_conv_bf16(int64_t channels, int64_t rows, int taps, int dilation, int64_t n, uint64_t seed) {
    return check_decoder_conv(GGML_TYPE_BF16, gemm_bf16, conv_bf16, conv_bf16_applies, true, channels, rows, taps,
                              dilation, n, seed);
}

product_pair check_gemm_fma(const std::string & type, int64_t rows, int64_t cols, int64_t n, uint64_t seed) {
    return check_decoder_gemm(type_from_name(type), gemm_fma, rows, cols, n, seed);
}

product_pair check_conv_fma(const std::string & type, int64_t channels, int64_t rows, int taps, int dilation, int64_t n,
                            uint64_t seed) {
    return check_decoder_conv(type_from_name(type), gemm_fma, conv_fma, conv_fma_applies, false, channels, rows,
                              taps, dilation, n, seed);
}

double gemm_gflops(const std::string & type, int64_t rows, int64_t cols, int64_t n, int threads, int reps, bool kazeia) {
    return gemm_gflops_of(type_from_name(type), rows, cols, n, threads, reps, kazeia);
}

namespace {

// A check's weights in CPU memory: the direct form's [rows][taps][channels] in f32-product panels,
// the transformed form's U [points][rows][channels] in f32, and the bias.
struct laid_weights {
    ggml_context * ctx;
    ggml_backend_buffer_t buf;
    ggml_tensor * direct;
    ggml_tensor * u;
    ggml_tensor * bias;
    laid_weights(ggml_type type, int64_t channels, int taps, int64_t rows, int points, const std::vector<uint8_t> & panels,
                 const std::vector<uint8_t> & u_bytes, const std::vector<float> & bias_values) {
        ggml_init_params params{ggml_tensor_overhead() * 8, nullptr, true};
        ctx = ggml_init(params);
        direct = ggml_new_tensor_3d(ctx, type, channels, taps, rows);
        u = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, channels, rows, points);
        bias = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, rows);
        buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type());
        ggml_backend_tensor_set(direct, panels.data(), 0, panels.size());
        ggml_backend_tensor_set(u, u_bytes.data(), 0, u_bytes.size());
        ggml_backend_tensor_set(bias, bias_values.data(), 0, bias_values.size() * sizeof(float));
        mark_fma_panels(direct);
    }
    ~laid_weights() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
    }
    laid_weights(const laid_weights &) = delete;
    laid_weights & operator=(const laid_weights &) = delete;
};

}  // namespace

winograd_check check_conv_winograd(const std::string & type_name, int64_t channels, int64_t rows, int dilation,
                                   int64_t period, int64_t frames, uint64_t seed) {
    const ggml_type type = type_from_name(type_name);
    constexpr int taps = k_winograd_taps;
    winograd_check out;
    out.applied = winograd_applies(type, taps, channels, rows);
    if (!out.applied) return out;
    // (the signal holds Winograd's history; the direct form reads its last 6 dilations)
    const int64_t n = frames * period, history = winograd_history(dilation), length = n + history;
    const int64_t unread = history - int64_t(taps - 1) * dilation;
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    // weights as the file holds them, [rows][channels][taps], rounded to the type; input; bias; residual
    std::vector<float> w(static_cast<size_t>(rows * channels * taps)), x(static_cast<size_t>(channels * length)),
        bias(static_cast<size_t>(rows)), residual(static_cast<size_t>(rows * n));
    const float scale = 1.0f / std::sqrt(float(channels * taps));
    for (float & v : w) v = normal(gen) * scale;
    for (float & v : x) v = normal(gen);
    for (float & v : bias) v = normal(gen);
    for (float & v : residual) v = normal(gen);
    std::vector<uint8_t> file(w.size() * 2);
    for (size_t i = 0; i < w.size(); ++i) {
        uint16_t bits = type == GGML_TYPE_F16 ? ggml_fp32_to_fp16(w[i]) : ggml_fp32_to_bf16(w[i]).bits;
        std::memcpy(file.data() + 2 * i, &bits, 2);
        w[i] = type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(bits) : ggml_bf16_to_fp32(ggml_bf16_t{bits});
    }
    // tap-major [rows][taps][channels] in panels, as the decoder lays its convolutions out at load
    std::vector<uint8_t> tap_major(file.size());
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < channels; ++c) {
            for (int k = 0; k < taps; ++k) {
                std::memcpy(tap_major.data() + 2 * ((r * taps + k) * channels + c),
                            file.data() + 2 * ((r * channels + c) * taps + k), 2);
            }
        }
    }
    const std::vector<uint8_t> laid = fma_panels(tap_major, type, taps * channels, rows);
    const std::vector<uint8_t> u_bytes = winograd_weights(file, type, channels, rows);

    const laid_weights weights(type, channels, taps, rows, k_winograd_points, laid, u_bytes, bias);
    ggml_tensor * wt = weights.direct;
    ggml_tensor * ut = weights.u;
    ggml_tensor * bt = weights.bias;

    graph_runner runner(std::make_shared<thread_pool>(2));
    for (int way = 0; way < 4; ++way) {
        ggml_context * g = runner.begin();
        ggml_tensor * xt = ggml_new_tensor_2d(g, GGML_TYPE_F32, channels, length);
        ggml_tensor * rt = ggml_new_tensor_2d(g, GGML_TYPE_F32, rows, n);
        ggml_set_input(xt);
        ggml_set_input(rt);
        ggml_tensor * y = nullptr;
        if (way == 0) {
            ggml_tensor * direct_input = ggml_view_2d(g, xt, channels, length - unread, xt->nb[1], unread * xt->nb[1]);
            y = conv_fma(g, wt, direct_input, dilation, bt, rt);
        } else if (way == 1) {
            y = conv_winograd(g, ut, xt, dilation, period, bt, rt);
        } else if (way == 3) {
            y = conv_winograd(g, ut, xt, dilation, period, bt, rt, winograd_steps::separate);
        } else {
            for (int64_t f = 0; f < frames; ++f) {
                ggml_tensor * xf = ggml_view_2d(g, xt, channels, period + history, xt->nb[1], f * period * xt->nb[1]);
                ggml_tensor * rf = ggml_view_2d(g, rt, rows, period, rt->nb[1], f * period * rt->nb[1]);
                ggml_tensor * yf = conv_winograd(g, ut, xf, dilation, period, bt, rf);
                y = y ? ggml_concat(g, y, yf, 1) : yf;
            }
        }
        ggml_set_output(y);
        ggml_build_forward_expand(runner.graph(), y);
        runner.allocate();
        ggml_backend_tensor_set(xt, x.data(), 0, x.size() * sizeof(float));
        ggml_backend_tensor_set(rt, residual.data(), 0, residual.size() * sizeof(float));
        runner.compute();
        std::vector<float> & dst = way == 0 ? out.direct : way == 1 ? out.whole : way == 2 ? out.by_frame : out.separate;
        dst.resize(size_t(ggml_nelements(y)));
        ggml_backend_tensor_get(y, dst.data(), 0, ggml_nbytes(y));
    }

    out.exact.resize(size_t(rows * n));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
            double s = 0;
            for (int64_t c = 0; c < channels; ++c) {
                for (int k = 0; k < taps; ++k) {
                    s += double(w[size_t((r * channels + c) * taps + k)]) *
                         double(x[size_t((t + unread + k * dilation) * channels + c)]);
                }
            }
            out.exact[size_t(t * rows + r)] = float(s + double(bias[size_t(r)]) + double(residual[size_t(t * rows + r)]));
        }
    }
    return out;
}

winograd_check check_tconv_pairs(const std::string & type_name, int64_t c_in, int64_t rows, int64_t period,
                                 int64_t frames, uint64_t seed) {
    const ggml_type type = type_from_name(type_name);
    winograd_check out;
    out.applied = tconv_pairs_applies(type, c_in, rows);
    if (!out.applied) return out;
    const int64_t n = frames * period;
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    // two taps [rows][2][c_in] rounded to the type (tap 0 on the input before); input with one
    // column of history; bias
    std::vector<float> w(static_cast<size_t>(rows * 2 * c_in)), x(static_cast<size_t>(c_in * (n + 1))),
        bias(static_cast<size_t>(rows));
    const float scale = 1.0f / std::sqrt(float(2 * c_in));
    for (float & v : w) v = normal(gen) * scale;
    for (float & v : x) v = normal(gen);
    for (float & v : bias) v = normal(gen);
    std::vector<uint8_t> file(w.size() * 2);
    for (size_t i = 0; i < w.size(); ++i) {
        uint16_t bits = type == GGML_TYPE_F16 ? ggml_fp32_to_fp16(w[i]) : ggml_fp32_to_bf16(w[i]).bits;
        std::memcpy(file.data() + 2 * i, &bits, 2);
        w[i] = type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(bits) : ggml_bf16_to_fp32(ggml_bf16_t{bits});
    }
    const std::vector<uint8_t> laid = fma_panels(file, type, 2 * c_in, rows);
    const std::vector<uint8_t> u_bytes = tconv_pairs_weights(file, type, c_in, rows);

    const laid_weights weights(type, c_in, 2, rows, 3, laid, u_bytes, bias);   // (U: [A, A+B, B])
    ggml_tensor * wt = weights.direct;
    ggml_tensor * ut = weights.u;
    ggml_tensor * bt = weights.bias;

    graph_runner runner(std::make_shared<thread_pool>(2));
    for (int way = 0; way < 3; ++way) {
        ggml_context * g = runner.begin();
        ggml_tensor * xt = ggml_new_tensor_2d(g, GGML_TYPE_F32, c_in, n + 1);
        ggml_set_input(xt);
        ggml_tensor * y = nullptr;
        if (way == 0) {
            y = conv_fma(g, wt, xt, 1, bt, nullptr);
        } else if (way == 1) {
            y = tconv_pairs(g, ut, xt, bt);
        } else {
            for (int64_t f = 0; f < frames; ++f) {
                ggml_tensor * xf = ggml_view_2d(g, xt, c_in, period + 1, xt->nb[1], f * period * xt->nb[1]);
                ggml_tensor * yf = tconv_pairs(g, ut, ggml_cont(g, xf), bt);
                y = y ? ggml_concat(g, y, yf, 1) : yf;
            }
        }
        ggml_set_output(y);
        ggml_build_forward_expand(runner.graph(), y);
        runner.allocate();
        ggml_backend_tensor_set(xt, x.data(), 0, x.size() * sizeof(float));
        runner.compute();
        std::vector<float> & dst = way == 0 ? out.direct : way == 1 ? out.whole : out.by_frame;
        dst.resize(size_t(ggml_nelements(y)));
        ggml_backend_tensor_get(y, dst.data(), 0, ggml_nbytes(y));
    }

    out.exact.resize(size_t(rows * n));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
            double s = bias[size_t(r)];
            for (int tap = 0; tap < 2; ++tap) {
                for (int64_t c = 0; c < c_in; ++c) {
                    s += double(w[size_t((2 * r + tap) * c_in + c)]) * double(x[size_t((t + tap) * c_in + c)]);
                }
            }
            out.exact[size_t(t * rows + r)] = float(s);
        }
    }
    return out;
}

}  // namespace kazeia
