"""The engine on one worker thread. Widgets never call the engine: every request (load, placement
and threads, a take, a script, a voice profile, a preview) is a Job, run on the worker in the order
asked. A job carries its own signals (napari's thread_worker shape): whoever asked connects to the
job it got, so no outcome is told to everyone and sorted by a string. A placement or thread change
asked for while a take runs is queued behind it, so it applies to the next take; each take reports
the placement and threads it actually ran with."""
from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from kazeia.engine import (Engine, ModelFile, SamplingParams, create_voice, load_voice, resolve_model, save_voice,
                           converted_checkpoint)
from kazeia.engine.proc_stats import peak_rss_mb, reset_peak_rss

from .take_request import TakeRequest

PREVIEW_TEXT = "This is how I sound."
PREVIEW_SECONDS = 6   # a preview stops here whatever the model does


@dataclass
class Ran:
    """What a take actually ran with (read from the engine on the worker, not from the widgets)."""
    placement: dict
    threads: int
    peak_memory_mb: float = 0.0
    tag: dict = field(default_factory=dict)   # the caller's own labels (e.g. a comparison's side)


@dataclass
class TakeOutcome:
    result: object   # the engine's Result
    ran: Ran
    chunks: list = field(default_factory=list)   # a long text's chunks (long_text.ChunkTake); [] for one prompt


def _message(e: BaseException) -> str:
    return str(e) or traceback.format_exc(limit=1)


class Job(QObject):
    """One request to the engine's worker. Its signals are emitted on the worker thread and reach
    the connected widgets on the GUI thread (queued)."""
    started = Signal(object)    # a take: the Ran it starts with
    progress = Signal(object)   # a take: a Chunk; a script: (manifest entry, summary); a load: (done, total)
    status = Signal(str)        # words for the status bar
    finished = Signal(object)   # the result (per kind: ModelInfo, Ran, TakeOutcome, RenderSummary, name, audio)
    failed = Signal(str)        # a message naming what went wrong

    def __init__(self, kind: str, work):
        super().__init__()
        self.kind = kind
        self._work = work          # work(engine_holder, job) -> result, on the worker thread
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self.stream = None         # a take's running stream (cancel reaches it)

    def cancel(self) -> None:
        self.cancelled.set()
        with self._lock:
            if self.stream is not None:
                self.stream.cancel()

    def attach(self, stream) -> None:
        with self._lock:
            self.stream = stream
        if self.cancelled.is_set():
            stream.cancel()

    def run(self, worker: "_Worker") -> None:
        try:
            result = self._work(worker, self)
        except Exception as e:   # nothing the engine raises may take the GUI down
            self.failed.emit(_message(e))
            return
        self.finished.emit(result)


class _Worker(QObject):
    """Runs jobs, one after the other, on the engine's thread; holds the engine."""

    def __init__(self):
        super().__init__()
        self.engine: Engine | None = None

    @Slot(object)
    def run(self, job: Job) -> None:
        job.run(self)

    def require_engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("no model is loaded")
        return self.engine

    def apply(self, placement, threads) -> Ran:
        engine = self.require_engine()
        if threads is not None:
            engine.set_threads(int(threads))
        if placement is not None and placement != engine.placement:
            engine.set_placement(placement)
        return Ran(dict(engine.placement), engine.threads)


