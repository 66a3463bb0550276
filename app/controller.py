"""The engine on one worker thread. Widgets never call the engine: every request (load, placement
and threads, a take, a script, a voice profile, a preview) is a Job, run on the worker in the order
asked. What must not wait behind a take (a model download, starting and stopping the server, which
has threads of its own and shares the engine's batches) runs as a Job on a second, service thread. A job carries its own signals (napari's thread_worker shape): whoever asked connects to the
job it got, so no outcome is told to everyone and sorted by a string. A placement or thread change
asked for while a take runs is queued behind it, so it applies to the next take; each take reports
the placement and threads it actually ran with."""
from __future__ import annotations

import threading
import time
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
SERVICE_JOBS = ("pull", "serve", "stop-serving")   # run on the service thread, never behind a take


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
    text: str | None = None   # a typed take's text, known once it is done


class TypedText:
    """The text of a take spoken as it is typed, from the GUI thread to the take's stream: kept until
    the stream exists (the job may still wait for the worker), then handed on. Writing only tokenizes
    the text (microseconds); the engine's work stays on its threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._closed = False
        self._stream = None
        self.error: str | None = None   # why the text was refused (over the one-utterance limit)

    def write(self, delta: str) -> None:
        with self._lock:
            if self._closed or self.error:
                return
            if self._stream is None:
                self._pending.append(delta)
                return
            self._write(delta)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._stream is not None:
                self._close()

    def attach(self, stream) -> None:
        with self._lock:
            self._stream = stream
            for delta in self._pending:
                self._write(delta)
            self._pending.clear()
            if self._closed:
                self._close()

    def _write(self, delta: str) -> None:
        try:
            self._stream.write(delta)
        except ValueError as e:
            self.error = str(e)
            self._stream.cancel()

    def _close(self) -> None:
        try:
            self._stream.close()
        except ValueError as e:   # (nothing but spaces was typed)
            self.error = str(e)


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
        self.typed: TypedText | None = None   # a typed take's text (speak_typed)

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


@dataclass
class ServeRequest:
    """What the Serve dialog asks for (checked there: another address than loopback needs a key)."""
    host: str
    port: int
    api_key: str | None
    wyoming_port: int | None       # None: no Wyoming server
    voices_folder: Path            # a Base model offers the voice library's profiles
    observer: object = None        # called with each request's record, on the server's thread
    wyoming_allow: tuple[str, ...] = ()   # the networks Wyoming's clients may come from (beyond loopback)


@dataclass
class Serving:
    server: object                 # kazeia.engine.serve.local.LocalServer
    voices: list[str]              # as a client names them, with what each maps to


class _Worker(QObject):
    """Runs jobs, one after the other, on the engine's thread; holds the engine."""

    def __init__(self):
        super().__init__()
        self.engine: Engine | None = None
        self._other: tuple[str, Engine] | None = None   # another model file a comparison's B runs on

    @Slot(object)
    def run(self, job: Job) -> None:
        job.run(self)

    def require_engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("no model is loaded")
        return self.engine

    def engine_for(self, model_path: str | None) -> Engine:
        """The loaded engine, or one on another model file of the same variant (kept for the next
        take that asks for it; one at a time)."""
        engine = self.require_engine()
        if model_path is None or Path(model_path).resolve() == Path(engine.info.path).resolve():
            return engine
        if self._other is None or self._other[0] != model_path:
            self._other = None   # (the previous one freed first)
            other = Engine(ModelFile(model_path), threads=engine.threads, placement=dict(engine.placement))
            if other.info.variant != engine.info.variant:
                raise ValueError(f"{Path(model_path).name} is a {other.info.variant} model; the loaded one is "
                                 f"{engine.info.variant}: compare models of one variant")
            other.warm_up()
            self._other = (model_path, other)
        return self._other[1]

    def apply(self, placement, threads, engine: Engine | None = None) -> Ran:
        engine = engine or self.require_engine()
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
        worker._other = None   # (a comparison's other model belongs to the model loaded before)
        worker.engine = Engine(ModelFile(p), threads=threads, placement=placement)
    except Exception as e:
        raise RuntimeError(f"cannot open {path}: {_message(e)}") from e
    try:   # while the operator types: the first take's latencies are then those of the next ones
        worker.engine.warm_up()
    except Exception as e:
        job.status.emit(f"warm-up failed (takes still run): {_message(e)}")
    return worker.engine


