"""Rendering a script to a folder of audio files, resumably. The driver (this module) checks the
script, plans every line (its full request, a hash of it, its output file), hands the lines to an
executor (this engine, batched; or workers on a Ray cluster: engine/script/cluster.py) and writes each
result as it arrives: the audio file atomically, with its parameters embedded, then one line in
OUTDIR/manifest.jsonl. A line is "done" in the manifest only once its file is complete, so after a
crash `resume` keeps exactly the lines whose file exists, reads back and was made from the same
request, and renders the rest."""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import soundfile

from ..audio_io import NAMED_FORMATS, write_audio
from ..long_take.chunks import takes_as_they_end
from ..synthesis.requests import Request, SamplingParams
from ..synthesis.engine import Engine
from .lines import ScriptError, ScriptLine, check_for_model, output_names, read_script, request_hash

MANIFEST = "manifest.jsonl"
OVERRIDES = "overrides.json"   # per line id, settings that win over the script's (the workbench's "new seed")


@dataclass
class RenderOptions:
    out_dir: Path
    fmt: str = "wav"              # wav (32-bit float) | wav16 | flac
    name: str = "{id}"            # output name pattern: {id}, {index}, {speaker}
    batch: int = 4                # lines advanced together
    resume: bool = False
    seed: int = 0                 # for lines without a seed of their own
    skip_invalid: bool = False    # render the valid lines, list the others as skipped
    speaker: str | None = None    # for lines without a speaker of their own
    language: str | None = None   # for lines without a language of their own (None: auto)
    instruct: str | None = None   # for lines without an instruction of their own
    voice: str | None = None      # a voice profile's path, for lines without a voice of their own
    lexicon: object | None = None  # text.lexicon.Lexicon: pronunciation rules for every line
    lexicon_digest: str | None = None   # what the rules' files held (in each line's request: resume sees a change)


@dataclass
class LineJob:
    line: ScriptLine
    request: dict                 # everything that decides the audio (hashed)
    hash: str
    path: Path                    # the output file
    lexicon: object | None = None  # pronunciation rules (RenderOptions.lexicon)

    def engine_request(self, engine: Engine, folder: Path) -> Request:
        """The line's Request: what its hashed request says, its voice profile loaded."""
        from ..voices.voice import load_voice
        voice = load_voice(folder / self.line.voice, engine.model) if self.line.voice else None
        r = self.request
        return Request(r["text"], speaker=r["speaker"], language=r["language"], instruct=r["instruct"], voice=voice,
                       sampling=SamplingParams(**r["sampling"]), lexicon=self.lexicon)


@dataclass
class RenderPlan:
    script: Path
    options: RenderOptions
    jobs: list[LineJob]                                   # to render
    kept: list[LineJob] = field(default_factory=list)     # done before, unchanged (resume)
    invalid: list[tuple[int, str, str]] = field(default_factory=list)   # skipped (--skip-invalid)


@dataclass
class LineOutcome:
    """What an executor returns for one line."""
    audio: np.ndarray | None = None
    sample_rate: int = 24000
    stop_reason: str = ""
    timings: dict = field(default_factory=dict)
    error: str | None = None
    worker: str = "local"         # where it was rendered (a Ray node id on a cluster)


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def read_manifest(out_dir: Path) -> dict[str, dict]:
    """The last entry of every line id (a line cut short by a crash is ignored)."""
    entries = {}
    path = Path(out_dir) / MANIFEST
    if path.exists():
        for text in path.read_text(encoding="utf-8").splitlines():
            try:
                e = json.loads(text)
            except json.JSONDecodeError:
                continue
            if isinstance(e, dict) and "id" in e:
                entries[e["id"]] = e
    return entries


def read_overrides(out_dir: Path) -> dict[str, dict]:
    try:
        data = json.loads((Path(out_dir) / OVERRIDES).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, json.JSONDecodeError):
        return {}


def set_override(out_dir: Path, line_id: str, **settings) -> None:
    """Settings of one line that win over the script's from now on (kept in the output folder)."""
    from ..atomic import atomic_write_text
    data = read_overrides(out_dir)
    data.setdefault(line_id, {}).update(settings)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(out_dir) / OVERRIDES, json.dumps(data, indent=1))


def _complete(path: Path, samples: int) -> bool:
    try:
        return soundfile.info(str(path)).frames == samples
    except (RuntimeError, soundfile.LibsndfileError):
        return False


