"""The engine on a worker thread. Widgets never call the engine: they ask the controller, which
emits chunk_ready / finished / failed / loaded signals back on the GUI thread."""
from __future__ import annotations

import threading
import time
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from kazeia.engine import Engine, ModelFile, convert, demo_model_path


class _Worker(QObject):
    loaded = Signal(object, object)          # Engine, ModelInfo
    chunk_ready = Signal(object)             # Chunk
    finished = Signal(object)                # Result
    failed = Signal(str)
    status = Signal(str)
    conversion = Signal(int, int)            # parameters done, total

    def __init__(self, controller: "EngineController"):
        super().__init__()
        self._controller = controller

    @Slot(str, int, object)
    def load(self, path: str, threads: int, placement) -> None:
        try:
            p = Path(path)
            if p.is_dir():   # a downloaded Hugging Face checkpoint: convert once, cache the GGUF
                from .takes import data_dir
                out = data_dir() / "models" / f"{p.name}-f16.gguf"
                if not out.exists():
                    self.status.emit(f"converting {p.name} (once; cached in {out.parent}) ...")
                    out.parent.mkdir(parents=True, exist_ok=True)
                    convert(p, out, out_type="f16", progress=False,
                            on_progress=lambda done, total: self.conversion.emit(done // 1000, total // 1000))
                p = out
            engine = Engine(ModelFile(p), threads=threads, placement=placement)
            self.loaded.emit(engine, engine.info)
        except Exception as e:   # a bad file must never take the GUI down
            self.failed.emit(f"cannot open {path}: {e}")

    @Slot(object, object)
    def generate(self, engine: Engine, request: dict) -> None:
        try:
            text = request.pop("text")
            stream = engine.stream(text, **request)
            self._controller._set_stream(stream)
            for chunk in stream:
                self.chunk_ready.emit(chunk)
            self.finished.emit(stream.result)
        except Exception as e:
            self.failed.emit(str(e) or traceback.format_exc(limit=1))
        finally:
            self._controller._set_stream(None)


class EngineController(QObject):
    loaded = Signal(object)       # ModelInfo
    chunk_ready = Signal(object)
    finished = Signal(object)
    failed = Signal(str)
    status = Signal(str)
    conversion = Signal(int, int)   # thousands of parameters written, total
    _load = Signal(str, int, object)
    _generate = Signal(object, object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.engine: Engine | None = None
        self._stream = None
        self._lock = threading.Lock()
        self._thread = QThread()
        self._thread.setObjectName("kazeia-engine")
        self._worker = _Worker(self)
        self._worker.moveToThread(self._thread)
        self._load.connect(self._worker.load)
        self._generate.connect(self._worker.generate)
        self._worker.loaded.connect(self._on_loaded)
        self._worker.chunk_ready.connect(self.chunk_ready)
        self._worker.finished.connect(self._on_finished)
        self._worker.failed.connect(self._on_failed)
        self._worker.status.connect(self.status)
        self._worker.conversion.connect(self.conversion)
        self._thread.start()
        self.busy = False
        self.started_at = 0.0

    def load_model(self, path: str | None, threads: int, placement) -> None:
        self.status.emit(f"loading {Path(path).name if path else 'the demo model'} ...")
        self._load.emit(str(path or demo_model_path()), threads, placement)

    def generate(self, request: dict) -> bool:
        if self.engine is None or self.busy:
            return False
        self.busy = True
        self.started_at = time.perf_counter()
        self._generate.emit(self.engine, dict(request))
        return True

    def cancel(self) -> None:
        with self._lock:
            if self._stream is not None:
                self._stream.cancel()

    def set_placement(self, placement) -> None:
        """Applies to the next take; the model file is not read again."""
        if self.engine is not None and not self.busy:
            self.engine.set_placement(placement)

    def shutdown(self) -> None:
        self.cancel()
        self._thread.quit()
        self._thread.wait()

    def _set_stream(self, stream) -> None:
        with self._lock:
            self._stream = stream

    def _on_loaded(self, engine: Engine, info) -> None:
        self.engine = engine
        self.loaded.emit(info)

    def _on_finished(self, result) -> None:
        self.busy = False
        self.finished.emit(result)

    def _on_failed(self, message: str) -> None:
        self.busy = False
        self.failed.emit(message)
