"""What this process runs on: the ggml build in use (its flavour and backend libraries) and the CPU
level of Kazeia's kernels (KAZEIA_CPU). Shown by `kazeia devices`, the bench JSON and the workbench,
so every figure says what produced it."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from kazeia import _native

# KAZEIA_CPU's values on this architecture (x86-64: avx512, avxvnni, avx2; ARM64: i8mm, dotprod, neon; generic)
LEVELS = ("auto", *_native.cpu_level_names())
# the backend library each GPU flavour of ggml must hold (scripts/check_ggml_wheel.py checks builds)
BACKEND_LIBRARIES = {"vulkan": "libggml-vulkan.so", "cuda": "libggml-cuda.so"}


def _ggml_lib_dir() -> Path | None:
    import libggml
    root = Path(libggml.__file__).parent
    return next((d for d in (root / "lib64", root / "lib") if d.is_dir()), None)


@dataclass(frozen=True)
class GgmlBuild:
    flavor: str            # vulkan | cuda | native | wheel | "cpu" (no setup.sh stamp: built elsewhere)
    backends: tuple[str, ...]   # backend libraries present besides base and cpu, e.g. ("vulkan",)
    stamp: str             # setup.sh's record of the build ("" when there is none)

    def describe(self) -> str:
        return f"ggml {self.flavor} build ({'backends: CPU, ' + ', '.join(self.backends) if self.backends else 'CPU only'})"


def ggml_build() -> GgmlBuild:
    """The ggml build in this environment: setup.sh's stamp in the venv says which flavour it built;
    the libraries present say which backends it really has."""
    lib_dir = _ggml_lib_dir()
    backends = tuple(sorted(name for name, lib in BACKEND_LIBRARIES.items() if lib_dir and (lib_dir / lib).exists()))
    stamp_file = Path(sys.prefix) / ".kazeia-ggml"
    stamp = stamp_file.read_text().strip() if stamp_file.exists() else ""
    flavor = stamp.split("-", 1)[0] if stamp else (backends[0] if backends else "cpu")
    return GgmlBuild(flavor, backends, stamp)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


def cpu_level() -> dict:
    """The level in force, the detected one, what KAZEIA_CPU asked for and each kernel's state.
    Raises ValueError naming a bad KAZEIA_CPU value."""
    return _native.cpu_level()


def active_kernels(level: dict | None = None) -> set[str]:
    """The ids of Kazeia's kernels that run at the level in force (each architecture lists its own)."""
    return {k["id"] for k in (level or cpu_level())["kernels"] if k["active"]}


def f32_products_active(level: dict | None = None) -> bool:
    """Whether f16 (and bf16) decoder weights go through Kazeia's f32-arithmetic products, in any form."""
    return any(k.startswith("gemm_fma") for k in active_kernels(level))


def check_cpu_level() -> str:
    """The level in force; ValueError with the accepted values when KAZEIA_CPU is not one of them."""
    return cpu_level()["level"]


def loaded_ggml_cpu_library() -> str:
    """The path of the ggml CPU backend this process loaded (LD_LIBRARY_PATH may name another
    build than the venv's: `kazeia bench --cpu ... --ggml-lib`)."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if "libggml-cpu" in line:
                return line.split()[-1]
    except OSError:
        pass
    return ""


def at_cpu_level() -> str:
    """" (Kazeia's kernels at avx2)": for messages about a kernel that did not run."""
    return f" (Kazeia's kernels at {cpu_level()['level']})"


def machine_info() -> dict:
    """For JSON records (the bench): CPU model, Kazeia's CPU level and the ggml build."""
    level, build = cpu_level(), ggml_build()
    return {"cpu": cpu_model(), "cpu_level": level["level"], "cpu_level_detected": level["detected"],
            "cpu_level_requested": level["requested"],
            "kernels_active": [k["name"] for k in level["kernels"] if k["active"]],
            "ggml_build": build.flavor, "ggml_backends": list(build.backends),
            "ggml_cpu_library": loaded_ggml_cpu_library()}


def describe_cpu_level(level: dict | None = None) -> list[str]:
    """Lines for `kazeia devices`: the level and every kernel, with its replacement where it is off."""
    level = level or cpu_level()
    lines = [f"CPU: {cpu_model()}; Kazeia kernels at level {level['level']} (this CPU: {level['detected']}; "
             f"KAZEIA_CPU={level['requested']})"]
    for k in level["kernels"]:
        state = "on " if k["active"] else "off"
        tail = "" if k["active"] else f" -> {k['otherwise']}"
        lines.append(f"  {state} {k['name']} [{k['needs']}]{tail}")
    return lines
