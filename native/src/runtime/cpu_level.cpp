#include "kazeia/cpu_level.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <stdexcept>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#ifndef HWCAP2_I8MM   // (kernel headers before 5.10)
#define HWCAP2_I8MM (1 << 13)
#endif
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace kazeia {
namespace {

// this architecture's levels, highest first
#if defined(__aarch64__)
constexpr cpu_level k_family[] = {cpu_level::i8mm, cpu_level::dotprod, cpu_level::neon, cpu_level::generic};
#else
constexpr cpu_level k_family[] = {cpu_level::avx512, cpu_level::avxvnni, cpu_level::avx2, cpu_level::generic};
#endif
constexpr int k_family_size = sizeof(k_family) / sizeof(k_family[0]);

// a level's rank in this architecture's family (generic 0); -1 for the other architecture's levels
int rank(cpu_level level) {
    for (int i = 0; i < k_family_size; ++i) {
        if (k_family[i] == level) return k_family_size - 1 - i;
    }
    return -1;
}

bool has(const char * feature) {
    const std::string f = feature;
#if defined(__x86_64__) && defined(__GNUC__)
    // __builtin_cpu_supports needs a literal: the features Kazeia's kernels use, by name
    if (f == "avx2") return __builtin_cpu_supports("avx2");
    if (f == "fma") return __builtin_cpu_supports("fma");
    if (f == "f16c") return __builtin_cpu_supports("f16c");
    if (f == "avx512f") return __builtin_cpu_supports("avx512f");
    if (f == "avx512bw") return __builtin_cpu_supports("avx512bw");
    if (f == "avx512vl") return __builtin_cpu_supports("avx512vl");
    if (f == "avx512vnni") return __builtin_cpu_supports("avx512vnni");
    if (f == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
    if (f == "avxvnni") return __builtin_cpu_supports("avxvnni");
#elif defined(__aarch64__) && defined(__linux__)
    // the kernel's hardware capabilities (Android too); qemu-user reports its emulated core's
    static const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
    if (f == "asimd") return hwcap & HWCAP_ASIMD;
    if (f == "asimddp") return hwcap & HWCAP_ASIMDDP;
    if (f == "i8mm") return hwcap2 & HWCAP2_I8MM;
#elif defined(__aarch64__) && defined(__APPLE__)
    auto sysctl_flag = [](const char * name) {
        int v = 0;
        size_t n = sizeof(v);
        return sysctlbyname(name, &v, &n, nullptr, 0) == 0 && v != 0;
    };
    if (f == "asimd") return true;   // (every Apple ARM core)
    if (f == "asimddp") return sysctl_flag("hw.optional.arm.FEAT_DotProd");
    if (f == "i8mm") return sysctl_flag("hw.optional.arm.FEAT_I8MM");
#else
    return false;   // another architecture: the generic level only
#endif
    throw std::logic_error("cpu_level: unknown CPU feature " + f);
}

cpu_level detect() {
#if defined(__aarch64__)
    if (!has("asimd")) return cpu_level::generic;
    if (!has("asimddp")) return cpu_level::neon;
    return has("i8mm") ? cpu_level::i8mm : cpu_level::dotprod;
#else
    if (!(has("avx2") && has("fma") && has("f16c"))) return cpu_level::generic;
    if (has("avx512f") && has("avx512bw") && has("avx512vl")) return cpu_level::avx512;
    if (has("avxvnni")) return cpu_level::avxvnni;
    return cpu_level::avx2;
#endif
}

// Whether KAZEIA_CPU can give `level` here: at most the detected level, and for avxvnni the CPU has
// AVX-VNNI (an AVX-512 CPU may not: AMD Zen 4)
bool level_on_cpu(cpu_level level) {
    if (rank(level) < 0 || rank(level) > rank(cpu_level_detected())) return false;
    return level != cpu_level::avxvnni || has("avxvnni");
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
    int cap = -1;
    std::string names = "auto";
    for (cpu_level l : k_family) {
        if (asked == "auto" || asked == cpu_level_name(l)) cap = std::max(cap, rank(l));
        names += std::string(l == cpu_level::generic ? " or " : ", ") + cpu_level_name(l);
    }
    if (cap < 0) throw std::invalid_argument("KAZEIA_CPU=" + asked + ": choose " + names);
    // the highest level at or below the cap that this CPU has (generic always)
    cpu_level level = cpu_level::generic;
    for (cpu_level l : k_family) {
        if (rank(l) <= cap && level_on_cpu(l)) {
            level = l;
            break;
        }
    }
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
        s.no_winograd = set("KAZEIA_NO_WINOGRAD");
        return s;
    }();
    return switches;
}

const char * cpu_level_name(cpu_level level) {
    switch (level) {
        case cpu_level::avx512: return "avx512";
        case cpu_level::avxvnni: return "avxvnni";
        case cpu_level::avx2: return "avx2";
        case cpu_level::i8mm: return "i8mm";
        case cpu_level::dotprod: return "dotprod";
        case cpu_level::neon: return "neon";
        default: return "generic";
    }
}

std::vector<cpu_level> cpu_levels_available() {
    std::vector<cpu_level> out;
    for (cpu_level l : k_family) {
        if (level_on_cpu(l)) out.push_back(l);
    }
    return out;
}

std::vector<cpu_level> cpu_levels_of_architecture() {
    return {std::begin(k_family), std::end(k_family)};
}

bool cpu_allows(cpu_level level, std::initializer_list<const char *> features) {
    cpu_level in_force;
    try {
        in_force = cpu_level_in_force();
    } catch (const std::invalid_argument &) {
        return false;
    }
    if (rank(level) < 0 || rank(in_force) < rank(level)) return false;
    for (const char * f : features) {
        if (!has(f)) return false;
    }
    return true;
}

std::vector<kernel_status> kernel_statuses() {
#if defined(__aarch64__)
    // ARM64: the decoder's products are Kazeia's; the talker's and code predictor's are ggml's own
    // (its NEON/SDOT/SMMLA quantised products, as built), which already hold a column's result
    // whatever shares its launch (tests/native/test_kernels.py checks it at every level)
    return {
        {"gemm_fma_neon", "f32-arithmetic GEMM and convolution for f16 and bf16 decoder weights, NEON form (the x86 forms' numbers)",
         "neon", cpu_allows(cpu_level::neon),
         "ggml's f16 mul_mat over im2col (f16 arithmetic where ggml was built with +fp16; bf16 weights re-laid as f16 at load)"},
        {"winograd_conv", "the vocoder's 7-tap convolutions in Winograd F(4,7) form over the f32 products (10 products for 28)",
         "neon", cpu_allows(cpu_level::neon) && !measurement_switches_in_force().no_winograd,
         "the direct convolution of the f32 products (KAZEIA_NO_WINOGRAD keeps it)"},
    };
#else
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
        {"winograd_conv", "the vocoder's 7-tap convolutions in Winograd F(4,7) form over the f32 products (10 products for 28)",
         "avx2", cpu_allows(cpu_level::avx2) && !measurement_switches_in_force().no_winograd,
         "the direct convolution of the f32 products (KAZEIA_NO_WINOGRAD keeps it)"},
        {"prefill_attention", "prompt attention", "avx512", cpu_allows(cpu_level::avx512), "ggml's mul_mat, soft_max and mul_mat"},
    };
#endif
}

}  // namespace kazeia
