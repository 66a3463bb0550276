"""Chunks of long work (a book's chapters, `kazeia say --text-file`) made on the batched engine and kept
on disk as each one ends, so memory holds only the chunks in flight and a run that is stopped (Ctrl+C,
kill -9, a full disk) loses at most those: the next run keeps every chunk whose file is whole.

A chunk's file is named by the hash of everything that decides its audio (text, voice, language,
sampling with its seed, the model), so a kept chunk is one made from the same request, and a chunk
made again with a new seed is a new file beside the old. Each file is written beside its name and
renamed (engine/atomic.py), then a line goes into the store's journal (its samples); a chunk counts
as kept only when its file reads back with the journal's length. Every chunk's audio is exactly
that chunk synthesized alone with its seed (the batcher's promise), whatever ran beside it."""
from __future__ import annotations

import hashlib
import json
import os
import time
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import soundfile

from ..atomic import atomic_path
from ..synthesis.requests import Request
from ..untrusted import fresh_folder
from ..voices.voice import voice_digest

JOURNAL = "journal.jsonl"


@dataclass
class ChunkJob:
    """One chunk to have on disk: its request and the hash that names its file."""
    request: Request
    hash: str
    tag: object = None            # the caller's (which chapter and chunk it is)


def request_digest(request: Request, model: dict) -> str:
    """The hash naming a chunk's file: everything that decides its audio."""
    fields = {"text": request.text, "speaker": request.speaker, "language": request.language,
              "instruct": request.instruct, "voice": voice_digest(request.voice),
              "sampling": asdict(request.sampling) if request.sampling else None,
              "streaming_text": request.streaming_text, "model": model}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:20]


def model_identity(info) -> dict:
    return {"file": info.path.name, "name": info.name, "size": info.size, "type": info.file_type,
            "bytes": info.file_size}