def _pull(worker, job: Job, source: str):
    """A download, verified, converted and registered (`kazeia pull`'s steps); on the service thread."""
    from kazeia.engine.model_files.errors import PullCancelled, PullError
    from kazeia.engine.models.pull import pull_model
    try:
        return pull_model(source, on_progress=job.progress.emit, cancel=job.cancelled, on_note=job.status.emit)
    except PullCancelled:
        raise RuntimeError("cancelled: nothing was registered; what was downloaded is kept, and the next "
                           "download continues from it") from None
    except (PullError, ValueError, OSError) as e:
        raise RuntimeError(str(e)) from None


def _serve(worker, job: Job, engine: Engine, request: ServeRequest) -> Serving:
    """kazeia serve's app on the loaded engine (on the service thread: the server has threads of its
    own and its requests join the engine's batches, so a take running meanwhile is not waited for)."""
    from kazeia.engine.serve.app import ServerSettings, create_app
    from kazeia.engine.serve.local import LocalServer
    from kazeia.engine.serve.voices import VoiceBook
    info = engine.info
    voices = VoiceBook(engine.model, request.voices_folder if info.variant == "base" else None)
    wyoming = (request.host, request.wyoming_port) if request.wyoming_port else None
    settings = ServerSettings(info.path.stem, api_key=request.api_key, max_batch=max(1, engine.max_batch),
                              wyoming=wyoming, listen_host=request.host, wyoming_allow=list(request.wyoming_allow))
    app = create_app(engine, voices, settings, observer=request.observer)
    server = LocalServer(app, port=request.port, host=request.host)
    return Serving(server, [v["id"] + (f" ({v['maps_to']})" if "maps_to" in v else "") for v in voices.listing()])


def _stop_serving(worker, job: Job, serving: Serving) -> None:
    serving.server.stop()


def _apply(worker: _Worker, job: Job, placement, threads) -> Ran:
    return worker.apply(placement, threads)


def _take(worker: _Worker, job: Job, request: TakeRequest) -> TakeOutcome:
    engine = worker.engine_for(request.model_path)
    ran = worker.apply(request.placement, request.threads, engine)
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


def _typed_take(worker: _Worker, job: Job, request: TakeRequest) -> TakeOutcome:
    """A take whose text is typed while it is spoken (Engine.open_text_stream): the take the whole
    text would be, its chunks begun as their words are known."""
    engine = worker.require_engine()
    ran = worker.apply(request.placement, request.threads)
    voice = load_voice(request.voice_profile, engine.model) if request.voice_profile else None
    reset_peak_rss()
    stream = engine.open_text_stream(speaker=request.speaker, language=request.language, instruct=request.instruct,
                                     voice=voice, sampling=request.sampling)
    job.attach(stream)
    job.typed.attach(stream)
    job.started.emit(ran)
    for chunk in stream:
        job.progress.emit(chunk)
    if job.typed.error:
        raise ValueError(job.typed.error)
    if stream.result is None:
        raise ValueError("nothing was typed" if not job.cancelled.is_set() else "stopped before any text")
    ran.peak_memory_mb = peak_rss_mb()
    # (its chunks, as a long take's; none when the whole text was one prompt, as for any take)
    return TakeOutcome(stream.result, ran, [] if stream.one_prompt else stream.takes, stream.text)


