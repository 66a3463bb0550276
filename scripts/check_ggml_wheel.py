"""Checks that a built libggml-python wheel is the flavour it claims to be.

    python scripts/check_ggml_wheel.py FLAVOR WHEEL

Exit 0 when WHEEL holds ggml's base and CPU libraries and the backend library of FLAVOR
(vulkan: libggml-vulkan.so, cuda: libggml-cuda.so); exit 1 with a message naming what is
missing otherwise (setup.sh then neither caches nor installs it). Standard library only: it runs
before anything is installed.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import PurePosixPath

REQUIRED = {"base": ("libggml-base.so", "libggml-cpu.so")}
BACKEND_LIBRARY = {"vulkan": "libggml-vulkan.so", "cuda": "libggml-cuda.so"}
FLAVORS = ("native", "vulkan", "cuda", "wheel")


def missing_libraries(flavor: str, names: list[str]) -> list[str]:
    """The libraries a wheel of `flavor` must hold that are not among `names` (zip member paths)."""
    if flavor not in FLAVORS:
        raise ValueError(f"unknown ggml flavor {flavor!r} (one of {', '.join(FLAVORS)})")
    present = {PurePosixPath(n).name for n in names}
    wanted = list(REQUIRED["base"])
    if flavor in BACKEND_LIBRARY:
        wanted.append(BACKEND_LIBRARY[flavor])
    return [lib for lib in wanted if lib not in present]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_ggml_wheel.py FLAVOR WHEEL", file=sys.stderr)
        return 2
    flavor, wheel = argv
    if flavor not in FLAVORS:
        print(f"ggml wheel check: unknown ggml flavor {flavor!r} (one of {', '.join(FLAVORS)})", file=sys.stderr)
        return 1
    try:
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
        missing = missing_libraries(flavor, names)
    except (OSError, zipfile.BadZipFile, ValueError) as e:
        print(f"ggml wheel check: {wheel}: {e}", file=sys.stderr)
        return 1
    if missing:
        print(f"ggml wheel check: {wheel} was built as '{flavor}' but lacks {', '.join(missing)}: "
              f"the {flavor} backend was not built into it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
