"""The `kazeia` command line as a user runs it (a subprocess), and the inputs its commands take."""
from __future__ import annotations

import os
import subprocess
import sys

SPEAKERS = ["vivian", "ryan", "eric", "serena", "aiden"]


def kazeia(*args, env=None, timeout=300):
    """`kazeia ARGS...` in a new process with this one's environment (and `env`), its output captured."""
    return subprocess.run([sys.executable, "-m", "kazeia.engine", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def script_line(i: int) -> str:
    return f"Line number {i} of the script is spoken here."


def write_script(path, n=40, frames=lambda i: 4 + i % 5):
    """A render script of n lines, each with its own speaker, seed and frame limit."""
    rows = ["id,text,speaker,seed,max_frames"]
    for i in range(n):
        rows.append(f"line{i:02d},{script_line(i)},{SPEAKERS[i % 5]},{i},{frames(i)}")
    path.write_text("\n".join(rows) + "\n")
    return path
