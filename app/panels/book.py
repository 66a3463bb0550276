"""The Book panel: a book (EPUB, Markdown, text) rendered to a folder through the same core as `kazeia
book`, on the engine's worker, in the window's current voice. The book's chapters (read and skipped,
with why) and each one's progress; the chunks of a written chapter, each with its place in the
chapter; play a chapter or one chunk; make one chunk again (a new seed, kept in the folder); open the
folder. The folder's work (.kazeia-book) is the panel's state: reopening a book, or the window, shows
what is done, and rendering again resumes."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import soundfile
from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QHBoxLayout,
                               QHeaderView, QLineEdit, QProgressBar, QPushButton, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from kazeia.engine.book.export import CHAPTER_FORMATS
from kazeia.engine.book.render import WORK, clock, set_redo_seed
from kazeia.engine.book.source import BookError, read_book

from ..elided_label import ElidedLabel
from ..flow_layout import FlowLayout
from .base import Panel, watch, wrapping_label

CHAPTER_COLUMNS = ("#", "chapter", "words", "progress", "audio", "status")
CHUNK_COLUMNS = ("#", "text", "starts at", "seconds")


class BookPanel(Panel):
    panel_id = "book"
    render_requested = Signal(object)   # {book, out_dir, formats, loudness, per, m4b}
    stop_requested = Signal()
    play_file_requested = Signal(str)
    play_audio_requested = Signal(object)   # a chunk's samples

    def __init__(self, settings):
        super().__init__(settings)
        self.book = None
        self.rendering = False
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.open_button = QPushButton("Open book...")
        self.path_label = ElidedLabel("no book: .epub (without DRM), .md or .txt", Qt.ElideLeft)
        top.addWidget(self.open_button)
        top.addWidget(self.path_label, 1)
        layout.addLayout(top)
        options = FlowLayout()   # (wraps on a narrow screen)
        self.out_dir = QLineEdit()
        self.out_dir.setPlaceholderText("output folder")
        self.out_dir.setMinimumWidth(220)
        self.format = QComboBox()
        self.format.addItems([f for f in CHAPTER_FORMATS if f != "wav"])
        self.format.setToolTip("the chapter files' format (an M4B of the whole book is made beside them)")
        self.loudness = QDoubleSpinBox()
        self.loudness.setRange(-40.0, -10.0)
        self.loudness.setDecimals(1)
        self.loudness.setValue(-20.0)
        self.loudness.setSuffix(" LUFS")
        self.loudness.setToolTip("integrated loudness of the finished files (EBU R128: -23; audiobook stores: "
                                 "-18 to -20), under a -3 dBTP true-peak ceiling")
        self.per = QComboBox()
        self.per.addItems(["one gain per book", "one gain per chapter"])
        self.m4b = QCheckBox("M4B")
        self.m4b.setChecked(True)
        self.m4b.setToolTip("one M4B of the whole book with a chapter mark per chapter")
        for w in (self.out_dir, self.format, self.loudness, self.per, self.m4b):
            options.addWidget(w)
        layout.addLayout(options)
        split = QSplitter(Qt.Vertical)
        self.chapters = self._table(CHAPTER_COLUMNS, stretch=1)
        self.chunks = self._table(CHUNK_COLUMNS, stretch=1)
        split.addWidget(self.chapters)
        split.addWidget(self.chunks)
        split.setSizes([3, 2])
        layout.addWidget(split, 1)
        buttons = QWidget()
        row = FlowLayout(buttons)
        self.render_button = QPushButton("Render book")
        self.stop_button = QPushButton("Stop")
        self.play_chapter_button = QPushButton("Play chapter")
        self.play_chunk_button = QPushButton("Play chunk")
        self.redo_button = QPushButton("Make chunk again")
        self.redo_button.setToolTip("the selected chunk with a new seed; the rest of the book is kept")
        self.folder_button = QPushButton("Open folder")
        for b in (self.render_button, self.stop_button, self.play_chapter_button, self.play_chunk_button,
                  self.redo_button, self.folder_button):
            b.setMinimumHeight(36)   # (a finger's target on a tablet)
            row.addWidget(b)
        layout.addWidget(buttons)
        self.progress = wrapping_label()
        layout.addWidget(self.progress)
        self.open_button.clicked.connect(self._open_dialog)
        self.render_button.clicked.connect(self.request_render)
        self.stop_button.clicked.connect(self.stop_requested)
        self.play_chapter_button.clicked.connect(self.play_chapter)
        self.play_chunk_button.clicked.connect(self.play_chunk)
        self.redo_button.clicked.connect(self.redo_chunk)
        self.folder_button.clicked.connect(
            lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.output_folder()))))
        self.chapters.itemSelectionChanged.connect(self.show_chunks)
        self.out_dir.editingFinished.connect(self.refresh)
        watch([self.out_dir, self.format, self.loudness, self.per, self.m4b], lambda *_: self.changed.emit())
        self.set_rendering(False)

    @staticmethod
    def _table(columns, stretch: int) -> QTableWidget:
        table = QTableWidget(0, len(columns))
        table.setHorizontalHeaderLabels(list(columns))
        table.setSelectionBehavior(QAbstractItemView.SelectRows)
        table.setSelectionMode(QAbstractItemView.SingleSelection)
        table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        table.verticalHeader().hide()
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        table.horizontalHeader().setSectionResizeMode(stretch, QHeaderView.Stretch)
        return table

    # -- settings ----------------------------------------------------------------------------
    def restore_settings(self) -> None:
        self.format.setCurrentText(str(self.value("format", "flac")))
        self.loudness.setValue(float(self.value("loudness", -20.0)))
        self.per.setCurrentIndex(int(self.value("per", 0)))
        self.m4b.setChecked(str(self.value("m4b", "true")).lower() == "true")
        book = self.value("book", "")
        if book and Path(book).is_file():
            self.open_book(book, out_dir=str(self.value("out_dir", "")) or None)

    def save_settings(self) -> None:
        self.set_value("format", self.format.currentText())
        self.set_value("loudness", self.loudness.value())
        self.set_value("per", self.per.currentIndex())
        self.set_value("m4b", self.m4b.isChecked())
        self.set_value("book", str(self.book.path) if self.book else "")
        self.set_value("out_dir", self.out_dir.text())

    # -- the book and its folder ---------------------------------------------------------------
    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a book", "", "Books (*.epub *.md *.markdown *.txt)")
        if path:
            self.open_book(path)

    def open_book(self, path: str, out_dir: str | None = None) -> bool:
        try:
            book = read_book(path)
        except BookError as e:
            self.progress.setText(str(e))
            return False
        self.book = book
        self.path_label.setText(str(book.path))
        self.out_dir.setText(out_dir or str(book.path.with_name(f"{book.path.stem}-audiobook")))
        self.chapters.setRowCount(len(book.chapters))
        number = 0
        for r, chapter in enumerate(book.chapters):
            number += chapter.read
            values = (str(number) if chapter.read else "-", chapter.title, str(chapter.words), "", "",
                      "" if chapter.read else f"skipped: {chapter.skip_reason}")
            for c, value in enumerate(values):
                if c == 3 and chapter.read:
                    bar = QProgressBar()
                    bar.setRange(0, 1)
                    bar.setValue(0)
                    self.chapters.setCellWidget(r, c, bar)
                    continue
                item = QTableWidgetItem(value)
                item.setToolTip(" ".join(chapter.text.split())[:400] if c == 1 else value)
                self.chapters.setItem(r, c, item)
        words = sum(c.words for c in book.read_chapters)
        self.progress.setText(f"{book.title}" + (f" by {book.author}" if book.author else "")
                              + f": {len(book.read_chapters)} chapter(s), {words} words; "
                              + f"{len(book.chapters) - len(book.read_chapters)} part(s) skipped")
        self.refresh()
        self.changed.emit()
        return True

    def output_folder(self) -> Path:
        return Path(self.out_dir.text() or ".")

    def _row_of(self, number: int) -> int | None:
        for r in range(self.chapters.rowCount()):
            if self.chapters.item(r, 0).text() == str(number):
                return r
        return None

    def _meta(self, number: int) -> dict | None:
        try:
            return json.loads((self.output_folder() / WORK / "chapters" / f"{number:03d}.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None

    def refresh(self) -> None:
        """Each chapter's state from the folder: written (its chunks and length) or not yet."""
        if self.book is None:
            return
        for number in range(1, len(self.book.read_chapters) + 1):
            r, meta = self._row_of(number), self._meta(number)
            if r is None:
                continue
            if meta is not None:
                chunks = len(meta["digests"])
                self._bar(r, chunks, chunks)
                self._set(r, 4, clock(meta["samples"] / meta.get("sample_rate", 24000)))
                self._set(r, 5, "written")
            elif not self.rendering:
                self._set(r, 5, "")
        self.show_chunks()

    def _bar(self, row: int, done: int, total: int) -> None:
        bar = self.chapters.cellWidget(row, 3)
        if bar is not None:
            bar.setRange(0, max(1, total))
            bar.setValue(done)
            bar.setFormat(f"{done}/{total}")

    def _set(self, row: int, col: int, text: str) -> None:
        self.chapters.setItem(row, col, QTableWidgetItem(text))

    def selected_chapter(self) -> int | None:
        rows = {i.row() for i in self.chapters.selectedIndexes()}
        if not rows:
            return None
        text = self.chapters.item(min(rows), 0).text()
        return int(text) if text.isdigit() else None

    def selected_chunk(self) -> int | None:
        rows = {i.row() for i in self.chunks.selectedIndexes()}
        return min(rows) if rows else None

    def show_chunks(self) -> None:
        """The selected chapter's chunks, once it is written: its words and where each lies."""
        number = self.selected_chapter()
        meta = self._meta(number) if number else None
        cues = meta["cues"] if meta else []
        rate = meta.get("sample_rate", 24000) if meta else 24000
        self.chunks.setRowCount(len(cues))
        for r, cue in enumerate(cues):
            values = (str(r + 1), cue["text"], clock(cue["start"] / rate), f"{(cue['end'] - cue['start']) / rate:.1f}")
            for c, value in enumerate(values):
                self.chunks.setItem(r, c, QTableWidgetItem(value))

    # -- actions -------------------------------------------------------------------------------
    def request_render(self) -> None:
        if self.book is None or self.rendering:
            return
        self.render_requested.emit({"book": str(self.book.path), "out_dir": str(self.output_folder()),
                                    "formats": [self.format.currentText()], "loudness": self.loudness.value(),
                                    "per": "chapter" if self.per.currentIndex() else "book",
                                    "m4b": self.m4b.isChecked()})

    def play_chapter(self) -> None:
        number = self.selected_chapter()
        if number is not None and self._meta(number) is not None:
            self.play_file_requested.emit(str(self.output_folder() / WORK / "chapters" / f"{number:03d}.wav"))

    def play_chunk(self) -> None:
        number, chunk = self.selected_chapter(), self.selected_chunk()
        meta = self._meta(number) if number else None
        if meta is None or chunk is None:
            return
        cue = meta["cues"][chunk]
        path = self.output_folder() / WORK / "chapters" / f"{number:03d}.wav"
        with soundfile.SoundFile(str(path)) as f:
            f.seek(cue["start"])
            audio = f.read(cue["end"] - cue["start"], dtype="float32")
        self.play_audio_requested.emit(np.asarray(audio))

    def redo_chunk(self) -> None:
        number, chunk = self.selected_chapter(), self.selected_chunk()
        meta = self._meta(number) if number else None
        if meta is None or chunk is None or self.rendering:
            return
        set_redo_seed(self.output_folder(), number, meta["cues"][chunk]["chunk"], random.randrange(2 ** 31))
        self.request_render()

    def set_rendering(self, rendering: bool) -> None:
        self.rendering = rendering
        for b in (self.render_button, self.redo_button, self.open_button):
            b.setEnabled(not rendering)
        self.stop_button.setEnabled(rendering)

    def show_progress(self, p: dict) -> None:
        """A render's progress (the worker's snapshot of book.render.Progress)."""
        for number, (done, total) in p["chapter_chunks"].items():
            r = self._row_of(number)
            if r is None:
                continue
            self._bar(r, done, total)
            if number in p["chapters_written"]:
                self._set(r, 5, "written")
            elif done:
                self._set(r, 5, "speaking")
        self.progress.setText(f"{p['stage']}: chunks {p['chunks_done']}/{p['chunks_total']} ({p['chunks_kept']} kept), "
                              f"chapters written {len(p['chapters_written'])}/{len(p['chapter_chunks'])}, "
                              f"time left {clock(p['seconds_left'])}")

    def show_finished(self, result) -> None:
        self.refresh()
        notes = "; ".join(result.notes)
        state = "stopped: render again to resume" if result.stopped else (
            f"finished: {len(result.chapters)} chapter(s), {clock(result.seconds)} of audio, "
            f"{len(result.files)} file(s) in {self.output_folder()}")
        self.progress.setText(state + (f" ({notes})" if notes else ""))
