#include "kernels/gemm_fma.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/conv_launch.h"
#include "kernels/fma_forms.h"
namespace kazeia {
namespace {

#ifdef KAZEIA_FMA_PRODUCTS
using namespace fma_products;

// whole groups of 16 rows and values in every form, so that all multiply the same weights (the
// narrower forms read 16 rows as two registers of 8 or four of 4)
bool shape_applies(ggml_type type, int64_t row, int64_t rows) {
    constexpr int64_t lanes = 16;
    return form_lanes() && (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) && rows % lanes == 0 && row % lanes == 0;
}

bool weight_applies(const ggml_tensor * w, int64_t row) {
    return shape_applies(w->type, row, w->ne[ggml_n_dims(w) - 1]) && ggml_is_contiguous(w);
}

// What a tensor laid out in panels has in its `extra` (as the lanes layout marks its own), and
// what a launch over one is handed as its userdata: a view (the 2-D reshape of a convolution's
// kernel) does not carry `extra`.
constexpr char k_panels_mark[] = "kazeia f32-product panels";
void * panels_userdata(const ggml_tensor * w) { return w->extra == k_panels_mark ? const_cast<char *>(k_panels_mark) : nullptr; }

// src: [w, x, bias?, residual?]; x f32 [C, T] read in place, taps = the weight's row / C
void product_op(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    const int64_t n = dst->ne[1], channels = x->ne[0];
    const int taps = int(w->ne[0] / channels);
    const int64_t dilation = taps > 1 ? (x->ne[1] - n) / (taps - 1) : 0;
    const launch l{w,
                   {static_cast<const float *>(x->data), channels, dilation * channels, taps, channels},
                   {dst->src[2] ? static_cast<const float *>(dst->src[2]->data) : nullptr,
                    dst->src[3] ? static_cast<const float *>(dst->src[3]->data) : nullptr},
                   static_cast<float *>(dst->data),
                   n,
                   userdata == k_panels_mark};
    launch_share(l, ith, nth);
}
#endif  // KAZEIA_FMA_PRODUCTS

}  // namespace

bool gemm_fma_available() {
#ifdef KAZEIA_FMA_PRODUCTS
    return form_lanes() > 0;
#else
    return false;
#endif
}

ggml_tensor * gemm_fma(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
#ifdef KAZEIA_FMA_PRODUCTS
    if (ggml_n_dims(w) > 2 || !weight_applies(w, w->ne[0])) return nullptr;
    if (!ggml_is_contiguous(x)) x = ggml_cont(ctx, x);
    if (x->type != GGML_TYPE_F32 || x->ne[0] != w->ne[0] || x->ne[2] != 1 || x->ne[3] != 1) return nullptr;
    ggml_tensor * args[] = {w, x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, 2, product_op, GGML_N_TASKS_MAX,
                          panels_userdata(w));
#else
    (void)ctx, (void)w, (void)x;
    return nullptr;
#endif
}

bool conv_fma_applies(const ggml_tensor * w, int64_t channels) {
#ifdef KAZEIA_FMA_PRODUCTS
    const int64_t rows = w->ne[ggml_n_dims(w) - 1], row = ggml_nelements(w) / rows;
    return weight_applies(w, row) && row % channels == 0;
#else
    (void)w, (void)channels;
    return false;
#endif
}

ggml_tensor * conv_fma(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, int dilation, ggml_tensor * bias,
                       ggml_tensor * residual) {
    GGML_ASSERT(conv_fma_applies(w, x->ne[0]) && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x));
#ifdef KAZEIA_FMA_PRODUCTS
    return causal_conv_op(ctx, w, x, dilation, bias, residual, product_op, panels_userdata(w));
#else
    (void)ctx, (void)dilation, (void)bias, (void)residual;
    return nullptr;   // (never reached: nothing applies)
#endif
}

bool is_fma_product(const ggml_tensor * t) {
#ifdef KAZEIA_FMA_PRODUCTS
    if (t->op != GGML_OP_CUSTOM) return false;
    ggml_custom_op_t fun;
    std::memcpy(&fun, t->op_params, sizeof fun);   // ggml_custom_4d's parameters begin with the function
    return fun == product_op;
#else
    (void)t;
    return false;
#endif
}

bool fma_panels_apply(ggml_type type, int64_t row, int64_t rows) {
#ifdef KAZEIA_FMA_PRODUCTS
    return shape_applies(type, row, rows);
#else
    (void)type, (void)row, (void)rows;
    return false;
#endif
}

std::vector<uint8_t> fma_panels(const std::vector<uint8_t> & bytes, ggml_type type, int64_t row, int64_t rows) {
#ifdef KAZEIA_FMA_PRODUCTS
    if (!fma_panels_apply(type, row, rows) || bytes.size() != size_t(row * rows) * 2) {
        throw std::invalid_argument("fma_panels: not a weight the f32 products lay out");
    }
    const auto * values = reinterpret_cast<const uint16_t *>(bytes.data());
    return with_form([&](auto v) { return panels_of(v, values, row, rows); });
#else
    (void)bytes, (void)type, (void)row, (void)rows;
    throw std::invalid_argument("fma_panels: no f32 products on this CPU");
#endif
}

void mark_fma_panels(ggml_tensor * w) {
#ifdef KAZEIA_FMA_PRODUCTS
    w->extra = const_cast<char *>(k_panels_mark);
#else
    (void)w;
#endif
}

}  // namespace kazeia
