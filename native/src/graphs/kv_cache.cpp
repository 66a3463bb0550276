#include "graphs/kv_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ggml-cpu.h"

namespace kazeia {

kv_cache::kv_cache(int n_layers, int64_t kv_dim, ggml_backend_buffer_type_t buft)
    : n_layers_(n_layers), kv_dim_(kv_dim), buft_(buft) {}

kv_cache::~kv_cache() {
    if (buf_) ggml_backend_buffer_free(buf_);
    if (ctx_) ggml_free(ctx_);
}

void kv_cache::reserve(int64_t n_ctx) {
    if (n_ctx <= n_ctx_) return;
    n_ctx = (n_ctx + k_bucket - 1) / k_bucket * k_bucket;
    if (buf_) ggml_backend_buffer_free(buf_);
    if (ctx_) ggml_free(ctx_);
    buf_ = nullptr;
    k_.clear();
    v_.clear();
    n_ctx_ = 0;
    ggml_init_params params{ggml_tensor_overhead() * (2 * size_t(n_layers_) + 1), nullptr, true};
    ctx_ = ggml_init(params);
    for (int i = 0; i < n_layers_; ++i) {
        k_.push_back(ggml_new_tensor_2d(ctx_, GGML_TYPE_F32, kv_dim_, n_ctx));
        v_.push_back(ggml_new_tensor_2d(ctx_, GGML_TYPE_F32, n_ctx, kv_dim_));
    }
    buf_ = ggml_backend_alloc_ctx_tensors_from_buft(ctx_, buft_ ? buft_ : ggml_backend_cpu_buffer_type());
    if (!buf_) throw std::runtime_error("cannot allocate a KV cache of " + std::to_string(n_ctx) + " positions");
    n_ctx_ = n_ctx;
    written_ = 0;
    zeroed_ = 0;
    if (!ggml_backend_buffer_is_host(buf_)) {
        ggml_backend_buffer_clear(buf_, 0);
        zeroed_ = n_ctx;
    }
    static std::atomic<uint64_t> allocations{0};
    id_ = ++allocations;
}

// zeros at positions [p0, p1) of every layer (a host buffer)
void kv_cache::zero(int64_t p0, int64_t p1) {
    if (p1 <= p0) return;
    const size_t f = sizeof(float), n = size_t(p1 - p0);
    for (int i = 0; i < n_layers_; ++i) {
        std::memset(static_cast<char *>(k_[size_t(i)]->data) + size_t(p0) * k_[size_t(i)]->nb[1], 0, n * size_t(kv_dim_) * f);
        auto * v = static_cast<char *>(v_[size_t(i)]->data) + size_t(p0) * f;   // positions along each row
        for (int64_t d = 0; d < kv_dim_; ++d) std::memset(v + d * v_[size_t(i)]->nb[1], 0, n * f);
    }
}

void kv_cache::prepare(int64_t n, int64_t written) {
    n = std::min(n, n_ctx_);
    if (n > zeroed_ && n > written_) {
        zero(std::max(zeroed_, written_), n);
        zeroed_ = n;
    }
    written_ = std::max(written_, std::min(written, n_ctx_));
}

void kv_cache::clear() {
    if (!buf_ || written_ == 0) return;
    if (!ggml_backend_buffer_is_host(buf_)) {
        ggml_backend_buffer_clear(buf_, 0);
    } else {
        zero(0, written_);
        zeroed_ = std::max(zeroed_, written_);
    }
    written_ = 0;
}

kv_cache_pool::handle kv_cache_pool::take(int64_t n_ctx) {
    std::unique_ptr<kv_cache> c;
    {
        std::lock_guard<std::mutex> lock(m_);
        auto fits = idle_.end();
        for (auto it = idle_.begin(); it != idle_.end(); ++it) {
            if ((*it)->capacity() >= n_ctx && (fits == idle_.end() || (*it)->capacity() < (*fits)->capacity())) fits = it;
        }
        if (fits == idle_.end() && !idle_.empty()) fits = idle_.begin();
        if (fits != idle_.end()) {
            c = std::move(*fits);
            idle_.erase(fits);
        }
    }
    if (c) {
        c->clear();
    } else {
        c = std::make_unique<kv_cache>(n_layers_, kv_dim_, buft_);
    }
    c->reserve(n_ctx);
    return handle(c.release(), give_back{shared_from_this()});
}

void kv_cache_pool::give_back::operator()(kv_cache * c) const {
    std::unique_ptr<kv_cache> owned(c);
    if (!pool) return;
    std::lock_guard<std::mutex> lock(pool->m_);
    if (pool->idle_.size() < pool->keep_) pool->idle_.push_back(std::move(owned));
}

size_t kv_cache::bytes() const { return buf_ ? ggml_backend_buffer_get_size(buf_) : 0; }

std::vector<int64_t> kv_cache::value_cells(int64_t pos0, int64_t n) const {
    std::vector<int64_t> cells(size_t(n * kv_dim_));
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t d = 0; d < kv_dim_; ++d) cells[size_t(i * kv_dim_ + d)] = pos0 + i + d * n_ctx_;
    }
    return cells;
}

}  // namespace kazeia
