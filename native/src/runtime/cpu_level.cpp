#include "kazeia/cpu_level.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace kazeia {
namespace {

bool has(const char * feature) {
#if defined(__x86_64__) && defined(__GNUC__)
    // __builtin_cpu_supports needs a literal: the features Kazeia's kernels use, by name
    const std::string f = feature;
    if (f == "avx2") return __builtin_cpu_supports("avx2");
    if (f == "fma") return __builtin_cpu_supports("fma");
    if (f == "f16c") return __builtin_cpu_supports("f16c");
    if (f == "avx512f") return __builtin_cpu_supports("avx512f");
    if (f == "avx512bw") return __builtin_cpu_supports("avx512bw");
    if (f == "avx512vl") return __builtin_cpu_supports("avx512vl");
    if (f == "avx512vnni") return __builtin_cpu_supports("avx512vnni");
    if (f == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
    throw std::logic_error(std::string("cpu_level: unknown CPU feature ") + feature);
#else
    (void)feature;
    return false;
#endif
}

cpu_level detect() {
    if (!(has("avx2") && has("fma") && has("f16c"))) return cpu_level::generic;
    if (has("avx512f") && has("avx512bw") && has("avx512vl")) return cpu_level::avx512;
    return cpu_level::avx2;
}

}  // namespace

cpu_level cpu_level_detected() {
    static const cpu_level level = detect();
    return level;
}

std::string cpu_level_requested() {
    const char * v = std::getenv("KAZEIA_CPU");
    return v && *v ? v : "auto";
}

cpu_level cpu_level_in_force() {
    static std::atomic<int> kept{-1};
    if (const int k = kept.load(std::memory_order_relaxed); k >= 0) return static_cast<cpu_level>(k);
    const std::string asked = cpu_level_requested();
    cpu_level cap;
    if (asked == "auto" || asked == "avx512") cap = cpu_level::avx512;
    else if (asked == "avx2") cap = cpu_level::avx2;
    else if (asked == "generic") cap = cpu_level::generic;
    else throw std::invalid_argument("KAZEIA_CPU=" + asked + ": choose auto, avx512, avx2 or generic");
    const cpu_level have = cpu_level_detected();
    const cpu_level level = static_cast<int>(cap) < static_cast<int>(have) ? cap : have;
    kept.store(static_cast<int>(level), std::memory_order_relaxed);
    return level;
}

const measurement_switches & measurement_switches_in_force() {
    static const measurement_switches switches = [] {
        auto set = [](const char * name) { return std::getenv(name) != nullptr; };
        measurement_switches s;
        s.ggml_products = set("KAZEIA_GGML_PRODUCTS");
        s.no_lanes = set("KAZEIA_NO_LANES");
        s.keep_bf16 = set("KAZEIA_KEEP_BF16");
        s.no_huge_pages = set("KAZEIA_NO_HUGE_PAGES");
        return s;
    }();
    return switches;
}

const char * cpu_level_name(cpu_level level) {
    switch (level) {
        case cpu_level::avx512: return "avx512";
        case cpu_level::avx2: return "avx2";
        default: return "generic";
    }
}

bool cpu_allows(cpu_level level, std::initializer_list<const char *> features) {
    cpu_level in_force;
    try {
        in_force = cpu_level_in_force();
    } catch (const std::invalid_argument &) {
        return false;
    }
    if (static_cast<int>(in_force) < static_cast<int>(level)) return false;
    for (const char * f : features) {
        if (!has(f)) return false;
    }
    return true;
}

std::vector<kernel_status> kernel_statuses() {
    struct entry {
        const char * id;
        const char * name;
        const char * needs;
        cpu_level level;
        std::initializer_list<const char *> features;
        const char * otherwise;
    };
    const entry entries[] = {
        {"lanes", "lanes q8_0/q6_K/q5_K (weights re-laid at load; steps, batches, prompts)", "avx512 + AVX-512 VNNI",
         cpu_level::avx512, {"avx512vnni"},
         "weights stay in the file's layout: the one-column kernels below for steps (and q6_K/q5_K "
         "prompts), ggml's mul_mat for q8_0 prompts and for q4_K"},
        {"gemm_int8", "int8 GEMM for prompts (row-layout q8_0/q6_K)", "avx512 + AVX-512 VNNI", cpu_level::avx512, {"avx512vnni"},
         "ggml's mul_mat (its q8_0/q6_K vec_dot, llamafile where built)"},
        {"gemv_q8_0_vnni", "one-column q8_0 (VNNI form)", "avx512 + AVX-512 VNNI", cpu_level::avx512, {"avx512vnni"},
         "the AVX2 form of the same kernel"},
        {"gemv_q8_0", "one-column q8_0 (AVX2 form)", "avx2", cpu_level::avx2, {}, "ggml's q8_0 vec_dot"},
        {"gemv_k_quants", "one-column q6_K and q5_K (row layout)", "avx2", cpu_level::avx2, {},
         "ggml's q6_K and q5_K vec_dot"},
        {"gemm_bf16", "bf16 GEMM and convolution (decoder)", "avx512 + AVX-512 BF16", cpu_level::avx512, {"avx512bf16"},
         "bf16 decoder weights re-laid as f16 at load (exact in range), ggml's f16 mul_mat over im2col"},
        {"prefill_attention", "prompt attention", "avx512", cpu_level::avx512, {}, "ggml's mul_mat, soft_max and mul_mat"},
    };
    std::vector<kernel_status> out;
    for (const entry & e : entries) {
        out.push_back({e.id, e.name, e.needs, cpu_allows(e.level, e.features), e.otherwise});
    }
    return out;
}

}  // namespace kazeia