def _script(worker: _Worker, job: Job, request: dict):
    """A script through the render core (as `kazeia render`): all lines (those done and unchanged
    are kept) or the given ids (rendered again)."""
    from kazeia.engine.script.render import LocalExecutor, RenderOptions, plan_render, render
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


def _book(worker: _Worker, job: Job, request: dict):
    """A book through the book core (as `kazeia book`), in the window's voice and sampling (its seed
    and frame limit too); resumes what the folder holds. Progress goes out as plain snapshots (the
    Progress object stays on this thread)."""
    from kazeia.engine.takes.loudness import LoudnessTarget
    from kazeia.engine.book.render import BookOptions, plan_book, render_book
    from kazeia.engine.book.source import read_book
    engine = worker.require_engine()
    voice = None
    if request.get("voice_profile"):
        from kazeia.engine.voices.voice import load_voice
        voice = load_voice(request["voice_profile"], engine.model)
    options = BookOptions(Path(request["out_dir"]), formats=tuple(request["formats"]), m4b=request["m4b"],
                          loudness=LoudnessTarget(request["loudness"], -3.0, request["per"]),
                          speaker=request.get("speaker"), language=request.get("language") or "auto",
                          instruct=request.get("instruct"), voice=voice, batch=int(request.get("batch", 4)),
                          sampling=request.get("sampling"), seed=request["sampling"].seed if request.get("sampling") else 0,
                          lexicon=request.get("lexicon"))
    plan = plan_book(read_book(request["book"]), engine, options)

    def progress(p) -> None:
        job.progress.emit({"chapter_chunks": dict(p.chapter_chunks), "chapters_written": list(p.chapters_written),
                           "chunks_done": p.chunks_done, "chunks_total": p.chunks_total, "chunks_kept": p.chunks_kept,
                           "seconds_left": p.seconds_left, "stage": p.stage})
    return render_book(plan, engine, progress, stop=job.cancelled.is_set)


def _voice(worker: _Worker, job: Job, name: str, audio_path: str, transcript, out_path: str) -> str:
    engine = worker.require_engine()
    if engine.info.variant != "base":
        raise ValueError("voice profiles need a Base model")
    save_voice(create_voice(engine.model, audio_path, text=transcript), Path(out_path), engine.model,
               {"source": "recording", "created": time.time(), "origin": {"file": Path(audio_path).name}})
    return name


