"""Files appear whole or not at all: every writer writes beside the target and renames it over the
target only once the write has finished (a crash, a full disk or an exception leaves the user's
existing file untouched and no half-written file under its name)."""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .untrusted import MAX_NAME_BYTES, name_bytes


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path beside `path` (same folder, same extension, unique per process and
    thread: two writers of one file never share it) to write; it becomes `path` when the block ends
    without an error and is removed otherwise."""
    path = Path(path)
    tail = f".{os.getpid()}-{threading.get_ident()}.partial{path.suffix}"
    # (the stem cut so the temporary name fits where the target's name fits: names are capped in bytes)
    stem = name_bytes(path.stem, MAX_NAME_BYTES - 1 - len(tail.encode()))
    partial = path.with_name(f".{stem}{tail}")
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)
