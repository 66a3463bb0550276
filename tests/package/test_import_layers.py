"""The Python layers import one way: no module of `kazeia.engine` or `kazeia.app` imports, however
indirectly, a module that imports it back (an import inside a function or under TYPE_CHECKING
counts too: it is how a cycle hides), and the engine never imports the workbench."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest


def import_graph(package: str, unresolved: list | None = None) -> dict[str, set[str]]:
    """module -> the modules of the same top-level package it imports anywhere in its source; a
    `from` import of one of the package's modules that does not exist goes to `unresolved` as
    (module, target)."""
    folder = Path(importlib.util.find_spec(package).origin).parent
    modules = {}
    for path in folder.rglob("*.py"):
        parts = path.relative_to(folder).with_suffix("").parts
        name = ".".join((package, *parts)).removesuffix(".__init__")
        modules[name] = path
    graph = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = here.split(".")[:len(here.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                ours = node.level or target == package or target.startswith(package + ".")
                if ours and target not in modules and unresolved is not None:
                    unresolved.append((name, target))
                candidates = [target, *(f"{target}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            imported |= {c for c in candidates if c.startswith("kazeia.") and c != name}
        graph[name] = imported
    return graph


def cycles(graph: dict[str, set[str]], package: str) -> list[list[str]]:
    """Import cycles among the package's modules (the package's own __init__, which re-exports
    them all, is left out: importing a submodule runs it first by design)."""
    found, state = [], {}

    def visit(module, path):
        state[module] = "open"
        path.append(module)
        for other in sorted(graph.get(module, ())):
            if other == package or other not in graph:
                continue
            if state.get(other) == "open":
                found.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other, path)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    return found


@pytest.mark.parametrize("package", ["kazeia.engine", "kazeia.app"])
def test_no_import_cycles(package):
    graph = import_graph(package)
    assert len(graph) > 10   # (the walk found the package's modules)
    assert cycles(graph, package) == []


@pytest.mark.parametrize("package", ["kazeia.engine", "kazeia.app"])
def test_every_import_of_the_package_names_a_module_that_exists(package):
    """(an import inside a function of a moved module fails only when that function runs)"""
    unresolved = []
    import_graph(package, unresolved)
    assert unresolved == []


def test_the_engine_never_imports_the_workbench():
    graph = import_graph("kazeia.engine")
    offenders = {m: sorted(d for d in deps if d.startswith("kazeia.app")) for m, deps in graph.items()}
    assert {m: d for m, d in offenders.items() if d} == {}


def test_a_cycle_is_found():
    """(the check itself) a cycle through a function-level import is reported."""
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert cycles(graph, "p") == [["p.a", "p.b", "p.c", "p.a"]]


def _engine_private_fields() -> set[str]:
    """The names the Engine keeps for itself (`self._name = ...` in synthesis/engine.py)."""
    path = Path(importlib.util.find_spec("kazeia.engine.synthesis.engine").origin)
    return {node.attr for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
            and node.attr.startswith("_") and not node.attr.startswith("__")}


@pytest.mark.parametrize("package", ["kazeia.engine", "kazeia.app"])
def test_nothing_outside_the_synthesis_core_reaches_its_private_names(package):
    """The takes, front ends and the workbench call the engine through its public names
    (synthesis.host.TakeHost among them): no module outside kazeia.engine.synthesis imports a private
    name of it, or reads one of the Engine's private fields from another object."""
    private = _engine_private_fields()
    assert "_runner" in private   # (the walk found the Engine's own fields)
    folder = Path(importlib.util.find_spec(package).origin).parent
    reaches = []
    for path in folder.rglob("*.py"):
        if "synthesis" in path.relative_to(folder).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and "synthesis" in (node.module or "").split("."):
                reaches += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if a.name.startswith("_")]
            elif isinstance(node, ast.Attribute) and node.attr in private and not (
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                reaches.append(f"{path.name}:{node.lineno} reads {ast.unparse(node)}")
    assert reaches == []
