"""Cheap integrity check of the committed goldens (no reference venv needed):
every file under tests/golden/ is listed in manifest.json with its sha256, and
nothing listed is missing or altered.  Regenerate with build_goldens.py after
any intended change (see tests/reference/README.md)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

GOLDEN_DIR = Path(os.environ.get("KAZEIA_GOLDEN_DIR", Path(__file__).resolve().parents[2] / "tests" / "golden"))
MANIFEST = GOLDEN_DIR / "manifest.json"

if not MANIFEST.exists():
    pytest.skip(f"no committed goldens in {GOLDEN_DIR}", allow_module_level=True)


def test_manifest_lists_exactly_the_golden_files():
    listed = set(json.loads(MANIFEST.read_text(encoding="utf-8"))["files"])
    present = {p.relative_to(GOLDEN_DIR).as_posix() for p in GOLDEN_DIR.rglob("*")
               if p.is_file() and p != MANIFEST}
    assert listed == present, f"unlisted: {sorted(present - listed)}; missing: {sorted(listed - present)}"


def test_golden_file_hashes():
    files = json.loads(MANIFEST.read_text(encoding="utf-8"))["files"]
    bad = [rel for rel, entry in files.items()
           if hashlib.sha256((GOLDEN_DIR / rel).read_bytes()).hexdigest() != entry["sha256"]]
    assert not bad, f"files changed since build_goldens.py wrote them: {bad}"
