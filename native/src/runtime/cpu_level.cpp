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
    if (f == "avxvnni") return __builtin_cpu_supports("avxvnni");
    throw std::logic_error(std::string("cpu_level: unknown CPU feature ") + feature);
#else
    (void)feature;
    return false;
#endif
}

cpu_level detect() {
    if (!(has("avx2") && has("fma") && has("f16c"))) return cpu_level::generic;
    if (has("avx512f") && has("avx512bw") && has("avx512vl")) return cpu_level::avx512;
    if (has("avxvnni")) return cpu_level::avxvnni;
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
    else if (asked == "avxvnni") cap = cpu_level::avxvnni;
    else if (asked == "avx2") cap = cpu_level::avx2;
    else if (asked == "generic") cap = cpu_level::generic;
    else throw std::invalid_argument("KAZEIA_CPU=" + asked + ": choose auto, avx512, avxvnni, avx2 or generic");
    const cpu_level have = cpu_level_detected();
    cpu_level level = static_cast<int>(cap) < static_cast<int>(have) ? cap : have;
    if (level == cpu_level::avxvnni && !has("avxvnni")) level = cpu_level::avx2;   // an AVX-512 CPU without it
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
        s.no_decoder_panels = set("KAZEIA_NO_DECODER_PANELS");
        return s;
    }();
    return switches;
}

const char * cpu_level_name(cpu_level level) {
    switch (level) {
        case cpu_level::avx512: return "avx512";
        case cpu_level::avxvnni: return "avxvnni";
        case cpu_level::avx2: return "avx2";
        default: return "generic";
    }
}

std::vector<cpu_level> cpu_levels_available() {
    std::vector<cpu_level> out;
    for (int l = static_cast<int>(cpu_level_detected()); l >= 0; --l) {
        const auto level = static_cast<cpu_level>(l);
        if (level != cpu_level::avxvnni || has("avxvnni")) out.push_back(level);
    }
    return out;
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
    // the lanes kernels take one form per process: the widest the level allows
    const bool lanes512 = cpu_allows(cpu_level::avx512, {"avx512vnni"});
    const bool lanes256 = !lanes512 && cpu_allows(cpu_level::avxvnni, {"avxvnni"});
    const bool lanes_avx2 = !lanes512 && !lanes256 && cpu_allows(cpu_level::avx2);
    return {
        {"lanes", "lanes q8_0/q6_K/q5_K (weights re-laid at load; steps, batches, prompts), 512-bit form",
         "avx512 + AVX-512 VNNI", lanes512, "the 256-bit forms below where they run"},
        {"lanes_avxvnni", "lanes q8_0/q6_K/q5_K, 256-bit form (the same layout and numbers)", "avxvnni + AVX-VNNI", lanes256,
         "the AVX2 form below"},
        {"lanes_avx2", "lanes q8_0/q6_K/q5_K, 256-bit form without VNNI (vpmaddubsw + vpmaddwd; the same numbers)", "avx2",
         lanes_avx2, "weights stay in the file's layout: the one-column kernels below for steps (and q6_K/q5_K "
         "prompts), ggml's mul_mat for q8_0 prompts and for q4_K"},
        {"gemm_int8", "int8 GEMM for prompts (row-layout q8_0/q6_K)", "a lanes form", lanes512 || lanes256 || lanes_avx2,
         "ggml's mul_mat (its q8_0/q6_K vec_dot, llamafile where built)"},
        {"gemv_q8_0_vnni", "one-column q8_0 (VNNI form)", "avx512 + AVX-512 VNNI", lanes512, "the AVX2 form of the same kernel"},
        {"gemv_q8_0", "one-column q8_0 (AVX2 form)", "avx2", cpu_allows(cpu_level::avx2), "ggml's q8_0 vec_dot"},
        {"gemv_k_quants", "one-column q6_K and q5_K (row layout)", "avx2", cpu_allows(cpu_level::avx2),
         "ggml's q6_K and q5_K vec_dot"},
        {"gemm_bf16", "bf16 GEMM and convolution (decoder)", "avx512 + AVX-512 BF16", cpu_allows(cpu_level::avx512, {"avx512bf16"}),
         "the f32-arithmetic GEMM and convolution below"},
        {"gemm_fma", "f32-arithmetic GEMM and convolution for f16 (and bf16) decoder weights, 512-bit form", "avx512",
         cpu_allows(cpu_level::avx512), "the 256-bit form below (the same numbers)"},
        {"gemm_fma_avx2", "f32-arithmetic GEMM and convolution, 256-bit form", "avx2",
         !cpu_allows(cpu_level::avx512) && cpu_allows(cpu_level::avx2),
         "ggml's f16 mul_mat over im2col (bf16 decoder weights re-laid as f16 at load, exact in range)"},
        {"prefill_attention", "prompt attention", "avx512", cpu_allows(cpu_level::avx512), "ggml's mul_mat, soft_max and mul_mat"},
    };
}

}  // namespace kazeia
