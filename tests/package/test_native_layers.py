"""The native code's folders depend one way (docs/architecture.md): model and runtime at the bottom,
then kernels, weights, graphs (with the KV cache the graphs read), generation, and the kernel checks
on top, in a library of their own that only the bindings link. A file includes its own folder, the
public headers (native/include/kazeia) and the folders below it, never one above."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "native" / "src"
LAYERS = ["model", "runtime", "kernels", "weights", "graphs", "generation", "checks"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def includes_of(folder: str) -> dict[str, set[str]]:
    """file -> the native folders it includes from (public headers left out)."""
    return {str(p.relative_to(SOURCES)): set(INCLUDE.findall(p.read_text())) - {"kazeia"}
            for p in (SOURCES / folder).rglob("*") if p.suffix in (".h", ".cpp", ".inc")}


def test_the_folders_are_the_layers():
    assert sorted(p.name for p in SOURCES.iterdir() if p.is_dir()) == sorted(LAYERS)


def test_no_folder_includes_one_above_it():
    upward = []
    for rank, folder in enumerate(LAYERS):
        allowed = {folder, *LAYERS[:rank]}
        for path, folders in includes_of(folder).items():
            upward += [f"{path} includes {f}/" for f in sorted(folders - allowed)]
    assert not upward, upward


def test_the_checks_are_not_in_the_core_library():
    """In a library of their own, linked by their own bindings' module (kazeia._native_checks), which
    neither the engine nor the workbench imports."""
    cmake = (REPO / "CMakeLists.txt").read_text()
    core = re.search(r"add_library\(kazeia_core STATIC(.*?)\)", cmake, re.S).group(1)
    assert "native/src/checks/" not in core and "native/src/kernels/" in core
    checks = re.search(r"add_library\(kazeia_checks STATIC(.*?)\)", cmake, re.S).group(1)
    assert checks.split() == [str(p.relative_to(REPO)) for p in sorted((SOURCES / "checks").glob("*.cpp"))]
    # linked by the checks' own module only: the engine's bindings have none of them
    links = dict(re.findall(r"target_link_libraries\((\w+) PRIVATE ([^)]*)\)", cmake))
    assert "kazeia_checks" in links["_native_checks"].split() and "kazeia_checks" not in links["_native"].split()
    # every source file is built by one of the two
    built = set(re.findall(r"native/src/\S+\.cpp", core + checks))
    assert built == {str(p.relative_to(REPO)) for p in SOURCES.rglob("*.cpp")}
