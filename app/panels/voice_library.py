"""The voice library: every profile with its kind (x-vector, or in-context with a transcript) and
the model it was made for; new (from reference audio, on the engine's worker), rename, delete
(asks first) and preview (a short fixed sentence, played, not kept as a take)."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QPushButton, QSizePolicy,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

COLUMNS = ("name", "kind", "made for", "transcript")


class VoiceLibraryPanel(QWidget):
    panel_id = "voices"
    new_requested = Signal()
    rename_requested = Signal(str)
    delete_requested = Signal(str)
    preview_requested = Signal(str)

    def __init__(self, library):
        super().__init__()
        self.library = library
        layout = QVBoxLayout(self)
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.note.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        layout.addWidget(self.note)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)
        row = QHBoxLayout()
        self.new_button, self.rename_button, self.delete_button, self.preview_button = (
            QPushButton("New from audio..."), QPushButton("Rename..."), QPushButton("Delete..."), QPushButton("Preview"))
        for b in (self.new_button, self.rename_button, self.delete_button, self.preview_button):
            row.addWidget(b)
        layout.addLayout(row)
        self.new_button.clicked.connect(self.new_requested)
        self.rename_button.clicked.connect(lambda: self._emit_for_current(self.rename_requested))
        self.delete_button.clicked.connect(lambda: self._emit_for_current(self.delete_requested))
        self.preview_button.clicked.connect(lambda: self._emit_for_current(self.preview_requested))
        self.set_enabled_for(None)
        self.refresh()

    def _emit_for_current(self, signal) -> None:
        name = self.current()
        if name:
            signal.emit(name)

    def current(self) -> str | None:
        row = self.table.currentRow()
        item = self.table.item(row, 0) if row >= 0 else None
        return item.text() if item else None

    def set_enabled_for(self, info) -> None:
        base = info is not None and info.variant == "base"
        for b in (self.new_button, self.preview_button):
            b.setEnabled(base)
        self.note.setText("Voice profiles clone a voice from reference audio (a few seconds; with its transcript, "
                          "in-context cloning follows it more closely). Drop audio files on the window to add one."
                          + ("" if base else " Load a Base model to create or preview profiles."))

    def refresh(self, select: str | None = None) -> None:
        names = self.library.names()
        self.table.setRowCount(len(names))
        for row, name in enumerate(names):
            info = self.library.info(name)
            values = (name, info["kind"], f"{info['model']} ({info['size']})", info["transcript"])
            for col, value in enumerate(values):
                self.table.setItem(row, col, QTableWidgetItem(value))
            if name == select:
                self.table.selectRow(row)
