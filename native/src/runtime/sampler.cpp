#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace kazeia {

namespace {
uint64_t splitmix64(uint64_t & x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

rng::rng(uint64_t seed) {
    for (auto & s : s_) s = splitmix64(seed);
}

uint64_t rng::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

double rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

int argmax(const std::vector<float> & v) {
    return int(std::max_element(v.begin(), v.end()) - v.begin());   // first of equal maxima, as torch
}

void process_talker_logits(std::vector<float> & logits, const std::vector<int32_t> & generated, float repetition_penalty,
                           bool block_eos, int eos_id, int suppress_from) {
    if (repetition_penalty != 1.0f) {
        for (int32_t id : std::set<int32_t>(generated.begin(), generated.end())) {
            float & s = logits[id];
            s = s > 0 ? s / repetition_penalty : s * repetition_penalty;
        }
    }
    if (block_eos) logits[eos_id] = -INFINITY;
    for (int i = suppress_from; i < int(logits.size()); ++i) {
        if (i != eos_id) logits[i] = -INFINITY;
    }
}

std::vector<float> gumbel_noise(rng & r, size_t n) {
    std::vector<float> g(n);
    for (auto & x : g) {
        const double u = (double(r.next() >> 11) + 0.5) * 0x1.0p-53;   // (0, 1)
        x = float(-std::log(-std::log(u)));
    }
    return g;
}

int sample_token(std::vector<float> & logits, const sampling_config & cfg, const float * noise) {
    if (!cfg.do_sample) return argmax(logits);
    const int n = int(logits.size());
    const float inv_t = 1.0f / cfg.temperature;   // a product, as the graph computes it
    for (auto & l : logits) l *= inv_t;
    std::vector<bool> keep(n, true);
    if (cfg.top_k > 0 && cfg.top_k < n) {
        std::vector<float> sorted(logits);
        std::nth_element(sorted.begin(), sorted.begin() + (cfg.top_k - 1), sorted.end(), std::greater<float>());
        const float kth = sorted[cfg.top_k - 1];
        for (int i = 0; i < n; ++i) keep[i] = logits[i] >= kth;   // ties with the k-th are kept, as HF does
    }
    if (cfg.top_p < 1.0f) {
        // HF: softmax of the kept logits; drop the lowest tokens while their cumulative probability
        // (ascending) stays <= 1 - top_p
        float mx = -INFINITY;
        for (int i = 0; i < n; ++i) if (keep[i]) mx = std::max(mx, logits[i]);
        std::vector<double> p(n, 0.0);
        double sum = 0;
        for (int i = 0; i < n; ++i) if (keep[i]) sum += p[i] = std::exp(double(logits[i]) - mx);
        std::vector<int> order;
        for (int i = 0; i < n; ++i) if (keep[i]) order.push_back(i);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] < p[b]; });
        double cum = 0;
        for (size_t i = 0; i + 1 < order.size(); ++i) {
            cum += p[order[i]] / sum;
            if (cum > 1.0 - cfg.top_p) break;
            keep[order[i]] = false;
        }
    }
    int best = -1;
    float best_v = -INFINITY;
    for (int i = 0; i < n; ++i) {
        if (!keep[i]) continue;
        const float v = logits[i] + noise[i];
        if (best < 0 || v > best_v) {
            best = i;
            best_v = v;
        }
    }
    // no token kept (NaN logits fail every comparison): the first largest rather than an id of -1
    return best >= 0 ? best : argmax(logits);
}

std::vector<int32_t> sample_tokens(const std::vector<float> & logits, const sampling_config & cfg, uint64_t seed, int n) {
    rng r(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        std::vector<float> l = logits;
        const std::vector<float> noise = gumbel_noise(r, l.size());
        out.push_back(sample_token(l, cfg, noise.data()));
    }
    return out;
}

}  // namespace kazeia
