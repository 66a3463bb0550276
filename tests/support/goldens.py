"""Where the committed reference goldens live (written by tests/reference/build_goldens.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

GOLDEN = Path(os.environ.get("KAZEIA_GOLDEN_DIR") or Path(__file__).parents[1] / "golden")
CHECKPOINTS = GOLDEN / "checkpoints"
VARIANTS = ("custom_voice", "voice_design", "base")


def checkpoint_dir(variant: str) -> Path:
    return CHECKPOINTS / f"tiny-{variant}"


MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
CASES = sorted(MANIFEST["cases"])


def case_request(case: str):
    """(variant, text, request keywords, golden arrays) of a golden case, as the reference was asked."""
    from kazeia.engine import Voice
    meta = MANIFEST["cases"][case]
    g = np.load(GOLDEN / f"{case}.npz")
    st = meta["settings"]
    voice = None
    if meta["variant"] == "base":
        voice = Voice(g["ref_spk_embedding"], g["ref_code"] if "ref_code" in g.files else None, st.get("ref_text"))
    request = dict(speaker=st.get("speaker"), language=st.get("language"), instruct=st.get("instruct"), voice=voice,
                   streaming_text=not st["non_streaming_mode"])
    return meta["variant"], st["text"], request, g
