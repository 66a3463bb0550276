"""What the operator opens by hand: a model from the Open dialog (a GGUF file, or a Hugging Face
checkpoint folder, which asks which weight type it is converted to), and a file dropped on the window
(an audio file becomes a voice profile; anything else is opened as a model)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QInputDialog

from kazeia.engine.model_files.gguf_file import FILE_TYPES

from .panels.voice_library import AUDIO_SUFFIXES

CONVERT_TYPES_NOTE = ("q8_0 (default): half the bytes per frame of f16, so about twice the speed, with quality "
                      "the bench measures as close to f32; f16/bf16: larger and slower; f32: the reference's numbers.")


def choose_model(window) -> None:
    """The Open dialog: a GGUF file, or else a checkpoint folder."""
    path, _ = QFileDialog.getOpenFileName(window, "Open model", "", "GGUF models (*.gguf);;All files (*)")
    if not path:
        path = QFileDialog.getExistingDirectory(window, "Or a Hugging Face checkpoint folder")
    if path:
        open_model(window, path)


def open_model(window, path: str) -> None:
    """A GGUF file, or a Hugging Face folder (asks which weight type to convert it to)."""
    out_type = "q8_0"
    if Path(path).is_dir():
        types = ["q8_0", *[t for t in FILE_TYPES if t != "q8_0"]]
        out_type, ok = QInputDialog.getItem(window, "Convert the checkpoint", "weight type (converted once, "
                                            "then cached):\n" + CONVERT_TYPES_NOTE, types, 0, False)
        if not ok:
            return
    window.presenter.core.load_model(path, out_type)


def open_dropped(window, urls) -> None:
    """The first file dropped: an audio file as a new voice profile, anything else as a model."""
    path = urls[0].toLocalFile() if urls else ""
    if Path(path).suffix.lower() in AUDIO_SUFFIXES:
        window.presenter.voices.add_voice(path)
    elif path:
        open_model(window, path)
