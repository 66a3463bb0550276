"""Compare placements, the workbench's point: the same text, voice and seed rendered on placement A
then B, side by side (per-stage ms per frame, TTFA, RTF, peak memory) with how far B's audio and
codes are from A's; then A/B listening, loudness-matched, with one key, or a blind test of the pair."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QGridLayout, QGroupBox, QHBoxLayout, QHeaderView, QLabel,
                               QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout)

from kazeia.engine.synthesis.placement import MEANINGS, MODES, STAGES, mode_status

from ..comparison import difference_text
from .base import Panel, watch, wrapping_label
from .takes import placement_short

ROWS = ("model", "placement", "talker ms/frame", "code predictor ms/frame", "decoder ms/frame", "TTFA ms", "prefill ms", "RTF",
        "peak memory MB", "frames", "stop")


def column_values(take) -> list[str]:
    t = take.timings
    return [Path(take.model).name, placement_short(take.placement), f"{t.get('talker_ms', 0):.2f}", f"{t.get('code_predictor_ms', 0):.2f}",
            f"{t.get('decoder_ms', 0):.2f}", f"{t.get('ttfa_ms', 0):.0f}", f"{t.get('prefill_ms', 0):.0f}",
            f"{t.get('rtf', 0):.3f}", f"{take.peak_memory_mb:.0f}", str(t.get("frames", 0)), take.stop_reason]


class ComparePanel(Panel):
    panel_id = "compare"
    compare_requested = Signal(object, object, object)   # placement A, placement B, B's model file (None: the same)
    listen_requested = Signal()
    blind_requested = Signal()

    def __init__(self, settings):
        super().__init__(settings)
        layout = QVBoxLayout(self)
        box = QGroupBox("Placements (and models) to compare: the same text, voice and seed")
        grid = QGridLayout(box)
        status = mode_status()
        self.sides: dict[str, dict[str, QComboBox]] = {}
        for col, stage in enumerate(STAGES, start=1):
            grid.addWidget(QLabel(stage.replace("_", " ")), 0, col)
        for row, side in enumerate(("A", "B"), start=1):
            grid.addWidget(QLabel(side), row, 0)
            self.sides[side] = {}
            for col, stage in enumerate(STAGES, start=1):
                combo = QComboBox()
                for mode in MODES:
                    combo.addItem(mode)
                    item = combo.model().item(combo.count() - 1)
                    item.setEnabled(status[mode].available)
                    item.setToolTip(MEANINGS[mode] + ("" if status[mode].available else
                                                      f"\nunavailable: {status[mode].reason}"))
                self.sides[side][stage] = combo
                grid.addWidget(combo, row, col)
        grid.addWidget(QLabel("B's model"), 3, 0)
        self.b_model_box = QComboBox()
        self.b_model_box.setToolTip("B on another model file of the same variant: another weight type or decoder "
                                    "(q8_0 against f16, say); the same text, voice and seed")
        self.b_model_box.activated.connect(self._b_model_chosen)
        grid.addWidget(self.b_model_box, 3, 1, 1, len(STAGES))
        self._loaded = None
        best = "accel-sched" if status["accel-sched"].available else "cpu"
        for combo in self.sides["B"].values():
            combo.setCurrentText(best)
        layout.addWidget(box)
        row = QHBoxLayout()
        self.compare_button = QPushButton("Compare placements")
        self.listen_button = QPushButton("Listen A/B (B switches)")
        self.listen_button.setEnabled(False)
        self.blind_button = QPushButton("Blind test...")
        self.blind_button.setToolTip("can A and B be told apart? An ABX test, or which sounds better, blind")
        self.blind_button.setEnabled(False)
        row.addWidget(self.compare_button)
        row.addWidget(self.listen_button)
        row.addWidget(self.blind_button)
        layout.addLayout(row)
        self.state = wrapping_label("Renders the current text on A, then on B.")
        layout.addWidget(self.state)
        self.table = QTableWidget(len(ROWS), 2)
        self.table.setHorizontalHeaderLabels(["A", "B"])
        self.table.setVerticalHeaderLabels(list(ROWS))
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Stretch)
        layout.addWidget(self.table, 1)
        self.difference = wrapping_label(name="difference")
        layout.addWidget(self.difference)
        self.compare_button.clicked.connect(lambda: self.compare_requested.emit(self.placement("A"),
                                                                                 self.placement("B"), self.b_model()))
        self.listen_button.clicked.connect(self.listen_requested)
        self.blind_button.clicked.connect(self.blind_requested)
        watch([c for side in self.sides.values() for c in side.values()], self.changed)

    def set_model(self, info) -> None:
        """B's model choices: the loaded one, the registered models of its variant, another file."""
        self._loaded = info
        self.b_model_box.clear()
        self.b_model_box.addItem("the model loaded", None)
        if info is not None:
            from kazeia.engine.models.registry import Registry
            here = Path(info.path).resolve()
            for e in Registry().entries():
                if e.variant == info.variant and Path(e.path).is_file() and Path(e.path).resolve() != here:
                    self.b_model_box.addItem(f"{e.name} ({e.type})", e.path)
        self.b_model_box.addItem("another file...", "")

    def set_b_model(self, path: str | None) -> None:
        """B's model file (None: the loaded one)."""
        if path is None:
            self.b_model_box.setCurrentIndex(0)
            return
        index = self.b_model_box.findData(path)
        if index < 0:
            self.b_model_box.insertItem(self.b_model_box.count() - 1, Path(path).name, path)
            index = self.b_model_box.findData(path)
        self.b_model_box.setCurrentIndex(index)

    def b_model(self) -> str | None:
        return self.b_model_box.currentData() or None

    def _b_model_chosen(self, index: int) -> None:
        if self.b_model_box.itemData(index) == "":
            path, _ = QFileDialog.getOpenFileName(self, "B's model", "", "GGUF models (*.gguf)")
            self.set_b_model(path or None)

    def placement(self, side: str) -> dict:
        return {stage: combo.currentText() for stage, combo in self.sides[side].items()}

    def show_progress(self, text: str) -> None:
        self.state.setText(text)

    def show_pair(self, a, b) -> None:
        for col, take in enumerate((a, b)):
            for row, value in enumerate(column_values(take)):
                self.table.setItem(row, col, QTableWidgetItem(value))
        d = b.comparison.get("difference")
        self.difference.setText(f"B against A: {difference_text(d)}" if d else "")
        self.listen_button.setEnabled(True)
        self.blind_button.setEnabled(True)
        self.state.setText(f"A: {a.label}\nB: {b.label}")

    def restore_settings(self) -> None:
        for side, combos in self.sides.items():
            for stage, combo in combos.items():
                mode = self.value(f"{side}_{stage}")
                index = combo.findText(mode) if mode else -1
                if index >= 0 and combo.model().item(index).isEnabled():
                    combo.setCurrentIndex(index)

    def save_settings(self) -> None:
        for side, combos in self.sides.items():
            for stage, combo in combos.items():
                self.set_value(f"{side}_{stage}", combo.currentText())
