"""The voice library (engine/voices/voice_library.py, shared with `kazeia say --voice NAME` and `kazeia serve`):
every profile with its size, kind, source (a recording, a designed voice kept from a take...), language,
tags and notes; a search over all of them; preview (a short sentence, cached), notes and tags, rename,
delete (asks first), export and import (one file with the profile and its preview) here or asked of the
engine's worker (new from audio, preview). The folder is re-read when the panel is shown, so a second
workbench's changes appear."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QHBoxLayout, QHeaderView, QInputDialog, QLineEdit,
                               QMessageBox, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout)

from .base import Panel, wrapping_label

AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif"}
COLUMNS = ("name", "kind", "size", "source", "language", "tags", "notes")


class VoiceLibraryPanel(Panel):
    panel_id = "voices"
    create_requested = Signal(str, object)   # reference audio, transcript (None: x-vector only)
    preview_requested = Signal(str)
    profiles_changed = Signal(str)           # a name to select, or ""
    error = Signal(str)
    status = Signal(str)

    def __init__(self, settings, library):
        super().__init__(settings)
        self.library = library
        layout = QVBoxLayout(self)
        self.note = wrapping_label()
        layout.addWidget(self.note)
        self.search = QLineEdit()
        self.search.setPlaceholderText("search: name, tags, notes, language, source...")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _: self.refresh(select=self.current()))
        layout.addWidget(self.search)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setMaximumSectionSize(220)
        layout.addWidget(self.table, 1)
        self.buttons = {}
        for row_names in (("new", "preview", "describe", "rename"), ("delete", "export", "import")):
            row = QHBoxLayout()
            for key in row_names:
                text = {"new": "New from audio...", "preview": "Preview", "describe": "Notes and tags...",
                        "rename": "Rename...", "delete": "Delete...", "export": "Export...", "import": "Import..."}[key]
                self.buttons[key] = QPushButton(text)
                row.addWidget(self.buttons[key])
            layout.addLayout(row)
        self.new_button, self.preview_button = self.buttons["new"], self.buttons["preview"]
        self.rename_button, self.delete_button = self.buttons["rename"], self.buttons["delete"]
        self.new_button.clicked.connect(self.new_from_audio)
        self.buttons["rename"].clicked.connect(lambda: self.current() and self.rename(self.current()))
        self.buttons["delete"].clicked.connect(lambda: self.current() and self.delete(self.current()))
        self.buttons["preview"].clicked.connect(lambda: self.current() and self.preview_requested.emit(self.current()))
        self.buttons["describe"].clicked.connect(lambda: self.current() and self.describe(self.current()))
        self.buttons["export"].clicked.connect(lambda: self.current() and self.export(self.current()))
        self.buttons["import"].clicked.connect(lambda: self.import_file())
        self.model_info = None
        self.set_model(None)
        self.refresh()

    def showEvent(self, event) -> None:   # (another workbench may have changed the folder)
        self.refresh(select=self.current())
        super().showEvent(event)

    def new_from_audio(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Reference audio", "", "Audio (*.wav *.flac *.ogg *.mp3 *.aiff)")
        if path:
            text, ok = QInputDialog.getText(self, "Transcript", "what the reference says (optional: enables "
                                                                "in-context cloning)")
            self.create_requested.emit(path, text if ok and text else None)

    def _changed(self, select: str = "") -> None:
        self.refresh(select=select or None)
        self.profiles_changed.emit(select)

    def rename(self, name: str, new: str | None = None) -> None:
        if new is None:
            new, ok = QInputDialog.getText(self, "Rename voice", "name", text=name)
            if not ok:
                return
        try:
            new = self.library.rename(name, new)
        except (ValueError, OSError) as e:
            self.error.emit(str(e))
            return
        self._changed(new)

    def delete(self, name: str) -> None:
        if QMessageBox.question(self, "Delete voice", f"Delete the voice profile {name!r}? Takes made with it are "
                                "kept.") == QMessageBox.Yes:
            try:
                self.library.delete(name)
            except (ValueError, OSError) as e:
                self.error.emit(str(e))
            self._changed()

    def describe(self, name: str, notes: str | None = None, tags: str | None = None,
                 language: str | None = None) -> None:
        """Notes, tags (comma-separated) and language; asked for when not given."""
        entry = self.library.entry(name)
        if notes is None:
            notes, ok = QInputDialog.getMultiLineText(self, f"Notes: {name}", "notes", entry.notes)
            if not ok:
                return
        if tags is None:
            tags, ok = QInputDialog.getText(self, f"Tags: {name}", "tags, comma-separated", text=", ".join(entry.tags))
            if not ok:
                return
        if language is None:
            language, ok = QInputDialog.getText(self, f"Language: {name}", "language", text=entry.language)
            if not ok:
                return
        try:
            self.library.update(name, notes=notes, tags=tags.split(","), language=language.strip())
        except (ValueError, OSError) as e:
            self.error.emit(str(e))
            return
        self._changed(name)

    def export(self, name: str, path: str | None = None) -> None:
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self, "Export voice", f"{name}.kzvoice", "Voice (*.kzvoice)")
            if not path:
                return
        try:
            out = self.library.export(name, path, self.model_info)
        except (ValueError, OSError) as e:
            self.error.emit(f"cannot export {name!r}: {e}")
            return
        self.status.emit(f"exported {name!r} to {out}")

    def import_file(self, path: str | None = None) -> str | None:
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Import voice", "", "Voice (*.kzvoice)")
            if not path:
                return None
        try:
            name = self.library.import_file(path)
        except (ValueError, OSError) as e:
            self.error.emit(str(e))
            return None
        self._changed(name)
        self.status.emit(f"imported {name!r}")
        return name

    def current(self) -> str | None:
        row = self.table.currentRow()
        item = self.table.item(row, 0) if row >= 0 else None
        return item.text() if item else None

    def set_model(self, info) -> None:
        self.model_info = info
        base = info is not None and info.variant == "base"
        for b in (self.new_button, self.preview_button):
            b.setEnabled(base)
        self.note.setText("Voice profiles clone a voice from reference audio (a few seconds; with its transcript, "
                          "in-context cloning follows it more closely), or keep a take's voice (Takes: Keep this "
                          "voice). Drop audio files on the window to add one."
                          + ("" if base else " Load a Base model to create or preview profiles."))

    def refresh(self, select: str | None = None) -> None:
        entries = self.library.search(self.search.text())
        self.table.setRowCount(len(entries))
        for row, e in enumerate(entries):
            values = ((e.name, e.kind, e.size, e.source, e.language, ", ".join(e.tags), e.notes) if e.kind != "unreadable"
                      else (e.name, "unreadable", "", "", "", "", e.problem))
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                if col == len(values) - 1 and value:
                    item.setToolTip(value)
                self.table.setItem(row, col, item)
            if e.name == select:
                self.table.selectRow(row)
