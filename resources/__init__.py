"""Files the application ships with (installed as kazeia.resources): the application icon (SVG and
PNG sizes), the demo model's recipe and the demo tokenizer's corpus."""
from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).parent
ICON_SIZES = (16, 32, 48, 64, 128, 256)


def resource_path(name: str) -> Path:
    path = FOLDER / name
    if not path.exists():
        raise FileNotFoundError(f"kazeia resource {name!r} is missing from {FOLDER} (a broken install?)")
    return path


def icon_path(size: int | None = None) -> Path:
    """The SVG, or the PNG of one of ICON_SIZES."""
    return resource_path("icon.svg" if size is None else f"icon-{size}.png")
