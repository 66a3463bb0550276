#include "kernels/gemm_int8.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/gemv_common.h"
#include "kernels/lanes_layout.h"
#include "kernels/lanes_tiles.h"
#include "kernels/panel_claims.h"

namespace kazeia {
namespace {

using namespace lanes;

#ifdef KAZEIA_X86
// The instruction set the lanes kernels use here: AVX-512 VNNI at level avx512, else AVX-VNNI at
// level avxvnni, else AVX2 alone at level avx2 (all: the same layout and numbers);
// nullptr below those.
const tile_kernels * lanes_kernels() {
    static const tile_kernels * const k = cpu_allows(cpu_level::avx512, {"avx512vnni"}) ? &k_avx512_vnni
                                          : cpu_allows(cpu_level::avxvnni, {"avxvnni"})  ? &k_avx_vnni
                                          : cpu_allows(cpu_level::avx2, {"avx2", "fma", "f16c"}) ? &k_avx2
                                                                                          : nullptr;
    return k;
}

// Each thread takes a contiguous run of panels (one linear stream).
void panel_range(int64_t rows, int ith, int nth, int64_t & p0, int64_t & p1) {
    const int64_t panels = rows / k_rows;
    p0 = panels * ith / nth;
    p1 = panels * (ith + 1) / nth;
}

void gemm_op(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t k = w->ne[0], rows = w->ne[1], n = x->ne[1];
    const bool q6 = w->type == GGML_TYPE_Q6_K;
    const int64_t group = q6 ? 16 : 32;
    // every thread quantises the columns itself (a custom op has no barrier to share them): K x n
    // values, a few per cent of the product's work at n = 8 and less beyond
    thread_local quantized_columns xq;
    thread_local scratch_tile tile;
    quantize_columns(x, group, lanes_kernels()->byte_bias, xq);
    int64_t p0, p1;
    panel_range(rows, ith, nth, p0, p1);
    float * y = static_cast<float *>(dst->data);
    for (int64_t p = p0; p < p1; p += 2) {
        const int np = int(std::min<int64_t>(2, p1 - p));
        panel_view views[2];
        load_tile(static_cast<const char *>(w->data) + p * k_rows * w->nb[1], w->nb[1], w->type, k, np, tile, views);
        lanes_kernels()->panels_product(views, np, xq, k, group, n, y, rows, p * k_rows);
    }
}

// A step (fewer than 8 columns) reads each thread's panels one at a time, a single linear stream
// (kernels/lanes_tiles.inc, lanes_panels). It used to read two side by side for more multiply-adds in flight, and the prefetchers lost both
// streams at every jump (panels are 13-40 KB): a 53 MB q6_K product read at 25-27 GB/s that way and
// at 38-52 one panel at a time, and talker + code predictor took 54 instead of 69 ms per frame
// (0.6B q6_k, alternating runs). Software prefetching ahead in both panels did not close the gap.
// Prompts keep eight columns (K-quants) or pairs (q8_0) per panel: they are compute-bound.
//
// dst = the products of src[0 .. m-1] (lanes weights of one type and K) with src[m] (x [K, n]), one
// after another: [N_0, n], then [N_1, n], ... Panels are numbered across the weights (one linear
// stream through them all) and x is quantised once for all of them.
void lanes_op(ggml_tensor * dst, int ith, int nth, void * userdata) {
    int m = 1;
    while (m + 1 < GGML_MAX_SRC && dst->src[m + 1]) ++m;
    const ggml_tensor * x = dst->src[m];
    const int64_t n = x->ne[1];
    const bool q6 = dst->src[0]->type == GGML_TYPE_Q6_K, q5 = dst->src[0]->type == GGML_TYPE_Q5_K;
    const tile_kernels * kernels = lanes_kernels();
    thread_local quantized_columns xq;
    // q6_K: offsets remove the +32 of its stored values; q5_K: the block sums its mins multiply
    quantize_columns(x, q6 ? 16 : 32, q6 ? 32 : q5 ? 1 : kernels->byte_bias, xq);
    int64_t panels = 0;
    for (int i = 0; i < m; ++i) panels += dst->src[i]->ne[1] / k_rows;
    auto compute = [&](int64_t q0, int64_t q1) {   // panels [q0, q1)
        float * y = static_cast<float *>(dst->data);
        for (int i = 0, first = 0; i < m; ++i) {
            const ggml_tensor * w = dst->src[i];
            const int64_t np = w->ne[1] / k_rows;
            const int64_t a = std::max<int64_t>(q0, first), b = std::min<int64_t>(q1, first + np);
            if (a < b) kernels->lanes_panels(w, xq, n, a - first, b - first, y);
            first += int(np);
            y += w->ne[1] * n;
        }
    };
    // chunks of about 64 KB of weights (q8_0 prompts: whole pairs of panels); a step reads a panel
    // in about a microsecond, and a claim on a thread's own run costs a few nanoseconds
    const ggml_tensor * w0 = dst->src[0];
    int64_t chunk = std::max<int64_t>(1, (int64_t(64) << 10) / (k_rows * int64_t(ggml_row_size(w0->type, w0->ne[0]))));
    if (!q6 && !q5 && n >= 8) chunk += chunk % 2;
    claim_panels(static_cast<panel_claims *>(userdata), ith, nth, panels, chunk, compute);
}

#endif  // KAZEIA_X86

// What a lanes tensor's `extra` points at. ggml's CPU extra buffer types (repacked layouts, AMX)
// read `extra` only of tensors in their own buffer types; lanes copies live in plain CPU buffers.
constexpr char k_lanes_mark[] = "kazeia lanes layout";

}  // namespace

bool lanes_available() {
#ifdef KAZEIA_X86
    return lanes_kernels() != nullptr;
#else
    return false;
#endif
}

ggml_tensor * gemm_int8(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
#ifdef KAZEIA_X86
    const int64_t block = w->type == GGML_TYPE_Q8_0 ? 32 : w->type == GGML_TYPE_Q6_K ? 256 : 0;
    if (block == 0 || w->ne[1] % k_rows != 0 || w->ne[0] % 64 != 0 || x->ne[1] < 2 || !lanes_available() ||
        is_lanes(w)) {
        return nullptr;
    }
    return one_column_op(ctx, w, x, w->type, block, gemm_op, /*any_columns=*/true);
#else
    (void)ctx, (void)w, (void)x;
    return nullptr;
#endif
}

bool lanes_eligible(const ggml_tensor * w) {
    return w && (w->type == GGML_TYPE_Q8_0 || w->type == GGML_TYPE_Q6_K || w->type == GGML_TYPE_Q5_K) && ggml_n_dims(w) == 2 &&
           w->ne[1] % k_rows == 0 && w->ne[0] % 64 == 0 && ggml_is_contiguous(w) && lanes_available();
}

void mark_lanes(ggml_tensor * w) {
    w->extra = const_cast<char *>(k_lanes_mark);
}

bool is_lanes(const ggml_tensor * w) {
    return w && w->extra == k_lanes_mark &&
           (w->type == GGML_TYPE_Q8_0 || w->type == GGML_TYPE_Q6_K || w->type == GGML_TYPE_Q5_K);
}

ggml_tensor * lanes_product(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
#ifdef KAZEIA_X86
    if (!is_lanes(w)) return nullptr;
    if (!ggml_is_contiguous(x)) x = ggml_cont(ctx, x);
    return one_column_op(ctx, w, x, w->type, w->type == GGML_TYPE_Q8_0 ? 32 : 256, lanes_op, /*any_columns=*/true,
                         panel_claims::create(ctx));
#else
    (void)ctx, (void)w, (void)x;
    return nullptr;
#endif
}

std::vector<ggml_tensor *> lanes_products(ggml_context * ctx, const std::vector<ggml_tensor *> & ws, ggml_tensor * x) {
#ifdef KAZEIA_X86
    if (ws.empty() || ws.size() + 1 >= GGML_MAX_SRC) return {};   // ggml_custom_4d takes fewer than GGML_MAX_SRC
    for (ggml_tensor * w : ws) {
        if (!is_lanes(w) || w->type != ws[0]->type || w->ne[0] != ws[0]->ne[0]) return {};
    }
    if (ws.size() == 1) return {lanes_product(ctx, ws[0], x)};
    if (!ggml_is_contiguous(x)) x = ggml_cont(ctx, x);
    if (x->type != GGML_TYPE_F32 || x->ne[0] != ws[0]->ne[0] || ggml_n_dims(x) > 2) return {};
    int64_t rows = 0;
    std::vector<ggml_tensor *> args(ws);
    for (ggml_tensor * w : ws) rows += w->ne[1];
    args.push_back(x);
    const int64_t n = x->ne[1];
    ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, rows * n, 1, 1, 1, args.data(), int(args.size()), lanes_op,
                                     GGML_N_TASKS_MAX, panel_claims::create(ctx));
    std::vector<ggml_tensor *> out;
    size_t offset = 0;
    for (ggml_tensor * w : ws) {
        out.push_back(ggml_view_2d(ctx, y, w->ne[1], n, w->ne[1] * sizeof(float), offset));
        offset += size_t(w->ne[1] * n) * sizeof(float);
    }
    return out;
#else
    (void)ctx, (void)ws, (void)x;
    return {};
#endif
}

}  // namespace kazeia
