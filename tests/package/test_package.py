"""Packaging: one `kazeia` namespace, the native core imports, ggml reports its devices."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

import kazeia._native as native


def test_single_namespace():
    for name in ("kazeia.engine", "kazeia.app", "kazeia._native"):
        assert importlib.util.find_spec(name) is not None, name
    # nothing generic leaks into site-packages
    code = "import importlib.util as u, sys; sys.path = [p for p in sys.path if p not in ('', '.')]; " \
           "print(u.find_spec('engine'), u.find_spec('app'))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert r.stdout.strip() == "None None"


def test_devices_lists_the_cpu():
    devices = native.devices()
    cpu = [d for d in devices if d["type"] == "cpu"]
    assert cpu and cpu[0]["memory_total"] > 0
    assert cpu[0]["buffer_from_host_ptr"]


def test_quantize_matches_block_layout():
    import numpy as np
    x = np.linspace(-1, 1, 512, dtype=np.float32).reshape(2, 256)
    assert native.quantize(x, "q8_0").shape == (2, 8 * 34)
    assert native.quantize(x, "q4_K").shape == (2, 144)
    assert native.quantize(x, "f16").shape == (2, 512)
    import pytest
    with pytest.raises(ValueError, match="blocks of 32"):
        native.quantize(x[:, :48], "q8_0")
    with pytest.raises(ValueError, match="unknown ggml type"):
        native.quantize(x, "q99")


@pytest.mark.parametrize("module", ["_native", "_native_checks"])
def test_the_shipped_type_stubs_name_every_binding(module):
    """kazeia/_native.pyi and _native_checks.pyi are installed beside their modules and list exactly
    their public names, each class with its methods (regenerate them as their headers say when a
    binding changes)."""
    import ast
    import importlib
    from pathlib import Path
    native = importlib.import_module(f"kazeia.{module}")
    stub = Path(native.__file__).with_name(f"{module}.pyi")
    assert stub.exists()
    tree = ast.parse(stub.read_text())
    names = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.AnnAssign)
                 and getattr(n.target, "id", "") == "__all__")
    public = sorted(n for n in dir(native) if not n.startswith("_"))
    assert sorted(names) == public
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name != "ModelLoadError":
            stubbed = {f.name for f in node.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}
            actual = {m for m in dir(getattr(native, node.name)) if not m.startswith("_")}
            assert stubbed == actual, node.name


def test_the_engine_and_the_workbench_never_load_the_checks():
    """kazeia._native_checks is for the tests and the bench: a take, the server and the workbench's
    modules run without it."""
    code = ("import sys, kazeia.engine, kazeia.engine.serve.app, kazeia.engine.cli; "
            "import kazeia.app.session, kazeia.app.controller; print('kazeia._native_checks' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"