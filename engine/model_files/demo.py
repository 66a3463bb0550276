"""The bundled demo model: a tiny CustomVoice model with random weights, made from a fixed recipe
on first use (about a second, no download) and cached in the user's cache folder."""
from __future__ import annotations

import json
import os
from pathlib import Path

from kazeia import _native
from kazeia.resources import resource_path

from .random_model import make_random_model


def _demo_recipe() -> tuple[dict, int]:
    spec = json.loads(resource_path("demo_recipe.json").read_text())
    return spec["recipe"], int(spec["version"])


DEMO_RECIPE, RECIPE_VERSION = _demo_recipe()   # resources/demo_recipe.json says why these values


def cache_dir() -> Path:
    base = os.environ.get("KAZEIA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kazeia")
    return Path(base)


def demo_model_path() -> Path:
    """Path of the demo model, written there first if it is missing."""
    path = cache_dir() / f"demo-tiny-custom_voice-f{_native.FORMAT_VERSION}r{RECIPE_VERSION}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        make_random_model(path, progress=False, **DEMO_RECIPE)
    return path


def resolve_model(name: str | os.PathLike) -> Path:
    """A model argument: "demo" for the bundled demo model, a path (a GGUF file or checkpoint
    folder), or the name of a model `kazeia pull` registered (a path that exists wins)."""
    text = os.fspath(name)
    if text == "demo":
        return demo_model_path()
    if os.path.exists(text):
        return Path(text)
    from ..models.registry import registered_path
    path = registered_path(text)
    if path is None and os.sep not in text and not text.endswith(".gguf"):   # a name, not a path
        raise ValueError(f"{text!r}: no such file, and no model registered by that name (`kazeia models` lists "
                         "them; `kazeia pull` fetches one)")
    return path or Path(text)