def plan_render(script: str | os.PathLike, engine: Engine, options: RenderOptions) -> RenderPlan:
    """Checks every line (raises ScriptError listing them all unless skip_invalid) and plans each."""
    script = Path(script)
    if options.fmt not in NAMED_FORMATS:
        raise ValueError(f"unknown format {options.fmt!r}; choose {', '.join(NAMED_FORMATS)}")
    if options.batch < 1:
        raise ValueError("batch must be at least 1")
    lines, problems = read_script(script)
    overrides = read_overrides(options.out_dir)
    for line in lines:
        if "seed" in overrides.get(line.id, {}):
            line.seed = int(overrides[line.id]["seed"])
        for key in ("speaker", "language", "instruct", "voice"):
            if getattr(options, key) is not None and getattr(line, key) is None:
                setattr(line, key, getattr(options, key))
    problems += check_for_model([ln for ln in lines if not any(p[0] == ln.number for p in problems)], engine,
                                script.parent, options.lexicon)
    names, clashes = output_names(lines, options.name)
    problems += clashes
    if problems and not options.skip_invalid:
        raise ScriptError(script, sorted(problems))
    bad = {p[0] for p in problems}
    ext = NAMED_FORMATS[options.fmt][0]
    model = {"file": engine.info.path.name, "name": engine.info.name, "size": engine.info.size,
             "type": engine.info.file_type, "bytes": engine.info.file_size}
    jobs = []
    for line in lines:
        if line.number in bad:
            continue
        sampling = SamplingParams.from_model(engine.info, **line.sampling,
                                             seed=line.seed if line.seed is not None else options.seed)
        voice = None
        if line.voice:
            voice = {"path": line.voice, "sha256": _file_digest(script.parent / line.voice)}
        request = {"text": line.text, "speaker": line.speaker, "language": line.language or "auto",
                   "instruct": line.instruct, "voice": voice, "sampling": asdict(sampling), "format": options.fmt,
                   "model": model}
        if options.lexicon is not None:   # (only then: the hashes of renders without rules stay as they were)
            request["lexicon"] = options.lexicon_digest
        jobs.append(LineJob(line, request, request_hash(request), Path(options.out_dir) / f"{names[line.id]}{ext}",
                            options.lexicon))
    plan = RenderPlan(script, options, jobs, invalid=sorted(problems))
    if options.resume:
        done = read_manifest(options.out_dir)
        keep = []
        for job in plan.jobs:
            e = done.get(job.line.id)
            if e and e.get("status") == "done" and e.get("hash") == job.hash and \
                    _complete(job.path, int(e.get("samples", -1))):
                keep.append(job)
        plan.kept = keep
        plan.jobs = [j for j in plan.jobs if j not in keep]
    return plan


@dataclass
class RenderSummary:
    done: int = 0
    failed: int = 0
    kept: int = 0
    skipped: int = 0
    warnings: int = 0
    audio_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.failed == 0

    @property
    def rtf(self) -> float:
        return self.wall_seconds / self.audio_seconds if self.audio_seconds else float("nan")


class LocalExecutor:
    """This process's engine, `batch` lines advancing together."""

    def __init__(self, engine: Engine, batch: int):
        self.engine, self.batch = engine, batch

    def run(self, jobs: list[LineJob], folder: Path, stop: Callable[[], bool] = lambda: False
            ) -> Iterator[tuple[LineJob, LineOutcome]]:
        """Each line's outcome as its take ends (the batch loop books share: takes_as_they_end)."""
        for job, take, _ in takes_as_they_end(self.engine, jobs, lambda job: job.engine_request(self.engine, folder),
                                              self.batch, stop):
            yield job, LineOutcome(error=str(take)) if isinstance(take, Exception) else outcome_of(take)


def outcome_of(take) -> LineOutcome:
    """What a line's take (Engine.open_take: one prompt's or a chunked take, ended) gave."""
    try:
        r = take.wait()
    except Exception as e:
        return LineOutcome(error=f"{type(e).__name__}: {e}")
    t = r.timings
    return LineOutcome(r.audio, r.sample_rate, r.stop_reason,
                       {"prefill_ms": t.prefill_ms, "talker_ms": t.mean_ms("talker"),
                        "code_predictor_ms": t.mean_ms("code_predictor"), "decoder_ms": t.mean_ms("decoder"),
                        "frames": t.frames, "total_ms": t.total_ms})


def _append(path: Path, entry: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def render(plan: RenderPlan, executor, on_line: Callable[[LineJob, dict, RenderSummary], None] | None = None,
           stop: Callable[[], bool] = lambda: False) -> RenderSummary:
    """Runs the plan's jobs through `executor`; writes files and the manifest as results arrive.
    A failing line never stops the others. `stop()` true: in-flight lines are cancelled."""
    out = Path(plan.options.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".*.partial.*"):   # files a killed render was writing
        stale.unlink(missing_ok=True)
    manifest = out / MANIFEST
    summary = RenderSummary(kept=len(plan.kept), skipped=len(plan.invalid))
    for n, ident, why in plan.invalid:
        _append(manifest, {"id": ident, "line": n, "status": "skipped", "error": why})
    start = time.perf_counter()
    _, _, subtype = NAMED_FORMATS[plan.options.fmt]
    for job, outcome in executor.run(plan.jobs, plan.script.parent, stop):
        entry = {"id": job.line.id, "line": job.line.number, "hash": job.hash, "request": job.request,
                 "file": job.path.name}
        if outcome.error is not None or outcome.audio is None:
            entry.update(status="failed", error=outcome.error or "no audio")
            summary.failed += 1
        elif outcome.stop_reason == "cancelled":
            continue   # not rendered; a later run renders it
        else:
            params = {"id": job.line.id, "hash": job.hash, **job.request, "stop_reason": outcome.stop_reason}
            write_audio(job.path, outcome.audio, outcome.sample_rate, subtype=subtype, title=job.line.text,
                        params=params)
            seconds = len(outcome.audio) / outcome.sample_rate
            entry.update(status="done", samples=len(outcome.audio), duration_s=seconds, stop_reason=outcome.stop_reason,
                         timings=outcome.timings, worker=outcome.worker)
            if outcome.stop_reason == "limit" and job.request["sampling"].get("max_frames") is None:
                entry["warning"] = "stopped at the runaway limit (no end of speech): listen to it"
                summary.warnings += 1
            summary.done += 1
            summary.audio_seconds += seconds
        summary.wall_seconds = time.perf_counter() - start
        _append(manifest, entry)
        if on_line:
            on_line(job, entry, summary)
    summary.wall_seconds = time.perf_counter() - start
    return summary
