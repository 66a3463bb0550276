"""Takes as a sortable table (time, name, voice, seed, placement, threads, length, RTF, stop reason,
model), filtered to the loaded model by default, with the selected take's parameters in words, and
what acts on takes: rename, delete (asks first), export, restore; play and A/B are asked of the
window (it owns the audio output). A finger's tap on a row plays the take, a long press opens the
take's actions."""
from __future__ import annotations

import html

import time
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QHeaderView,
                               QFrame, QInputDialog, QLabel, QLineEdit, QMenu, QMessageBox, QPushButton, QScrollArea,
                               QSplitter, QTableView, QVBoxLayout)

from kazeia.engine.synthesis.placement import STAGES

from ..export import FORMATS, export_takes
from ..touch import TapAndHold
from .base import Panel, as_bool, watch, wrapping_label

COLUMNS = ("time", "name", "voice", "seed", "placement", "threads", "frames", "seconds", "RTF", "stop", "model")
SHORT_MODE = {"cpu": "cpu", "accel-weights": "weights", "accel-sched": "sched"}


def placement_short(placement: dict) -> str:
    """"cpu" when every stage agrees, else talker/cp/decoder, e.g. "cpu/cpu/sched"."""
    modes = [placement.get(s, "?") for s in STAGES]
    if len(set(modes)) == 1:
        return modes[0]
    return "/".join(SHORT_MODE.get(m, m) for m in modes)


def stop_text(reason: str) -> str:
    return {"eos": "end", "limit": "LIMIT", "cancelled": "CANCELLED"}.get(reason, reason or "?")


def take_details(take) -> str:
    """A take's parameters in words (the details pane)."""
    t, s, r = take.timings, take.sampling, take.request
    sampling = "greedy" if not s.get("do_sample", True) else (
        f"temperature {s.get('temperature', 0):.2f}, top-k {s.get('top_k')}, top-p {s.get('top_p', 0):.2f}; "
        f"code predictor {s.get('cp_temperature', 0):.2f} / {s.get('cp_top_k')} / {s.get('cp_top_p', 0):.2f}")
    # (the pane shows rich text: what a take file holds is escaped, never read as markup)
    lines = [f"{take.label} ({take.id})",
             f"text: {take.text[:300]}",
             f"voice: {take.voice}, language {r.get('language') or 'auto'}",
             f"seed {s.get('seed')}, {sampling}, max frames {s.get('max_frames') or 'auto'}",
             "placement: " + ", ".join(f"{stage.replace('_', ' ')} {take.placement.get(stage, '?')}"
                                        for stage in STAGES) + f"; {take.threads} threads",
             f"{t.get('frames', 0)} frames, {take.seconds:.2f} s, stopped: {stop_text(take.stop_reason)}; "
             f"TTFA {t.get('ttfa_ms', 0):.0f} ms, prefill {t.get('prefill_ms', 0):.0f} ms, RTF {t.get('rtf', 0):.2f}",
             f"model: {Path(take.model).name}"]
    if take.peak_memory_mb:
        lines.append(f"peak memory during the take: {take.peak_memory_mb:.0f} MB")
    for c in take.chunks[:20]:
        start, end = (x / take.sample_rate for x in c["span"])
        rewrites = f"; said {', '.join(f'{a} as {b}' for a, b, _ in c['rewrites'])}" if c.get("rewrites") else ""
        lines.append(f"chunk {c['index'] + 1} ({start:.2f}-{end:.2f} s, {c['voice'] or 'voice above'}, seed "
                     f"{c['seed']}{', LIMIT' if c['stop_reason'] == 'limit' else ''}): {c['written'][:80]}{rewrites}")
    if len(take.chunks) > 20:
        lines.append(f"... and {len(take.chunks) - 20} more chunks")
    lines = [html.escape(line) for line in lines]
    lines[0] = f"<b>{html.escape(take.label)}</b> ({html.escape(take.id)})"
    return "<br>".join(lines)