class ChunkStore:
    """A folder of chunk files (float32 WAV, named by hash) and the journal of those finished."""

    def __init__(self, folder: str | os.PathLike, sample_rate: int):
        self.folder, self.sample_rate = Path(folder), sample_rate
        fresh_folder(self.folder, "chunk folder")   # (a symlink left there is refused, never followed)
        for stale in self.folder.glob(".*.partial.*"):   # files a stopped run was writing
            stale.unlink(missing_ok=True)
        self._lengths: dict[str, int] = {}
        self._stop_reasons: dict[str, str] = {}
        journal = self.folder / JOURNAL
        if journal.exists():
            for line in journal.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    self._lengths[str(entry["hash"])] = int(entry["samples"])
                    self._stop_reasons[str(entry["hash"])] = str(entry.get("stop_reason", ""))
                except (ValueError, KeyError, TypeError):
                    continue   # (a line cut short by a kill: that chunk is made again)

    def path(self, digest: str) -> Path:
        return self.folder / f"{digest}.wav"

    def has(self, digest: str) -> bool:
        """The chunk's file is whole: it reads back with the length the journal recorded."""
        samples = self._lengths.get(digest)
        if samples is None:
            return False
        try:
            return soundfile.info(str(self.path(digest))).frames == samples
        except (RuntimeError, soundfile.LibsndfileError):
            return False

    def stop_reason(self, digest: str) -> str:
        return self._stop_reasons.get(digest, "")

    def read(self, digest: str) -> np.ndarray:
        audio, _ = soundfile.read(str(self.path(digest)), dtype="float32", always_2d=False)
        return audio

    def read_codes(self, digest: str) -> np.ndarray:
        return np.load(self.path(digest).with_suffix(".npy"))

    def put(self, digest: str, audio: np.ndarray, codes: np.ndarray, stop_reason: str, worker: str = "local") -> None:
        """The chunk's audio and codes, then its journal line (last: the chunk counts from here)."""
        audio = np.asarray(audio, np.float32).reshape(-1)
        with atomic_path(self.path(digest).with_suffix(".npy")) as partial:
            with open(partial, "wb") as f:
                np.save(f, np.asarray(codes, np.int32))
        with atomic_path(self.path(digest)) as partial:
            soundfile.write(str(partial), audio, self.sample_rate, format="WAV", subtype="FLOAT")
        with open(self.folder / JOURNAL, "a", encoding="utf-8") as f:
            f.write(json.dumps({"hash": digest, "samples": len(audio), "stop_reason": stop_reason, "worker": worker}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._lengths[digest], self._stop_reasons[digest] = len(audio), stop_reason

    def remove_except(self, keep: set[str]) -> int:
        """Chunk files no longer part of the work (made with another seed, text or model): removed."""
        removed = 0
        for path in self.folder.glob("*.wav"):
            if path.stem not in keep:
                path.unlink(missing_ok=True)
                path.with_suffix(".npy").unlink(missing_ok=True)
                removed += 1
        return removed


@dataclass
class MadeChunk:
    """A chunk as it comes off a batcher (here or on a Ray node)."""
    job: ChunkJob
    audio: np.ndarray
    codes: np.ndarray
    stop_reason: str
    seconds: float                 # compute time from its start
    worker: str = "local"          # where it was made (a Ray node id on a cluster)


@dataclass
class ChunkDone:
    job: ChunkJob
    samples: int
    stop_reason: str
    frames: int
    seconds: float                 # compute time from its start


def takes_as_they_end(engine, items: list, request_of: Callable[[object], Request], batch: int = 4,
                      stop: Callable[[], bool] = lambda: False) -> Iterator[tuple[object, object, float]]:
    """The one batch loop of scripts and books: each item's take (Engine.open_take of
    `request_of(item)`) on one batcher of `engine`, `batch` wide with as many again queued so no slot
    waits, given as (item, the ended take, seconds from its start) in the order they end, or (item, the
    ValueError or OSError that refused its request, 0.0). `stop()` true: no more start, and those in
    flight are cancelled (given once ended, within a frame). Abandoned, it leaves nothing running."""
    batcher = engine.batcher(max(1, batch))
    pending, active = list(items), []
    try:
        while pending or active:
            while pending and len(active) < 2 * batch and not stop():
                item = pending.pop(0)
                try:
                    active.append((item, engine.open_take(request_of(item), batcher=batcher), time.perf_counter()))
                except (ValueError, OSError) as e:
                    yield item, e, 0.0
            if stop():
                for _, take, _ in active:
                    take.cancel()
                pending.clear()
            still = []
            for item, take, started in active:
                if take.ended:
                    yield item, take, time.perf_counter() - started
                else:
                    still.append((item, take, started))
            if len(still) == len(active) and still:
                still[0][1].join(0.05)
            active = still
    finally:
        for _, take, _ in active:   # (stopped, failed or abandoned: nothing left running)
            take.cancel()


def synthesize_chunks(engine, jobs: list[ChunkJob], batch: int = 4, stop: Callable[[], bool] = lambda: False
                      ) -> Iterator[MadeChunk]:
    """Every job's chunk synthesized on one batcher of `engine` (takes_as_they_end), in the order they
    end. `stop()` true: the chunks in flight are cancelled and not given."""
    with closing(takes_as_they_end(engine, jobs, lambda job: job.request, batch, stop)) as ended:
        for job, take, seconds in ended:
            if stop():
                return   # (what was in flight is dropped, not kept: a resume makes it again)
            if isinstance(take, Exception):
                raise take
            if take.error is not None:
                raise take.error
            if take.result.stop_reason != "cancelled":
                yield MadeChunk(job, take.result.audio, take.result.codes, take.result.stop_reason, seconds)


def make_chunks(engine, jobs: list[ChunkJob], store: ChunkStore, batch: int = 4,
                stop: Callable[[], bool] = lambda: False, checked: bool = False, executor=None) -> Iterator[ChunkDone]:
    """Every job's chunk (its request one prompt: Request.plan) made and put in `store` as it ends, in the
    order they end: on `engine`'s batcher (synthesize_chunks), or by `executor` (engine/script/cluster.py's
    RayExecutor: the same audio from any node, made by its own engine). The jobs' requests are all
    checked on `engine` (ValueError) before the first starts, unless the caller has (`checked`).
    `stop()` true: the chunks in flight are dropped, not kept."""
    for job in () if checked else jobs:
        engine.plan(job.request)
    made = (executor.make_chunks(jobs, stop) if executor is not None
            else synthesize_chunks(engine, jobs, batch, stop))
    for chunk in made:
        store.put(chunk.job.hash, chunk.audio, chunk.codes, chunk.stop_reason, chunk.worker)
        yield ChunkDone(chunk.job, len(chunk.audio), chunk.stop_reason, len(chunk.codes), chunk.seconds)
