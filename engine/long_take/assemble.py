"""One take (a chapter, a long `say`) written to its file from the chunks on disk, piece by piece: the
same joins and pauses as `text.join.join` (its streaming form, TakeAssembler, bit for bit), so memory
holds one chunk at a time whatever the take's length. On the way the loudness meter sees every sample
and each chunk's place in the take is kept (for subtitles and for listening to one chunk)."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile

from ..atomic import atomic_path
from ..audio_io import reproducible
from ..text.compose import Composition, PlannedChunk
from ..text.join import JoinSettings, TakeAssembler
from .chunks import ChunkStore


@dataclass
class Cue:
    """Where one chunk is heard in a take: [start, end) in samples, and its words."""
    start: int
    end: int
    text: str
    chunk: int                   # the chunk's index in its composition


@dataclass
class Assembled:
    path: Path
    samples: int
    sample_rate: int
    cues: list[Cue]
    loudness_hops: np.ndarray = field(repr=False)   # LoudnessMeter.hops
    loudness: float                                  # integrated, LUFS
    true_peak: float                                 # dBTP

    @property
    def seconds(self) -> float:
        return self.samples / self.sample_rate


def assemble(composition: Composition, digests: list[str], store: ChunkStore, out: str | os.PathLike,
             join: JoinSettings | None = None, subtype: str = "FLOAT", fmt: str | None = None,
             measure: bool = True) -> Assembled:
    """The take of `composition` (its chunks' audio from `store`, digests in chunk order) written to
    `out` (atomically; float32 WAV unless `fmt`/`subtype` say otherwise); `measure`: its loudness
    too (else nan: SciPy's filters are not even imported)."""
    join = join or JoinSettings()
    rate = store.sample_rate
    assembler = TakeAssembler(rate, join)
    if measure:
        from ..takes.loudness import LoudnessMeter
        meter = LoudnessMeter(rate)
    chunks = iter(digests)
    planned: list[PlannedChunk] = []
    out = Path(out)
    samples = 0
    with atomic_path(out) as partial, soundfile.SoundFile(str(partial), "w", rate, 1, format=fmt or "WAV",
                                                          subtype=subtype) as f:
        reproducible(f)

        def write(audio: np.ndarray) -> None:
            nonlocal samples
            if len(audio):
                f.write(audio)
                if measure:
                    meter.add(audio)
                samples += len(audio)

        for piece in composition.pieces:
            if isinstance(piece, PlannedChunk):
                write(assembler.audio(store.read(next(chunks))))
                write(assembler.end_chunk())
                planned.append(piece)
            else:
                assembler.pause(piece)
        write(assembler.finish())
    cues = [Cue(start, end, " ".join(chunk.written.split()), chunk.index)
            for chunk, (start, end) in zip(planned, assembler.spans)]
    if not measure:
        return Assembled(out, samples, rate, cues, np.zeros(0), math.nan, math.nan)
    return Assembled(out, samples, rate, cues, meter.hops, meter.integrated(), meter.true_peak)
