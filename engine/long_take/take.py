"""One long take written to one file through the chunk store (`kazeia say --text-file`): its chunks
are kept on disk as they are made, in a work folder beside the output, and the file is written from
them at the end, piece by piece, so memory does not grow with the text. The work folder goes once
the file is whole; after a stop, the same command keeps the chunks already there."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..audio_io import FORMATS
from ..synthesis.long_text import TakePlan
from ..untrusted import remove_tree_inside
from .assemble import Assembled, assemble
from .chunks import ChunkDone, ChunkJob, ChunkStore, make_chunks, model_identity, request_digest


@dataclass
class TakeFile:
    assembled: Assembled
    chunks: int
    kept: int                       # chunks found on disk from a stopped run
    limited: list[int]              # chunks (0-based) that stopped at their frame limit
    codes: np.ndarray               # [frames, 16], every chunk's in order


def work_folder(output: str | Path) -> Path:
    output = Path(output)
    return output.with_name(f".{output.name}.kazeia-chunks")


def write_take(engine, plan: TakePlan, output: str | Path, batch: int = 4,
               on_chunk: Callable[[ChunkDone], None] | None = None) -> TakeFile:
    """`plan`'s chunks (Engine.plan) spoken into `output` (.wav float or .flac, by suffix), resuming from
    its work folder."""
    output = Path(output)
    container, subtype = FORMATS[output.suffix.lower()]
    work = work_folder(output)
    store = ChunkStore(work, engine.info.sample_rate)
    model = model_identity(engine.info)
    jobs = [ChunkJob(r, request_digest(r, model), chunk.index)
            for chunk, r in zip(plan.composition.chunks, plan.chunks)]
    missing = [j for j in jobs if not store.has(j.hash)]
    for done in make_chunks(engine, missing, store, batch, checked=True):   # (checked by Engine.plan)
        if on_chunk:
            on_chunk(done)
    digests = [j.hash for j in jobs]
    assembled = assemble(plan.composition, digests, store, output, plan.join, subtype=subtype, fmt=container,
                         measure=False)
    codes = np.concatenate([store.read_codes(d) for d in digests]) if digests else np.zeros((0, 16), np.int32)
    limited = [j.tag for j in jobs if store.stop_reason(j.hash) == "limit"]
    remove_tree_inside(output.parent, work)
    return TakeFile(assembled, len(jobs), len(jobs) - len(missing), limited, codes)
