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

int sample_token(std::vector<float> & logits, const sampling_config & cfg, rng & r) {
    if (!cfg.do_sample) return argmax(logits);
    const int n = int(logits.size());
    if (cfg.temperature > 0 && cfg.temperature != 1.0f) {
        for (auto & l : logits) l /= cfg.temperature;
    }
    if (cfg.top_k > 0 && cfg.top_k < n) {
        std::vector<float> sorted(logits);
        std::nth_element(sorted.begin(), sorted.begin() + (cfg.top_k - 1), sorted.end(), std::greater<float>());
        const float kth = sorted[cfg.top_k - 1];
        for (auto & l : logits) {
            if (l < kth) l = -INFINITY;   // values equal to the k-th are kept, as HF does
        }
    }
    const float mx = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += p[i] = std::exp(double(logits[i]) - mx);
    for (auto & x : p) x /= sum;
    if (cfg.top_p < 1.0f) {
        // HF: drop the lowest tokens whose cumulative probability (ascending) stays <= 1 - top_p
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] < p[b]; });
        double cum = 0;
        for (int i = 0; i < n - 1; ++i) {
            cum += p[order[i]];
            if (cum <= 1.0 - cfg.top_p) p[order[i]] = 0;
            else break;
        }
        double s2 = 0;
        for (double x : p) s2 += x;
        for (auto & x : p) x /= s2;
    }
    const double u = r.uniform();
    double cum = 0;
    int last = 0;
    for (int i = 0; i < n; ++i) {
        if (p[i] <= 0) continue;
        last = i;
        cum += p[i];
        if (u < cum) return i;
    }
    return last;
}

}  // namespace kazeia
