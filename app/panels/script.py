"""The Script panel: a whole script rendered to a folder through the same render core as `kazeia
render` (on the engine's worker). A table of the script's lines with their status, duration and
RTF; render all (lines already done and unchanged are kept) or the selected lines; a new seed for
the selected lines (kept in the output folder, so a later render keeps it); play a rendered line;
open the output folder. The folder's manifest is the panel's state: reopening a script shows what
is done."""
from __future__ import annotations

import random
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QFileDialog, QHBoxLayout, QHeaderView, QLineEdit,
                               QPushButton, QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout)

from kazeia.engine.audio_io import NAMED_FORMATS
from kazeia.engine.script.render import read_manifest, set_override
from kazeia.engine.script.lines import ScriptError, read_script

from ..elided_label import ElidedLabel
from .base import Panel, watch, wrapping_label

COLUMNS = ("id", "text", "speaker", "status", "seconds", "RTF")


class ScriptPanel(Panel):
    panel_id = "script"
    render_requested = Signal(object)   # {script, out_dir, fmt, batch, ids (None: all)}
    stop_requested = Signal()
    play_requested = Signal(str)        # a rendered file

    def __init__(self, settings):
        super().__init__(settings)
        self.script: Path | None = None
        self.rows: dict[str, int] = {}
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.open_button = QPushButton("Open script...")
        self.path_label = ElidedLabel("no script: .txt (a line each), .csv/.tsv or .jsonl (id, text, speaker, ...)",
                                      Qt.ElideRight)
        top.addWidget(self.open_button)
        top.addWidget(self.path_label, 1)
        layout.addLayout(top)
        opts = QHBoxLayout()
        self.out_dir = QLineEdit()
        self.out_dir.setPlaceholderText("output folder")
        self.format = QComboBox()
        self.format.addItems(list(NAMED_FORMATS))
        self.batch = QSpinBox()
        self.batch.setRange(1, 16)
        self.batch.setValue(2)
        self.batch.setPrefix("batch ")
        self.batch.setToolTip("lines generated together (one talker and code-predictor launch per frame for all)")
        opts.addWidget(self.out_dir, 1)
        opts.addWidget(self.format)
        opts.addWidget(self.batch)
        layout.addLayout(opts)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.Stretch)
        layout.addWidget(self.table, 1)
        row = QHBoxLayout()
        self.render_all_button = QPushButton("Render all")
        self.render_selected_button = QPushButton("Render selected")
        self.new_seed_button = QPushButton("New seed")
        self.new_seed_button.setToolTip("render the selected lines again with another seed (kept for later renders)")
        self.play_button = QPushButton("Play")
        self.stop_button = QPushButton("Stop")
        self.folder_button = QPushButton("Open folder")
        for b in (self.render_all_button, self.render_selected_button, self.new_seed_button):
            row.addWidget(b)
        layout.addLayout(row)
        row = QHBoxLayout()
        for b in (self.play_button, self.stop_button, self.folder_button):
            row.addWidget(b)
        layout.addLayout(row)
        self.progress = wrapping_label()
        layout.addWidget(self.progress)
        self.open_button.clicked.connect(self._open_dialog)
        self.render_all_button.clicked.connect(lambda: self.request_render(None))
        self.render_selected_button.clicked.connect(lambda: self.request_render(self.selected_ids()))
        self.new_seed_button.clicked.connect(self.new_seed)
        self.play_button.clicked.connect(self.play_selected)
        self.stop_button.clicked.connect(self.stop_requested)
        self.folder_button.clicked.connect(
            lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.output_folder()))))
        self.out_dir.editingFinished.connect(self.refresh_statuses)
        watch([self.out_dir, self.format, self.batch], lambda *_: self.changed.emit())
        self.set_rendering(False)

    # -- settings ----------------------------------------------------------------------------
    def restore_settings(self) -> None:
        self.format.setCurrentText(str(self.value("format", "wav")))
        self.batch.setValue(int(self.value("batch", 2)))
        script = self.value("script", "")
        if script and Path(script).is_file():
            self.open_script(script, out_dir=str(self.value("out_dir", "")) or None)

    def save_settings(self) -> None:
        self.set_value("format", self.format.currentText())
        self.set_value("batch", self.batch.value())
        self.set_value("script", str(self.script or ""))
        self.set_value("out_dir", self.out_dir.text())

    # -- the script and its folder -------------------------------------------------------------
    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a script", "", "Scripts (*.txt *.csv *.tsv *.jsonl)")
        if path:
            self.open_script(path)

    def open_script(self, path: str, out_dir: str | None = None) -> bool:
        try:
            lines, problems = read_script(path)
        except ScriptError as e:
            self.progress.setText(str(e))
            return False
        self.script = Path(path)
        self.path_label.setText(str(self.script))
        self.out_dir.setText(out_dir or str(self.script.with_name(f"{self.script.stem}-render")))
        self.table.setRowCount(len(lines))
        self.rows = {}
        for r, line in enumerate(lines):
            self.rows[line.id] = r
            for c, value in enumerate((line.id, line.text, line.speaker or "", "", "", "")):
                self.table.setItem(r, c, QTableWidgetItem(value))
        bad = {n: why for n, _, why in problems}
        for r, line in enumerate(lines):
            if line.number in bad:
                self._set(r, 3, f"invalid: {bad[line.number]}")
        self.progress.setText(f"{len(lines)} line(s)" + (f", {len(problems)} problem(s)" if problems else ""))
        self.refresh_statuses()
        self.changed.emit()
        return True

    def output_folder(self) -> Path:
        return Path(self.out_dir.text() or ".")

    def refresh_statuses(self) -> None:
        """What the folder's manifest says of each line."""
        for line_id, entry in read_manifest(self.output_folder()).items():
            self.show_entry(entry)

    def show_entry(self, entry: dict) -> None:
        r = self.rows.get(entry.get("id"))
        if r is None:
            return
        status = entry.get("status", "")
        if status in ("failed", "skipped"):
            status = f"{status}: {entry.get('error', '')}"
        elif entry.get("warning"):
            status = f"done (warning: {entry['warning']})"
        self._set(r, 3, status)
        seconds = entry.get("duration_s")
        self._set(r, 4, f"{seconds:.2f}" if seconds else "")
        t = entry.get("timings") or {}
        self._set(r, 5, f"{t['total_ms'] / 1000 / seconds:.2f}" if seconds and t.get("total_ms") else "")

    def _set(self, row: int, col: int, text: str) -> None:
        self.table.setItem(row, col, QTableWidgetItem(text))

    def selected_ids(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [self.table.item(r, 0).text() for r in rows]

    # -- actions -------------------------------------------------------------------------------
    def request_render(self, ids: list[str] | None) -> None:
        if self.script is None or (ids is not None and not ids):
            return
        for line_id in ids or list(self.rows):
            r = self.rows[line_id]
            if not self.table.item(r, 3).text().startswith(("done", "invalid")) or ids is not None:
                self._set(r, 3, "queued")
        self.render_requested.emit({"script": str(self.script), "out_dir": str(self.output_folder()),
                                    "fmt": self.format.currentText(), "batch": self.batch.value(), "ids": ids})

    def new_seed(self) -> None:
        ids = self.selected_ids()
        for line_id in ids:
            set_override(self.output_folder(), line_id, seed=random.randrange(2 ** 31))
        self.request_render(ids)

    def play_selected(self) -> None:
        ids = self.selected_ids()
        entry = read_manifest(self.output_folder()).get(ids[0]) if ids else None
        if entry and entry.get("status") == "done":
            self.play_requested.emit(str(self.output_folder() / entry["file"]))

    def set_rendering(self, rendering: bool) -> None:
        for b in (self.render_all_button, self.render_selected_button, self.new_seed_button, self.open_button):
            b.setEnabled(not rendering)
        self.stop_button.setEnabled(rendering)
        if not rendering:   # lines a stopped render did not reach are no longer queued
            for r in range(self.table.rowCount()):
                item = self.table.item(r, 3)
                if item is not None and item.text() == "queued":
                    self._set(r, 3, "")

    def show_progress(self, summary) -> None:
        self.progress.setText(f"{summary.done} rendered, {summary.kept} kept, {summary.failed} failed, "
                              f"{summary.skipped} skipped; {summary.audio_seconds:.1f} s of audio"
                              + (f", RTF {summary.rtf:.2f}" if summary.audio_seconds else ""))
