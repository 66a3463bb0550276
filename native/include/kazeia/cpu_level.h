// The CPU level Kazeia's own kernels may use, detected at run time and capped by KAZEIA_CPU
// (x86-64: auto | avx512 | avxvnni | avx2 | generic; ARM64: auto | i8mm | dotprod | neon | generic), so
// that every level's kernels can be tested on one machine and a user can rule out a kernel. The cap
// never raises the level above what the CPU has. ggml's own kernels are not capped: they run at what
// ggml was built for (setup.sh: this CPU).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

namespace kazeia {

// Two families, one per architecture, each ordered by rank (generic is both's lowest); a level of
// the other architecture's family is never detected, accepted or allowed.
enum class cpu_level { generic = 0, avx2, avxvnni, avx512, neon, dotprod, i8mm };

// What this CPU has. x86-64: avx512 = AVX-512 F/BW/VL (with AVX2, FMA, F16C); avxvnni = AVX2, FMA,
// F16C and AVX-VNNI without AVX-512 (Intel laptops and desktops from Alder Lake on); avx2 = AVX2, FMA
// and F16C. ARM64: i8mm = NEON, dot product and int8 matrix multiply (SMMLA: Cortex-A510/A710/X2 on,
// Neoverse V1/N2, Apple M2 on); dotprod = NEON and SDOT (Cortex-A55/A76 on, Neoverse N1, Apple M1);
// neon = Advanced SIMD alone (Cortex-A53/A72).
cpu_level cpu_level_detected();
// The level in force: the detected one capped by KAZEIA_CPU, read once per process (weights laid
// out for one level's kernels cannot be read by another's). A cap of avxvnni on a CPU without
// AVX-VNNI gives avx2. A value that is not auto or one of this architecture's levels throws
// std::invalid_argument naming it (a bad value is not kept: the next call reads again).
cpu_level cpu_level_in_force();
// The requested cap as written ("auto" when KAZEIA_CPU is unset or empty).
std::string cpu_level_requested();
const char * cpu_level_name(cpu_level level);
// The levels KAZEIA_CPU can give on this CPU, highest first (the detected one, then each lower one
// whose features it has): what the tests run at.
std::vector<cpu_level> cpu_levels_available();
// Every level of this architecture's family, highest first: the values KAZEIA_CPU takes besides auto.
std::vector<cpu_level> cpu_levels_of_architecture();

// Whether a kernel needing `level` and the CPU features `features` (x86: names as
// __builtin_cpu_supports takes them, e.g. "avx512vnni"; ARM: as /proc/cpuinfo lists them, e.g.
// "asimddp", "i8mm") may run: the level in force is of the same family and at least `level`, and the
// CPU has every feature. False on a bad KAZEIA_CPU value.
bool cpu_allows(cpu_level level, std::initializer_list<const char *> features = {});

// Switches for measuring Kazeia's kernels against what they replace, read from the environment once
// per process (set, with any value, to switch on): KAZEIA_GGML_PRODUCTS (ggml's products everywhere),
// KAZEIA_NO_LANES (no lanes layout: the row kernels), KAZEIA_KEEP_BF16 (bf16 decoder weights kept as
// bf16 where Kazeia's bf16 kernels are off), KAZEIA_NO_HUGE_PAGES (no huge-page weight arena),
// KAZEIA_NO_DECODER_PANELS (decoder matrices rearranged for the f32 products at every launch, not once at load).
struct measurement_switches {
    bool ggml_products = false;
    bool no_lanes = false;
    bool keep_bf16 = false;
    bool no_huge_pages = false;
    bool no_decoder_panels = false;
    bool no_winograd = false;
};
const measurement_switches & measurement_switches_in_force();

// Kazeia's kernels and, for each, whether it runs at the level in force, what it needs, and where
// it does not run, which path takes its place (ggml's, named).
struct kernel_status {
    std::string id;     // short and stable, for tests
    std::string name;
    std::string needs;
    bool active = false;
    std::string otherwise;
};
std::vector<kernel_status> kernel_statuses();

}  // namespace kazeia