class TakeTableModel(QAbstractTableModel):
    def __init__(self, store):
        super().__init__()
        self.store = store

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.store.takes)

    def columnCount(self, parent=QModelIndex()) -> int:
        return len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if role == Qt.DisplayRole and orientation == Qt.Horizontal:
            return COLUMNS[section]
        return None

    def take(self, row: int):
        return self.store.takes[row]

    def data(self, index, role=Qt.DisplayRole):
        take = self.store.takes[index.row()]
        column = COLUMNS[index.column()]
        if role == Qt.DisplayRole:
            return self.display(take, column)
        if role == Qt.UserRole:   # sort key
            return self.sort_key(take, column)
        if role == Qt.ForegroundRole and column == "stop" and take.stop_reason in ("cancelled", "limit"):
            return QBrush(QColor(176, 0, 32))
        if role == Qt.ToolTipRole:
            return take.text
        if role == Qt.TextAlignmentRole and column in ("seed", "threads", "frames", "seconds", "RTF"):
            return int(Qt.AlignRight | Qt.AlignVCenter)
        return None

    @staticmethod
    def display(take, column: str) -> str:
        t = take.timings
        return {"time": time.strftime("%H:%M:%S", time.localtime(take.created)),
                "name": take.name or take.text[:40], "voice": take.voice, "seed": str(take.sampling.get("seed", "")),
                "placement": placement_short(take.placement), "threads": str(take.threads or ""),
                "frames": str(t.get("frames", "")), "seconds": f"{take.seconds:.2f}",
                "RTF": f"{t['rtf']:.2f}" if t.get("rtf") == t.get("rtf") and t.get("rtf") is not None else "",
                "stop": stop_text(take.stop_reason), "model": Path(take.model).name}[column]

    @staticmethod
    def sort_key(take, column: str):
        t = take.timings
        numeric = {"time": take.created, "seed": take.sampling.get("seed", 0), "threads": take.threads,
                   "frames": t.get("frames", 0), "seconds": take.seconds, "RTF": t.get("rtf") or 0.0}
        return numeric.get(column, TakeTableModel.display(take, column).lower())

    def refresh(self) -> None:
        self.beginResetModel()
        self.endResetModel()


class TakeFilter(QSortFilterProxyModel):
    """"This model only": the takes of the loaded model file."""

    def __init__(self):
        super().__init__()
        self.model_path = ""
        self.only_this_model = True
        self.setSortRole(Qt.UserRole)

    def set_model(self, info) -> None:
        self.set_model_path(str(info.path))

    def set_model_path(self, path: str) -> None:
        self._refilter(model_path=path)

    def set_only_this_model(self, on: bool) -> None:
        self._refilter(only_this_model=on)

    def _refilter(self, **settings) -> None:
        """Change what the filter reads and apply it: bracketed by begin/endFilterChange on Qt 6.9
        and later, followed by invalidateFilter before (PySide6 6.8, the newest with ARM64 Linux
        wheels for glibc older than 2.39, e.g. Debian 12 and Raspberry Pi OS)."""
        bracketed = hasattr(self, "beginFilterChange")
        if bracketed:
            self.beginFilterChange()
        for name, value in settings.items():
            setattr(self, name, value)
        if bracketed:
            self.endFilterChange()
        else:
            self.invalidateFilter()

    def filterAcceptsRow(self, row, parent) -> bool:
        if not self.only_this_model or not self.model_path:
            return True
        return self.sourceModel().take(row).model == self.model_path


