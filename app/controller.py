"""The engine on one worker thread: the Qt plumbing of the workbench's jobs (their work, Qt-free, is
app/tasks.py). Widgets never call the engine: every request (load, placement and threads, a take, a
script, a voice profile, a preview) is a Job, run on the worker in the order asked. What must not
wait behind a take (a model download, starting and stopping the server, which has threads of its
own and shares the engine's batches) runs as a Job on a second, service thread. A job carries its
own signals (napari's thread_worker shape): whoever asked connects to the job it got, so no outcome
is told to everyone and sorted by a string. A placement or thread change asked for while a take runs
is queued behind it, so it applies to the next take; each take reports the placement and threads it
actually ran with."""
from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from kazeia.engine import Engine

from . import tasks
from .take_request import TakeRequest
from .tasks import EngineHost, ServeRequest, Serving, error_message
from .typed_text import TypedText

SERVICE_JOBS = ("pull", "serve", "stop-serving")   # run on the service thread, never behind a take


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
        self._work = work          # work(host, job) -> result, on the worker thread (app/tasks.py)
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

    def run(self, host: EngineHost) -> None:
        try:
            result = self._work(host, self)
        except Exception as e:   # nothing the engine raises may take the GUI down
            self.failed.emit(error_message(e))
            return
        self.finished.emit(result)


class _Worker(QObject):
    """Runs jobs, one after the other, on its thread; holds the engine (tasks.EngineHost)."""

    def __init__(self):
        super().__init__()
        self.host = EngineHost()

    @Slot(object)
    def run(self, job: Job) -> None:
        job.run(self.host)


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
        job = Job("load", partial(tasks.load, path=str(path or "demo"), threads=threads, placement=placement,
                                  out_type=out_type))
        self.loading = True
        job.finished.connect(self._loaded)
        job.failed.connect(self._load_failed)
        return job

    def apply(self, placement: dict | None = None, threads: int | None = None) -> Job | None:
        """Queued behind any running take: applies to the next one."""
        if self.engine is None:
            return None
        return Job("apply", partial(tasks.apply, placement=placement, threads=threads))

    def generate(self, request: TakeRequest) -> Job | None:
        """A take of `request`; None when no model is loaded, a take is already running or a script is
        rendering."""
        if not self._idle():
            return None
        self.take = self._until_done(Job("take", partial(tasks.take, request=request)), self._take_ended)
        return self.take

    def speak_typed(self, request: TakeRequest) -> Job | None:
        """A take of text typed while it is spoken: write to the job's `typed` (TypedText), close it
        to finish. None when a take cannot start (as generate)."""
        if not self._idle():
            return None
        job = Job("take", partial(tasks.typed_take, request=request))
        job.typed = TypedText()
        self.take = self._until_done(job, self._take_ended)
        return self.take

    def render_script(self, request: dict) -> Job | None:
        """request: script, out_dir, fmt, batch, ids (None: every line). None while a take or
        another script runs, or no model is loaded."""
        if not self._idle():
            return None
        self.script = self._until_done(Job("script", partial(tasks.script, request=dict(request))), self._script_ended)
        return self.script

    def render_book(self, request: dict) -> Job | None:
        """request: book, out_dir, formats, loudness, per, m4b and the voice (speaker, language, instruct,
        voice_profile). None while a take or another render runs, or no model is loaded."""
        if not self._idle():
            return None
        self.script = self._until_done(Job("book", partial(tasks.book, request=dict(request))), self._script_ended)
        return self.script

    def create_voice(self, name: str, audio_path: str, transcript: str | None, out_path: Path) -> Job:
        return Job("voice", partial(tasks.voice_profile, name=name, audio_path=str(audio_path), transcript=transcript,
                                    out_path=str(out_path)))

    def keep_voice(self, record: dict, audio, sample_rate: int, model_paths: list[str], name: str,
                   library_folder: Path) -> Job:
        return Job("keep voice", partial(tasks.kept_voice, record=record, audio=audio, sample_rate=sample_rate,
                                         model_paths=list(model_paths), name=name, library_folder=str(library_folder)))

    def preview(self, profile_path: Path, language: str = "auto") -> Job:
        return Job("preview", partial(tasks.preview, profile_path=str(profile_path), language=language))

    # -- on the service thread ------------------------------------------------------------------
    def pull_model(self, source: str) -> Job | None:
        """A download (a catalog alias or a repository id); None while another runs. cancel_pull()
        stops it; what was downloaded is kept for the next try."""
        if self.pull is not None:
            return None
        self.pull = self._until_done(Job("pull", partial(tasks.pull, source=source)), self._pull_ended)
        return self.pull

    def cancel_pull(self) -> None:
        if self.pull is not None:
            self.pull.cancel()

    def start_server(self, request: ServeRequest) -> Job | None:
        """The loaded model served (None: no model, or already serving)."""
        if self.engine is None or self.serving is not None:
            return None
        job = Job("serve", partial(tasks.serve, engine=self.engine, request=request))
        job.finished.connect(self._served)
        return job

    def stop_server(self) -> Job | None:
        serving, self.serving = self.serving, None
        return None if serving is None else Job("stop-serving", partial(tasks.stop_serving, serving=serving))

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
