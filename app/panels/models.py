"""Get models: the released Qwen3-TTS checkpoints with what each can do and how large it is, which
are installed, and one button that downloads, verifies, converts and registers one (`kazeia pull`'s
steps, engine.models.pull) as a job of the controller's service thread, so the window stays live and
takes go on; a
progress bar with speed and time left, Cancel, then the model opens. Models pulled by repository id
on the command line are listed too."""
from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QMessageBox, QProgressBar,
                               QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout)

from kazeia.engine.models.catalog import KNOWN_MODELS, find_known

from .base import Panel, wrapping_label

COLUMNS = ("model", "can do", "download", "on disk", "installed")
PHASES = {"download": "downloading", "verify": "checking", "convert": "converting"}


def _size(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


class PullRate:
    """Speed and time left of one phase from its progress events (over the phase so far: a hub's
    throughput comes in bursts)."""

    def __init__(self):
        self.phase, self.started, self.first_done = None, 0.0, 0

    def describe(self, p) -> str:
        now = time.monotonic()
        if p.phase != self.phase:
            self.phase, self.started, self.first_done = p.phase, now, p.done
        what = PHASES.get(p.phase, p.phase) + (f" {p.file}" if p.file else "")
        if p.unit != "B":
            return f"{what}: {100 * p.done / max(p.total, 1):.0f}%"
        text = f"{what}: {_size(p.done)} of {_size(p.total)}"
        elapsed, moved = now - self.started, p.done - self.first_done
        if elapsed > 0.5 and moved > 0:
            rate = moved / elapsed
            text += f", {_size(rate)}/s, {_duration((p.total - p.done) / rate)} left"
        return text


class ModelsPanel(Panel):
    panel_id = "models"
    open_requested = Signal(str)   # a model file to open (pulled or installed)
    pull_requested = Signal(str)   # a catalog alias or repository id to download
    cancel_requested = Signal()
    pulled = Signal(object)        # the registry entry of a finished pull

    def __init__(self, settings):
        super().__init__(settings)
        self.pulling = False
        self._rate = PullRate()
        self._rows: list[tuple[str, object, list]] = []   # (alias or name, catalog or registry entry, installed)
        layout = QVBoxLayout(self)
        intro = QLabel("Released Qwen3-TTS models: downloaded from Hugging Face (HF_ENDPOINT, HF_TOKEN and "
                       "HF_HUB_OFFLINE apply), checked against the hub's hashes, converted once to the type "
                       "that keeps their sound, then opened.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setWordWrap(True)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.Stretch)
        layout.addWidget(self.table, 1)
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.status = wrapping_label()
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        row = QHBoxLayout()
        self.get_button = QPushButton("Download and open")
        self.open_button = QPushButton("Open")
        self.remove_button = QPushButton("Remove...")
        self.cancel_button = QPushButton("Cancel download")
        for button in (self.get_button, self.open_button, self.remove_button, self.cancel_button):
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)
        self.get_button.clicked.connect(self.pull_selected)
        self.open_button.clicked.connect(self.open_selected)
        self.remove_button.clicked.connect(self.remove_selected)
        self.cancel_button.clicked.connect(self.cancel)
        self.table.itemSelectionChanged.connect(self._show_buttons)
        self.table.itemDoubleClicked.connect(lambda _: self.open_selected() if self._installed(self._selected())
                                             else self.pull_selected())
        self.refresh()

    # -- the list ---------------------------------------------------------------------------------
    def refresh(self) -> None:
        """The catalog and the registry as they are now (another process may have pulled)."""
        from kazeia.engine.models.registry import Registry
        try:
            entries = Registry().entries()
        except ValueError as e:   # a damaged registry: say so, list the catalog still
            entries = []
            self.status.setText(str(e))
        by_source: dict[str, list] = {}
        for entry in entries:
            by_source.setdefault(entry.source.lower(), []).append(entry)
        keep = self._selected_source()
        self._rows = []
        self.table.setRowCount(0)
        for model in KNOWN_MODELS:
            if model.codec:   # (download only: nothing to open)
                continue
            installed = by_source.pop(model.repo.lower(), [])
            self._add_row(model.alias, model, [model.alias + f" ({model.size})", model.abilities,
                                               _size(model.download_mb * 1e6), _size((model.converted_mb or 0) * 1e6),
                                               ", ".join(f"{e.name}: {e.type}" for e in installed) or "no"], installed)
        for entries_of_repo in by_source.values():   # pulled by repository id on the command line
            for entry in entries_of_repo:
                self._add_row(entry.name, entry, [entry.name + f" ({entry.size})", f"{entry.variant}, from {entry.source}",
                                                  "-", _size(entry.file_bytes), f"{entry.name}: {entry.type}"], [entry])
        for i, (source, _, _) in enumerate(self._rows):
            if source == keep:
                self.table.selectRow(i)
        self._show_buttons()

    def _add_row(self, source: str, what, values: list[str], installed: list) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        for column, value in enumerate(values):
            item = QTableWidgetItem(value)
            item.setToolTip(value)
            self.table.setItem(row, column, item)
        self._rows.append((source, what, installed))

    def _selected(self):
        rows = self.table.selectionModel().selectedRows()
        return self._rows[rows[0].row()] if rows else None

    def _selected_source(self) -> str | None:
        selected = self._selected()
        return selected[0] if selected else None

    @staticmethod
    def _installed(selected) -> list:
        return selected[2] if selected else []

    def select(self, source: str) -> None:
        """Selects the row of an alias or a registered name."""
        for i, (name, _, _) in enumerate(self._rows):
            if name == source:
                self.table.selectRow(i)
                return
        raise KeyError(source)

    # -- pulling (a controller job: the window connects it here) -----------------------------------
    def pull_selected(self) -> bool:
        selected = self._selected()
        if selected is None or self.pulling:
            return False
        self.pull_requested.emit(selected[0] if not hasattr(selected[1], "source") else selected[1].source)
        return True

    def show_pull_started(self, source: str) -> None:
        self.pulling = True
        self._rate = PullRate()
        self.status.setStyleSheet("")
        self.status.setText(f"getting {source} ...")
        self.progress.setRange(0, 0)   # (busy until the first numbers come)
        self.progress.show()
        self._show_buttons()

    def cancel(self) -> None:
        if self.pulling:
            self.status.setText("cancelling ...")
            self.cancel_requested.emit()

    def show_progress(self, p) -> None:
        self.progress.setRange(0, 1000)
        self.progress.setValue(int(1000 * p.done / max(p.total, 1)))
        self.status.setText(self._rate.describe(p))

    def show_pull_failed(self, message: str) -> None:
        self._pull_ended()
        self.status.setText(message)
        self.status.setStyleSheet("" if message.startswith("cancelled") else "color: #b00020;")

    def show_pulled(self, result) -> None:
        """A finished pull: listed, selected, then opened."""
        self._pull_ended()
        entry = result.entry
        got = f"{_size(result.downloaded_bytes)} downloaded" if result.downloaded_bytes else "nothing to download"
        self.status.setText(f"{entry.name}: {got}, {_size(entry.file_bytes)} file ({entry.type}); opening it")
        known = find_known(entry.source)
        self.select(known.alias if known is not None else entry.name)
        self.pulled.emit(entry)
        self.open_requested.emit(entry.path)

    def _pull_ended(self) -> None:
        self.pulling = False
        self.progress.hide()
        self.status.setStyleSheet("")
        self.refresh()

    # -- installed models -------------------------------------------------------------------------
    def open_selected(self) -> None:
        installed = self._installed(self._selected())
        if installed:
            self.open_requested.emit(installed[0].path)

    def remove_selected(self) -> None:
        from kazeia.engine.models.registry import Registry
        installed = self._installed(self._selected())
        if not installed:
            return
        entry = installed[0]
        answer = QMessageBox.question(self, "Remove model", f"Forget {entry.name} and delete its file "
                                                            f"{entry.path} ({_size(entry.file_bytes)})?")
        if answer != QMessageBox.Yes:
            return
        try:
            Registry().remove(entry.name)
            Path(entry.path).unlink(missing_ok=True)
        except (ValueError, OSError) as e:
            self.status.setText(str(e))
        else:
            self.status.setText(f"removed {entry.name}")
        self.refresh()

    def _show_buttons(self) -> None:
        selected = self._selected()
        installed = self._installed(selected)
        self.get_button.setEnabled(selected is not None and not self.pulling)
        self.get_button.setText("Update" if installed else "Download and open")   # (up to date: nothing moves)
        self.open_button.setEnabled(bool(installed))
        self.remove_button.setEnabled(bool(installed) and not self.pulling)
        self.cancel_button.setVisible(self.pulling)
