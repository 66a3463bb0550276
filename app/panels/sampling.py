"""Sampling: seed, greedy, temperatures, top-k/top-p of both stages and the frame limit. The
defaults are the loaded model's own (SamplingParams.from_model), never literals here."""
from __future__ import annotations

from dataclasses import asdict

from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QGridLayout, QLabel, QPushButton, QSpinBox

from kazeia.engine import SamplingParams

from .base import Panel, as_bool, watch

FLOATS = ("temperature", "top_p", "cp_temperature", "cp_top_p")
INTS = ("top_k", "cp_top_k")


class SamplingPanel(Panel):
    panel_id = "sampling"

    def __init__(self, settings):
        super().__init__(settings)
        form = self.framed_form("Sampling")
        self.seed = QSpinBox()
        self.seed.setRange(0, 2 ** 31 - 1)
        self.greedy = QCheckBox("greedy (argmax)")
        self.fields: dict = {}
        for name in (*FLOATS, *INTS):
            if name in FLOATS:
                w = QDoubleSpinBox()
                w.setRange(0.01, 1.0 if "top_p" in name else 5.0)
                w.setSingleStep(0.05)
                w.setDecimals(2)
            else:
                w = QSpinBox()
                w.setRange(0, 2048)
                w.setSpecialValueText("off")
            self.fields[name] = w
        self.max_frames = QSpinBox()
        self.max_frames.setRange(0, 8191)
        self.max_frames.setSpecialValueText("auto")
        self.max_frames.setToolTip("frame limit (12.5 frames per second of audio); auto: from the text's length")
        self.streaming_text = QCheckBox("feed text while generating")
        self.play_live = QCheckBox("play while generating")
        self.play_live.setChecked(True)
        self.defaults_button = QPushButton("Model defaults")
        form.addRow("seed", self.seed)
        form.addRow(self.greedy)
        # the two stages side by side: three rows instead of six long-labelled ones
        grid = QGridLayout()
        grid.addWidget(QLabel("talker"), 0, 1)
        grid.addWidget(QLabel("code predictor"), 0, 2)
        for row, (label, talker, cp) in enumerate((("temperature", "temperature", "cp_temperature"),
                                                   ("top-k", "top_k", "cp_top_k"), ("top-p", "top_p", "cp_top_p")), 1):
            grid.addWidget(QLabel(label), row, 0)
            grid.addWidget(self.fields[talker], row, 1)
            grid.addWidget(self.fields[cp], row, 2)
        form.addRow(grid)
        form.addRow("max frames", self.max_frames)
        form.addRow(self.streaming_text)
        form.addRow(self.play_live)
        form.addRow(self.defaults_button)
        defaults = asdict(SamplingParams())   # until a model brings its own
        for name, w in self.fields.items():
            w.setValue(defaults[name])
        self.info = None
        self.greedy.toggled.connect(lambda on: [w.setEnabled(not on) for w in self.fields.values()])
        self.defaults_button.clicked.connect(self.apply_model_defaults)
        watch([self.seed, self.greedy, self.max_frames, self.streaming_text, self.play_live, *self.fields.values()],
              self.changed)

    def set_model(self, info) -> None:
        first = self.info is None
        self.info = info
        if first and self.value("temperature") is None:   # nothing saved yet: the model's own defaults
            self.apply_model_defaults()

    def apply_model_defaults(self) -> None:
        if self.info is None:
            return
        d = asdict(SamplingParams.from_model(self.info))
        for name, w in self.fields.items():
            w.setValue(d[name])

    def params(self, info) -> SamplingParams:
        values = {name: w.value() for name, w in self.fields.items()}
        s = SamplingParams.from_model(info, seed=self.seed.value(), max_frames=self.max_frames.value() or None, **values)
        return s.greedy() if self.greedy.isChecked() else s

    def restore_params(self, s: dict) -> None:
        self.seed.setValue(int(s.get("seed", 0)))
        self.greedy.setChecked(not s.get("do_sample", True))
        for name, w in self.fields.items():
            if name in s:
                w.setValue(s[name])
        self.max_frames.setValue(s.get("max_frames") or 0)

    def restore_settings(self) -> None:
        self.seed.setValue(int(self.value("seed", 0)))
        self.greedy.setChecked(as_bool(self.value("greedy", False)))
        for name, w in self.fields.items():
            saved = self.value(name)
            if saved is not None:
                w.setValue(float(saved) if name in FLOATS else int(saved))
        self.max_frames.setValue(int(self.value("max_frames", 0)))
        self.streaming_text.setChecked(as_bool(self.value("streaming_text", False)))
        if self.play_live.isEnabled():   # stays off without an audio device
            self.play_live.setChecked(as_bool(self.value("play_live", True)))

    def save_settings(self) -> None:
        self.set_value("seed", self.seed.value())
        self.set_value("greedy", self.greedy.isChecked())
        for name, w in self.fields.items():
            self.set_value(name, w.value())
        self.set_value("max_frames", self.max_frames.value())
        self.set_value("streaming_text", self.streaming_text.isChecked())
        self.set_value("play_live", self.play_live.isChecked())