class TakesPanel(Panel):
    panel_id = "takes"
    selection_changed = Signal(object)   # the current Take or None
    play_requested = Signal(object)      # a Take
    ab_requested = Signal()
    blind_requested = Signal()           # a blind test of the two selected
    keep_voice_requested = Signal(object, str)   # a take whose voice becomes a profile, and its name
    restore_requested = Signal(object)   # a Take whose settings go back into the panels
    redo_chunk_requested = Signal(object, int)   # a long take and the chunk (0-based) to make again
    removing = Signal(object)            # a Take about to be deleted (its playback stops)
    status = Signal(str)
    error = Signal(str)

    def __init__(self, settings, store):
        super().__init__(settings)
        self.store = store
        self.model = TakeTableModel(store)
        self.proxy = TakeFilter()
        self.proxy.setSourceModel(self.model)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self._build_table(layout)
        self._build_actions(layout)
        self._connect()
        self.refresh()

    def _build_table(self, layout) -> None:
        """The filter and count, the table and the selected take's details below it."""
        top = QHBoxLayout()
        self.only_this_model = QCheckBox("this model only")
        self.only_this_model.setChecked(True)
        self.count = QLabel("")
        top.addWidget(self.only_this_model)
        top.addStretch(1)
        top.addWidget(self.count)
        layout.addLayout(top)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setWordWrap(False)
        self.table.horizontalHeader().setMaximumSectionSize(150)
        self.details = wrapping_label()
        self.details.setTextFormat(Qt.RichText)
        self.details.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        details = QScrollArea()   # a long text scrolls, never cut
        details.setObjectName("take_details")
        details.setWidget(self.details)
        details.setWidgetResizable(True)
        details.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        details.setFrameShape(QFrame.NoFrame)
        split = QSplitter(Qt.Vertical)
        split.addWidget(self.table)
        split.addWidget(details)
        split.setSizes([300, 140])
        layout.addWidget(split, 1)

    def _build_actions(self, layout) -> None:
        """A/B and blind test, then restore, rename, delete, then export."""
        row = QHBoxLayout()
        self.match_loudness = QCheckBox("match loudness in A/B")
        self.match_loudness.setChecked(True)
        row.addWidget(self.match_loudness)
        row.addStretch(1)
        self.blind_button = QPushButton("Blind test...")
        self.blind_button.setToolTip("ABX or a blind preference test of the two selected takes")
        row.addWidget(self.blind_button)
        layout.addLayout(row)
        self.ab_label = wrapping_label()
        layout.addWidget(self.ab_label)
        row = QHBoxLayout()
        self.restore_button, self.rename_button, self.delete_button = (
            QPushButton("Restore settings"), QPushButton("Rename"), QPushButton("Delete"))
        for b in (self.restore_button, self.rename_button, self.delete_button):
            row.addWidget(b)
        layout.addLayout(row)
        row = QHBoxLayout()
        self.export_format = QComboBox()
        self.export_format.addItems(list(FORMATS))
        self.export_pattern = QLineEdit("{index}_{name}")
        self.export_pattern.setToolTip("file names: {index} {id} {name} {speaker} {seed} {text}")
        self.export_button = QPushButton("Export selected...")
        row.addWidget(self.export_format)
        row.addWidget(self.export_pattern, 1)
        row.addWidget(self.export_button)
        layout.addLayout(row)

    def _connect(self) -> None:
        self.only_this_model.toggled.connect(self._filter_changed)
        self.table.selectionModel().currentRowChanged.connect(lambda *_: self.selection_changed.emit(self.current()))
        self.restore_button.clicked.connect(lambda: self.current() and self.restore_requested.emit(self.current()))
        self.rename_button.clicked.connect(self.rename_current)
        self.delete_button.clicked.connect(self.delete_selected)
        self.export_button.clicked.connect(lambda: self.export_selected())
        self.blind_button.clicked.connect(self.blind_requested)
        self.finger = TapAndHold(self.table)
        self.finger.tapped.connect(self._tapped)
        self.finger.held.connect(self.open_actions)
        self.table.setContextMenuPolicy(Qt.CustomContextMenu)
        self.table.customContextMenuRequested.connect(
            lambda pos: self.table.indexAt(pos).isValid() and
            self.open_actions(self.table.indexAt(pos).row(), self.table.viewport().mapToGlobal(pos)))
        watch([self.only_this_model, self.match_loudness, self.export_format, self.export_pattern], self.changed)

    def _filter_changed(self, on: bool) -> None:
        self.proxy.set_only_this_model(on)
        self._count()

    def _count(self) -> None:
        shown, total = self.proxy.rowCount(), len(self.store.takes)
        noun = "take" if total == 1 else "takes"
        self.count.setText(f"{shown} of {total} {noun}" if shown != total else f"{total} {noun}")

    def set_model(self, info) -> None:
        self.set_model_path(str(info.path))

    def set_model_path(self, path: str) -> None:
        self.proxy.set_model_path(path)
        self._count()

    def refresh(self, select=None) -> None:
        self.model.refresh()
        self.table.resizeColumnsToContents()
        self._count()
        if select is not None:
            self.select(select)

    def select(self, take) -> None:
        row = self.store.takes.index(take)
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if index.isValid():
            self.table.selectionModel().clearSelection()
            self.table.setCurrentIndex(index)
            self.table.selectRow(index.row())

    def select_rows(self, rows: list[int]) -> None:
        """Selects rows of the table as shown (tests, A/B)."""
        self.table.clearSelection()
        for r in rows:
            self.table.selectionModel().select(self.proxy.index(r, 0),
                                               self.table.selectionModel().Select | self.table.selectionModel().Rows)
        if rows:
            self.table.selectionModel().setCurrentIndex(self.proxy.index(rows[0], 0),
                                                        self.table.selectionModel().NoUpdate)
            self.selection_changed.emit(self.current())

    def current(self):
        index = self.table.currentIndex()
        if not index.isValid():
            return None
        return self.model.take(self.proxy.mapToSource(index).row())

    def selected(self) -> list:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.model.take(self.proxy.mapToSource(self.proxy.index(r, 0)).row()) for r in rows]

    # -- what acts on takes ----------------------------------------------------------------------
    def rename_current(self) -> None:
        take = self.current()
        if take is None:
            return
        name, ok = QInputDialog.getText(self, "Rename take", "name", text=take.name)
        if ok:
            self.store.rename(take, name)
            self.refresh(select=take)

    def delete_selected(self) -> None:
        takes = self.selected()
        if not takes or QMessageBox.question(self, "Delete takes", f"Delete {len(takes)} take(s) and their "
                                             "audio?") != QMessageBox.Yes:
            return
        for take in takes:
            self.removing.emit(take)
            self.store.delete(take)
        self.refresh()

    def export_selected(self, folder: str | None = None) -> list[Path]:
        takes = self.selected()
        if not takes:
            self.status.emit("select takes to export")
            return []
        folder = folder or QFileDialog.getExistingDirectory(self, "Export to folder")
        if not folder:
            return []
        try:
            paths = export_takes([(t, self.store.audio(t)) for t in takes], Path(folder),
                                 self.export_pattern.text(), self.export_format.currentText())
        except (OSError, KeyError, ValueError, IndexError) as e:
            self.error.emit(f"export failed: {e}")
            return []
        self.status.emit(f"exported {len(paths)} take(s) to {folder}")
        return paths

    # -- a finger ----------------------------------------------------------------------------------
    def _row_take(self, row: int):
        return self.model.take(self.proxy.mapToSource(self.proxy.index(row, 0)).row())

    def _tapped(self, row: int) -> None:
        take = self._row_take(row)
        self.select(take)
        self.play_requested.emit(take)

    def open_actions(self, row: int, where) -> QMenu:
        """The take's actions, for a long press (or a right click)."""
        take = self._row_take(row)
        if take not in self.selected():
            self.select(take)
        menu = QMenu(self)
        menu.setObjectName("take_actions")
        menu.addAction("Play", lambda: self.play_requested.emit(take))
        ab = menu.addAction("A/B the two selected", self.ab_requested.emit)
        ab.setEnabled(len(self.selected()) == 2)
        blind = menu.addAction("Blind test the two selected...", self.blind_requested.emit)
        blind.setEnabled(len(self.selected()) == 2)
        menu.addAction("Restore settings", lambda: self.restore_requested.emit(take))
        menu.addAction("Keep this voice...", lambda: self.ask_keep_voice(take))
        redo = menu.addAction("Make a chunk again (new seed)...", lambda: self.ask_redo_chunk(take))
        redo.setEnabled(bool(take.chunks))
        menu.addAction("Rename...", self.rename_current)
        menu.addAction("Export...", lambda: self.export_selected())
        menu.addAction("Delete...", self.delete_selected)
        menu.popup(where)
        return menu

    def ask_keep_voice(self, take) -> None:
        """The name of the voice profile the take's voice becomes."""
        default = take.name or (f"kept {take.request['instruct'][:30]}" if take.request.get("instruct")
                                else f"kept {take.voice}")
        name, ok = QInputDialog.getText(self, "Keep this voice", "a name for the voice (kept in the voice library, "
                                              "for every Base model size at hand)", text=default)
        if ok and name.strip():
            self.keep_voice_requested.emit(take, name.strip())

    def ask_redo_chunk(self, take) -> None:
        """Which chunk of a long take to make again (1-based for the operator)."""
        lines = "\n".join(f"{c['index'] + 1}: {c['written'][:60]}" for c in take.chunks[:12])
        number, ok = QInputDialog.getInt(self, "Make a chunk again", f"{lines}\n\nchunk:", 1, 1, len(take.chunks))
        if ok:
            self.redo_chunk_requested.emit(take, number - 1)

    def show_details(self, take) -> None:
        self.details.setText(take_details(take) if take is not None else "")

    def restore_settings(self) -> None:
        self.only_this_model.setChecked(as_bool(self.value("only_this_model", True)))
        self.match_loudness.setChecked(as_bool(self.value("match_loudness", True)))
        fmt = self.value("export_format")
        if fmt in FORMATS:
            self.export_format.setCurrentText(fmt)
        self.export_pattern.setText(self.value("export_pattern", self.export_pattern.text()))

    def save_settings(self) -> None:
        self.set_value("only_this_model", self.only_this_model.isChecked())
        self.set_value("match_loudness", self.match_loudness.isChecked())
        self.set_value("export_format", self.export_format.currentText())
        self.set_value("export_pattern", self.export_pattern.text())