def _keep_voice(worker: _Worker, job: Job, record: dict, audio, sample_rate: int, model_paths: list[str], name: str,
                library_folder: str) -> list[str]:
    """A take's voice kept with each Base model given (the loaded one is used as it is)."""
    from kazeia.engine.voices.keep_voice import keep_voice, reference_from_take
    from kazeia.engine.model_files.model_file import open_model
    from kazeia.engine.voices.voice_library import VoiceLibrary
    reference = reference_from_take(audio, sample_rate, record, f"take {record.get('name') or record.get('id')}")
    engine = worker.engine
    models = [engine.model if engine is not None and str(engine.info.path) == p else open_model(p) for p in model_paths]
    return keep_voice(reference, models, VoiceLibrary(library_folder), name)


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
    _run_service = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.engine: Engine | None = None   # for reading info only; calls go through the worker
        self._thread, self._worker = self._start_worker("kazeia-engine", self._run)
        self._service_thread, self._service = self._start_worker("kazeia-service", self._run_service)
        self.take: Job | None = None     # the take queued or running
        self.script: Job | None = None   # the script or book rendering (takes wait for it)
        self.pull: Job | None = None     # the model download running
        self.serving: Serving | None = None
        self.loading = False

    @staticmethod
    def _start_worker(name: str, run: Signal) -> tuple[QThread, "_Worker"]:
        """A worker on a thread of its own, running each job emitted on `run` in order."""
        thread, worker = QThread(), _Worker()
        thread.setObjectName(name)
        worker.moveToThread(thread)
        run.connect(worker.run)
        thread.start()
        return thread, worker

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

    def speak_typed(self, request: TakeRequest) -> Job | None:
        """A take of text typed while it is spoken: write to the job's `typed` (TypedText), close it
        to finish. None when a take cannot start (as generate)."""
        if not self._idle():
            return None
        job = Job("take", partial(_typed_take, request=request))
        job.typed = TypedText()
        self.take = self._until_done(job, self._take_ended)
        return self.take

    def render_script(self, request: dict) -> Job | None:
        """request: script, out_dir, fmt, batch, ids (None: every line). None while a take or
        another script runs, or no model is loaded."""
        if not self._idle():
            return None
        self.script = self._until_done(Job("script", partial(_script, request=dict(request))), self._script_ended)
        return self.script

    def render_book(self, request: dict) -> Job | None:
        """request: book, out_dir, formats, loudness, per, m4b and the voice (speaker, language, instruct,
        voice_profile). None while a take or another render runs, or no model is loaded."""
        if not self._idle():
            return None
        self.script = self._until_done(Job("book", partial(_book, request=dict(request))), self._script_ended)
        return self.script

    def create_voice(self, name: str, audio_path: str, transcript: str | None, out_path: Path) -> Job:
        return Job("voice", partial(_voice, name=name, audio_path=str(audio_path), transcript=transcript,
                                    out_path=str(out_path)))

    def keep_voice(self, record: dict, audio, sample_rate: int, model_paths: list[str], name: str,
                   library_folder: Path) -> Job:
        return Job("keep voice", partial(_keep_voice, record=record, audio=audio, sample_rate=sample_rate,
                                         model_paths=list(model_paths), name=name, library_folder=str(library_folder)))

    def preview(self, profile_path: Path, language: str = "auto") -> Job:
        return Job("preview", partial(_preview, profile_path=str(profile_path), language=language))

    # -- on the service thread ------------------------------------------------------------------
    def pull_model(self, source: str) -> Job | None:
        """A download (a catalog alias or a repository id); None while another runs. cancel_pull()
        stops it; what was downloaded is kept for the next try."""
        if self.pull is not None:
            return None
        self.pull = self._until_done(Job("pull", partial(_pull, source=source)), self._pull_ended)
        return self.pull

    def cancel_pull(self) -> None:
        if self.pull is not None:
            self.pull.cancel()

    def start_server(self, request: ServeRequest) -> Job | None:
        """The loaded model served (None: no model, or already serving)."""
        if self.engine is None or self.serving is not None:
            return None
        job = Job("serve", partial(_serve, engine=self.engine, request=request))
        job.finished.connect(self._served)
        return job

    def stop_server(self) -> Job | None:
        serving, self.serving = self.serving, None
        return None if serving is None else Job("stop-serving", partial(_stop_serving, serving=serving))

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
        (self._run_service if job.kind in SERVICE_JOBS else self._run).emit(job)
        return job

    # -- the rest ----------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stops the running take and the rendering script."""
        for job in (self.take, self.script):
            if job is not None:
                job.cancel()

    def shutdown(self) -> None:
        """Stops what runs (a take, a script, a download, the server) and both threads."""
        self.cancel()
        self.cancel_pull()
        if self.serving is not None:
            self.serving.server.stop()
            self.serving = None
        self._thread.quit()
        self._thread.wait()
        self._service_thread.quit()
        self._service_thread.wait(10_000)   # (a download stuck in a socket read is left to the OS)

    # (slots of this object, never lambdas: a job emits on the worker thread, and only a receiver
    # that is a QObject of the GUI thread has its slot run there)
    def _loaded(self, engine: Engine) -> None:
        self.engine = engine
        self.loading = False

    def _load_failed(self, _message: str) -> None:
        self.loading = False

    def _pull_ended(self, _outcome) -> None:
        self.pull = None

    def _served(self, serving: Serving) -> None:
        self.serving = serving

    def _take_ended(self, _outcome) -> None:
        self.take = None

    def _script_ended(self, _outcome) -> None:
        self.script = None
