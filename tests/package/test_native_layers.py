"""The native code's folders depend one way (docs/architecture.md): runtime and model at the bottom,
then kernels, weights, graphs (with the KV cache the graphs read), generation, and the kernel checks
on top, in a library of their own that only the bindings link. A file includes its own folder and
the folders below it, never one above. Each public header (native/include/kazeia) belongs to one of
these layers, so including it counts as including that layer: a graph cannot reach the generation
API (kazeia/tts.h) through the public folder either."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "native" / "src"
PUBLIC = REPO / "native" / "include" / "kazeia"
LAYERS = ["runtime", "model", "kernels", "weights", "graphs", "generation", "checks"]
# The layer of each public header: the folder that implements it (header-only ones: where their
# subject lives; errors.h at the bottom, which every layer may throw). A new header is placed here.
PUBLIC_LAYERS = {
    "errors.h": "runtime", "cpu_level.h": "runtime", "devices.h": "runtime", "ggml_log.h": "runtime",
    "quantize.h": "runtime", "sampling.h": "runtime", "thread_pool.h": "runtime",
    "hparams.h": "model", "tensor_table.h": "model", "model.h": "model",
    # what the graphs take (a prompt's rows, a stage's placement) and what they report
    "stage_inputs.h": "graphs", "launch_report.h": "graphs",
    "speech_decoder.h": "graphs", "speaker_encoder.h": "graphs", "audio_encoder.h": "graphs",
    "tts.h": "generation",   # the generation API, built on stage_inputs.h
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/(\w+\.\w+)"', re.M)


def layer_of(folder: str, name: str) -> str:
    """The layer an include reaches: its folder, or for a public header the layer it belongs to."""
    return PUBLIC_LAYERS.get(name, f"kazeia/{name}") if folder == "kazeia" else folder


def includes_of(folder: str) -> dict[str, set[str]]:
    """file -> the layers it includes from, for the files of `folder` and the public headers in it."""
    files = [p for p in (SOURCES / folder).rglob("*") if p.suffix in (".h", ".cpp", ".inc")]
    files += [PUBLIC / name for name, layer in PUBLIC_LAYERS.items() if layer == folder]
    return {str(p.relative_to(REPO)): {layer_of(*inc) for inc in INCLUDE.findall(p.read_text())} for p in files}


def test_the_folders_are_the_layers():
    assert sorted(p.name for p in SOURCES.iterdir() if p.is_dir()) == sorted(LAYERS)


def test_every_public_header_has_a_layer():
    assert sorted(p.name for p in PUBLIC.iterdir()) == sorted(PUBLIC_LAYERS)
    assert set(PUBLIC_LAYERS.values()) <= set(LAYERS)


def test_no_folder_includes_one_above_it():
    upward = []
    for rank, folder in enumerate(LAYERS):
        allowed = {folder, *LAYERS[:rank]}
        for path, layers in includes_of(folder).items():
            upward += [f"{path} includes {layer}" for layer in sorted(layers - allowed)]
    assert not upward, upward


def test_the_checks_are_not_in_the_core_library():
    """In a library of their own, linked by their own bindings' module (kazeia._native_checks), which
    neither the engine nor the workbench imports."""
    cmake = (REPO / "CMakeLists.txt").read_text()
    core = re.search(r"add_library\(kazeia_core STATIC(.*?)\)", cmake, re.S).group(1)
    assert "native/src/checks/" not in core and "native/src/kernels/" in core
    checks = re.search(r"add_library\(kazeia_checks STATIC(.*?)\)", cmake, re.S).group(1)
    assert checks.split() == [str(p.relative_to(REPO)) for p in sorted((SOURCES / "checks").glob("*.cpp"))]
    # their API is in their own folder, not among the core's public headers
    assert "checks" not in PUBLIC_LAYERS.values() and (SOURCES / "checks" / "kernel_checks.h").exists()
    # linked by the checks' own module only: the engine's bindings have none of them
    links = dict(re.findall(r"target_link_libraries\((\w+) PRIVATE ([^)]*)\)", cmake))
    assert "kazeia_checks" in links["_native_checks"].split() and "kazeia_checks" not in links["_native"].split()
    # every source file is built by one of the two
    built = set(re.findall(r"native/src/\S+\.cpp", core + checks))
    assert built == {str(p.relative_to(REPO)) for p in SOURCES.rglob("*.cpp")}