# ---- the work of each kind of job (on the worker thread) ----------------------------------------
def _load(worker: _Worker, job: Job, path: str, threads, placement, out_type: str):
    try:
        p = resolve_model(path)   # ("demo" is the bundled demo model, as on the command line)
        if p.is_dir():   # a downloaded Hugging Face checkpoint: converted once, cached
            p = converted_checkpoint(p, out_type, on_start=job.status.emit,
                                     on_progress=lambda done, total: job.progress.emit((done // 1000, total // 1000)))
        worker.engine = Engine(ModelFile(p), threads=threads, placement=placement)
    except Exception as e:
        raise RuntimeError(f"cannot open {path}: {_message(e)}") from e
    try:   # while the operator types: the first take's latencies are then those of the next ones
        worker.engine.warm_up()
    except Exception as e:
        job.status.emit(f"warm-up failed (takes still run): {_message(e)}")
    return worker.engine


def _apply(worker: _Worker, job: Job, placement, threads) -> Ran:
    return worker.apply(placement, threads)


def _take(worker: _Worker, job: Job, request: TakeRequest) -> TakeOutcome:
    engine = worker.require_engine()
    ran = worker.apply(request.placement, request.threads)
    ran.tag = request.tag
    voice = load_voice(request.voice_profile, engine.model) if request.voice_profile else None
    reset_peak_rss()
    # one rule for one prompt or a long take (Engine.take); markup errors name line and column
    stream = engine.take(request.engine_request(voice), lexicon=request.lexicon, chunk_seeds=request.chunk_seeds)
    job.attach(stream)
    job.started.emit(ran)
    for chunk in stream:
        job.progress.emit(chunk)
    ran.peak_memory_mb = peak_rss_mb()
    return TakeOutcome(stream.result, ran, getattr(stream, "takes", []))


def _script(worker: _Worker, job: Job, request: dict):
    """A script through the render core (as `kazeia render`): all lines (those done and unchanged
    are kept) or the given ids (rendered again)."""
    from kazeia.engine.render import LocalExecutor, RenderOptions, plan_render, render
    engine = worker.require_engine()
    options = RenderOptions(Path(request["out_dir"]), fmt=request["fmt"], batch=int(request["batch"]), resume=True,
                            skip_invalid=True)
    plan = plan_render(request["script"], engine, options)
    if request.get("ids") is not None:
        wanted = set(request["ids"])
        every = plan.jobs + plan.kept
        plan.jobs = [j for j in every if j.line.id in wanted]
        plan.kept, plan.invalid = [j for j in every if j.line.id not in wanted], []
    return render(plan, LocalExecutor(engine, options.batch),
                  on_line=lambda _, entry, summary: job.progress.emit((entry, summary)), stop=job.cancelled.is_set)


def _voice(worker: _Worker, job: Job, name: str, audio_path: str, transcript, out_path: str) -> str:
    engine = worker.require_engine()
    if engine.info.variant != "base":
        raise ValueError("voice profiles need a Base model")
    save_voice(create_voice(engine.model, audio_path, text=transcript), Path(out_path), engine.model)
    return name


def _preview(worker: _Worker, job: Job, profile_path: str, language: str):
    engine = worker.require_engine()
    voice = load_voice(profile_path, engine.model)
    info = engine.info
    sampling = SamplingParams.from_model(info, seed=0, max_frames=int(PREVIEW_SECONDS * info.frame_rate))
    return engine.synthesize(PREVIEW_TEXT, language=language, voice=voice, sampling=sampling).audio


class EngineController(QObject):
    """Makes jobs and runs them on the worker. `submitted` tells observers (tests, a log) of every
    job once its asker has connected to it."""
    submitted = Signal(object)   # Job
    _run = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.engine: Engine | None = None   # for reading info only; calls go through the worker
        self._thread = QThread()
        self._thread.setObjectName("kazeia-engine")
        self._worker = _Worker()
        self._worker.moveToThread(self._thread)
        self._run.connect(self._worker.run)
        self._thread.start()
        self.take: Job | None = None     # the take queued or running
        self.script: Job | None = None   # the script rendering (takes wait for it)
        self.loading = False

    @property
    def busy(self) -> bool:
        return self.take is not None

    @property
    def rendering(self) -> bool:
        return self.script is not None

    # -- jobs: made here, connected by the asker, then submitted ----------------------------------
    def load_model(self, path: str | None, threads: int, placement, out_type: str = "q8_0") -> Job:
        job = Job("load", partial(_load, path=str(path or "demo"), threads=threads, placement=placement,
                                  out_type=out_type))
        self.loading = True
        job.finished.connect(self._loaded)
        job.failed.connect(self._load_failed)
        return job

    def apply(self, placement: dict | None = None, threads: int | None = None) -> Job | None:
        """Queued behind any running take: applies to the next one."""
        if self.engine is None:
            return None
        return Job("apply", partial(_apply, placement=placement, threads=threads))

    def generate(self, request: TakeRequest) -> Job | None:
        """A take of `request`; None when no model is loaded, a take is already running or a script is
        rendering."""
        if not self._idle():
            return None
        self.take = self._until_done(Job("take", partial(_take, request=request)), self._take_ended)
        return self.take

    def render_script(self, request: dict) -> Job | None:
        """request: script, out_dir, fmt, batch, ids (None: every line). None while a take or
        another script runs, or no model is loaded."""
        if not self._idle():
            return None
        self.script = self._until_done(Job("script", partial(_script, request=dict(request))), self._script_ended)
        return self.script

    def create_voice(self, name: str, audio_path: str, transcript: str | None, out_path: Path) -> Job:
        return Job("voice", partial(_voice, name=name, audio_path=str(audio_path), transcript=transcript,
                                    out_path=str(out_path)))

    def preview(self, profile_path: Path, language: str = "auto") -> Job:
        return Job("preview", partial(_preview, profile_path=str(profile_path), language=language))

    def _idle(self) -> bool:
        """A model is loaded and no take, script or load holds the worker."""
        return self.engine is not None and not (self.busy or self.rendering or self.loading)

    @staticmethod
    def _until_done(job: Job, ended) -> Job:
        job.finished.connect(ended)
        job.failed.connect(ended)
        return job

    def submit(self, job: Job) -> Job:
        self.submitted.emit(job)
        self._run.emit(job)
        return job

    # -- the rest ----------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stops the running take and the rendering script."""
        for job in (self.take, self.script):
            if job is not None:
                job.cancel()

    def shutdown(self) -> None:
        self.cancel()
        self._thread.quit()
        self._thread.wait()

    # (slots of this object, never lambdas: a job emits on the worker thread, and only a receiver
    # that is a QObject of the GUI thread has its slot run there)
    def _loaded(self, engine: Engine) -> None:
        self.engine = engine
        self.loading = False

    def _load_failed(self, _message: str) -> None:
        self.loading = False

    def _take_ended(self, _outcome) -> None:
        self.take = None

    def _script_ended(self, _outcome) -> None:
        self.script = None
