"""The engine on one worker thread. Widgets never call the engine: they ask the controller, which
queues every engine call (load, generate, placement, threads, voice creation, preview) on the worker
in order and emits the outcome back on the GUI thread. A placement or thread change asked for while
a take runs is queued behind it, so it applies to the next take; each take reports the placement
and threads it actually ran with."""
from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from kazeia.engine import (Engine, ModelFile, SamplingParams, convert, create_voice, demo_model_path, load_voice,
                           resolve_model, save_voice)
from kazeia.engine.reference.proc_stats import peak_rss_mb, reset_peak_rss

PREVIEW_TEXT = "This is how I sound."
PREVIEW_SECONDS = 6   # a preview stops here whatever the model does


@dataclass
class Ran:
    """What a take actually ran with (read from the engine on the worker, not from the widgets)."""
    placement: dict
    threads: int
    peak_memory_mb: float = 0.0
    tag: dict = field(default_factory=dict)   # the caller's own labels (e.g. a comparison's side)


def _message(e: BaseException) -> str:
    return str(e) or traceback.format_exc(limit=1)


class _Worker(QObject):
    loaded = Signal(object, object)          # Engine, ModelInfo
    applied = Signal(object)                 # Ran (placement/threads now in force)
    started = Signal(object)                 # Ran
    chunk_ready = Signal(object)             # Chunk
    finished = Signal(object, object)        # Result, Ran
    failed = Signal(str, str)                # what failed (load/take/apply/voice/preview), message
    status = Signal(str)
    conversion = Signal(int, int)            # parameters done, total
    voice_created = Signal(str)
    preview_ready = Signal(object)           # audio
    script_line = Signal(object, object)     # manifest entry, RenderSummary so far
    script_finished = Signal(object)         # RenderSummary

    def __init__(self, controller: "EngineController"):
        super().__init__()
        self._controller = controller
        self.engine: Engine | None = None

    @Slot(str, object, object, str)
    def load(self, path: str, threads, placement, out_type: str) -> None:
        try:
            p = resolve_model(path)   # ("demo" is the bundled demo model, as on the command line)
            if p.is_dir():   # a downloaded Hugging Face checkpoint: convert once, cache the GGUF
                from .takes import data_dir
                out = data_dir() / "models" / f"{p.name}-{out_type}.gguf"
                if not out.exists():
                    self.status.emit(f"converting {p.name} to {out_type} (once; cached in {out.parent}) ...")
                    out.parent.mkdir(parents=True, exist_ok=True)
                    convert(p, out, out_type=out_type, progress=False,
                            on_progress=lambda done, total: self.conversion.emit(done // 1000, total // 1000))
                p = out
            self.engine = Engine(ModelFile(p), threads=threads, placement=placement)
            self.loaded.emit(self.engine, self.engine.info)
        except Exception as e:   # a bad file must never take the GUI down
            self.failed.emit("load", f"cannot open {path}: {_message(e)}")
            return
        try:   # while the operator types: the first take's latencies are then those of the next ones
            self.engine.warm_up()
        except Exception as e:
            self.status.emit(f"warm-up failed (takes still run): {_message(e)}")

    def _apply(self, placement, threads) -> Ran:
        if threads is not None:
            self.engine.set_threads(int(threads))
        if placement is not None and placement != self.engine.placement:
            self.engine.set_placement(placement)
        return Ran(dict(self.engine.placement), self.engine.threads)

    @Slot(object, object)
    def apply(self, placement, threads) -> None:
        if self.engine is None:
            return
        try:
            self.applied.emit(self._apply(placement, threads))
        except Exception as e:
            self.failed.emit("apply", _message(e))

    @Slot(object)
    def generate(self, job: dict) -> None:
        job = dict(job)
        try:
            if self.engine is None:
                raise RuntimeError("no model is loaded")
            ran = self._apply(job.pop("placement", None), job.pop("threads", None))
            ran.tag = job.pop("tag", {})
            self.applied.emit(Ran(ran.placement, ran.threads))
            profile = job.pop("voice_profile", None)
            job["voice"] = load_voice(profile, self.engine.model) if profile else None
            text = job.pop("text")
            reset_peak_rss()
            stream = self.engine.stream(text, **job)
            self._controller._set_stream(stream)
            self.started.emit(ran)
            for chunk in stream:
                self.chunk_ready.emit(chunk)
            ran.peak_memory_mb = peak_rss_mb()
            self.finished.emit(stream.result, ran)
        except Exception as e:
            self.failed.emit("take", _message(e))
        finally:
            self._controller._set_stream(None)

    @Slot(object)
    def render_script(self, job: dict) -> None:
        """A script through the render core (as `kazeia render`): all lines (those done and unchanged
        are kept) or the given ids (rendered again)."""
        from kazeia.engine.render import LocalExecutor, RenderOptions, plan_render, render
        try:
            if self.engine is None:
                raise RuntimeError("no model is loaded")
            options = RenderOptions(Path(job["out_dir"]), fmt=job["fmt"], batch=int(job["batch"]), resume=True,
                                    skip_invalid=True)
            plan = plan_render(job["script"], self.engine, options)
            if job.get("ids") is not None:
                wanted = set(job["ids"])
                every = plan.jobs + plan.kept
                plan.jobs = [j for j in every if j.line.id in wanted]
                plan.kept, plan.invalid = [j for j in every if j.line.id not in wanted], []
            stop = self._controller._render_stop
            summary = render(plan, LocalExecutor(self.engine, options.batch),
                             on_line=lambda _, entry, s: self.script_line.emit(entry, s), stop=stop.is_set)
            self.script_finished.emit(summary)
        except Exception as e:
            self.failed.emit("script", _message(e))

    @Slot(str, str, object, str)
    def create_voice(self, name: str, audio_path: str, transcript, out_path: str) -> None:
        try:
            if self.engine is None or self.engine.info.variant != "base":
                raise ValueError("voice profiles need a Base model")
            save_voice(create_voice(self.engine.model, audio_path, text=transcript), Path(out_path), self.engine.model)
            self.voice_created.emit(name)
        except Exception as e:
            self.failed.emit("voice", _message(e))

    @Slot(str, str)
    def preview(self, profile_path: str, language: str) -> None:
        try:
            voice = load_voice(profile_path, self.engine.model)
            info = self.engine.info
            sampling = SamplingParams.from_model(info, seed=0, max_frames=int(PREVIEW_SECONDS * info.frame_rate))
            result = self.engine.synthesize(PREVIEW_TEXT, language=language, voice=voice, sampling=sampling)
            self.preview_ready.emit(result.audio)
        except Exception as e:
            self.failed.emit("preview", _message(e))


class EngineController(QObject):
    loaded = Signal(object)       # ModelInfo
    applied = Signal(object)      # Ran
    started = Signal(object)      # Ran
    chunk_ready = Signal(object)
    finished = Signal(object, object)   # Result, Ran
    failed = Signal(str, str)     # kind, message
    status = Signal(str)
    conversion = Signal(int, int)   # thousands of parameters written, total
    voice_created = Signal(str)
    preview_ready = Signal(object)
    script_line = Signal(object, object)
    script_finished = Signal(object)
    _load = Signal(str, object, object, str)
    _apply = Signal(object, object)
    _generate = Signal(object)
    _create_voice = Signal(str, str, object, str)
    _preview = Signal(str, str)
    _render_script = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.engine: Engine | None = None   # for reading info only; calls go through the worker
        self._stream = None
        self._lock = threading.Lock()
        self._thread = QThread()
        self._thread.setObjectName("kazeia-engine")
        self._worker = _Worker(self)
        self._worker.moveToThread(self._thread)
        w = self._worker
        self._load.connect(w.load)
        self._apply.connect(w.apply)
        self._generate.connect(w.generate)
        self._create_voice.connect(w.create_voice)
        self._preview.connect(w.preview)
        self._render_script.connect(w.render_script)
        w.script_line.connect(self.script_line)
        w.script_finished.connect(self._on_script_finished)
        w.loaded.connect(self._on_loaded)
        w.applied.connect(self.applied)
        w.started.connect(self.started)
        w.chunk_ready.connect(self.chunk_ready)
        w.finished.connect(self._on_finished)
        w.failed.connect(self._on_failed)
        w.status.connect(self.status)
        w.conversion.connect(self.conversion)
        w.voice_created.connect(self.voice_created)
        w.preview_ready.connect(self.preview_ready)
        self._thread.start()
        self.busy = False      # a take is queued or running
        self.rendering = False  # a script is rendering (takes wait for it)
        self._render_stop = threading.Event()
        self.loading = False
        self.started_at = 0.0

    def load_model(self, path: str | None, threads: int, placement, out_type: str = "q8_0") -> None:
        self.loading = True
        self.status.emit(f"loading {Path(path).name if path else 'the demo model'} ...")
        self._load.emit(str(path or demo_model_path()), threads, placement, out_type)

    def apply(self, placement: dict | None = None, threads: int | None = None) -> None:
        """Queued behind any running take: applies to the next one."""
        if self.engine is not None:
            self._apply.emit(placement, threads)

    def generate(self, job: dict) -> bool:
        """job: text, speaker, language, instruct, voice_profile (a path), streaming_text, sampling,
        placement, threads, tag. False when no model is loaded, a take is already running or a
        script is rendering."""
        if self.engine is None or self.busy or self.loading or self.rendering:
            return False
        self.busy = True
        self.started_at = time.perf_counter()
        self._generate.emit(dict(job))
        return True

    def render_script(self, job: dict) -> bool:
        """job: script, out_dir, fmt, batch, ids (None: every line). False while a take or another
        script runs, or no model is loaded."""
        if self.engine is None or self.busy or self.rendering or self.loading:
            return False
        self.rendering = True
        self._render_stop.clear()
        self._render_script.emit(dict(job))
        return True

    def create_voice(self, name: str, audio_path: str, transcript: str | None, out_path: Path) -> None:
        self._create_voice.emit(name, str(audio_path), transcript, str(out_path))

    def preview(self, profile_path: Path, language: str = "auto") -> None:
        self._preview.emit(str(profile_path), language)

    def cancel(self) -> None:
        self._render_stop.set()
        with self._lock:
            if self._stream is not None:
                self._stream.cancel()

    def shutdown(self) -> None:
        self.cancel()
        self._thread.quit()
        self._thread.wait()

    def _set_stream(self, stream) -> None:
        with self._lock:
            self._stream = stream

    def _on_loaded(self, engine: Engine, info) -> None:
        self.engine = engine
        self.loading = False
        self.loaded.emit(info)

    def _on_finished(self, result, ran) -> None:
        self.busy = False
        self.finished.emit(result, ran)

    def _on_script_finished(self, summary) -> None:
        self.rendering = False
        self.script_finished.emit(summary)

    def _on_failed(self, kind: str, message: str) -> None:
        if kind == "take":
            self.busy = False
        if kind == "script":
            self.rendering = False
        if kind == "load":
            self.loading = False
        self.failed.emit(kind, message)

