"""The voice library: every profile with its kind (x-vector, or in-context with a transcript) and
the model it was made for; rename and delete (asks first) here, new (from reference audio) and
preview (a short fixed sentence, played, not kept as a take) asked of the engine's worker."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QHBoxLayout, QHeaderView, QInputDialog, QMessageBox, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout)

from .base import Panel, wrapping_label

COLUMNS = ("name", "kind", "made for", "transcript")


class VoiceLibraryPanel(Panel):
    panel_id = "voices"
    create_requested = Signal(str, object)   # reference audio, transcript (None: x-vector only)
    preview_requested = Signal(str)
    profiles_changed = Signal(str)           # a name to select, or ""
    error = Signal(str)

    def __init__(self, settings, library):
        super().__init__(settings)
        self.library = library
        layout = QVBoxLayout(self)
        self.note = wrapping_label()
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
            QPushButton("New from audio..."), QPushButton("Rename..."), QPushButton("Delete..."),
            QPushButton("Preview"))
        for b in (self.new_button, self.rename_button, self.delete_button, self.preview_button):
            row.addWidget(b)
        layout.addLayout(row)
        self.new_button.clicked.connect(self.new_from_audio)
        self.rename_button.clicked.connect(lambda: self.current() and self.rename(self.current()))
        self.delete_button.clicked.connect(lambda: self.current() and self.delete(self.current()))
        self.preview_button.clicked.connect(lambda: self.current() and self.preview_requested.emit(self.current()))
        self.set_model(None)
        self.refresh()

    def new_from_audio(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Reference audio", "", "Audio (*.wav *.flac *.ogg *.mp3 *.aiff)")
        if path:
            text, ok = QInputDialog.getText(self, "Transcript", "what the reference says (optional: enables "
                                                                "in-context cloning)")
            self.create_requested.emit(path, text if ok and text else None)

    def rename(self, name: str) -> None:
        new, ok = QInputDialog.getText(self, "Rename voice", "name", text=name)
        if not ok:
            return
        try:
            new = self.library.rename(name, new)
        except ValueError as e:
            self.error.emit(str(e))
            return
        self.refresh(select=new)
        self.profiles_changed.emit(new)

    def delete(self, name: str) -> None:
        if QMessageBox.question(self, "Delete voice", f"Delete the voice profile {name!r}? Takes made with it are "
                                "kept.") == QMessageBox.Yes:
            self.library.delete(name)
            self.refresh()
            self.profiles_changed.emit("")

    def current(self) -> str | None:
        row = self.table.currentRow()
        item = self.table.item(row, 0) if row >= 0 else None
        return item.text() if item else None

    def set_model(self, info) -> None:
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
