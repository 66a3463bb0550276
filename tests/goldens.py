"""Where the committed reference goldens live (written by tests/reference/build_goldens.py)."""
from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(os.environ.get("KAZEIA_GOLDEN_DIR") or Path(__file__).parent / "golden")
CHECKPOINTS = GOLDEN / "checkpoints"
VARIANTS = ("custom_voice", "voice_design", "base")


def checkpoint_dir(variant: str) -> Path:
    return CHECKPOINTS / f"tiny-{variant}"
