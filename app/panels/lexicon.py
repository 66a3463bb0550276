"""Pronunciation: the operator's rules (term -> how to say it; case, language and voice optional),
edited in a table, checked as they are typed by the engine's own lexicon (kazeia.engine.text.lexicon:
the first bad rule is named, the takes use the last good set) and kept in the user's data folder as
pronunciation.csv, which `kazeia say --lexicon` and `kazeia render --lexicon` read as they are."""
from __future__ import annotations

import csv
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout)

from kazeia.engine.atomic import atomic_write_text
from kazeia.engine.text.lexicon import FIELDS, Lexicon, LexiconError

from .base import Panel, wrapping_label


class LexiconPanel(Panel):
    panel_id = "pronunciation"
    error = Signal(str)

    def __init__(self, settings, path: Path):
        super().__init__(settings)
        self.path = Path(path)
        self.lexicon: Lexicon | None = None   # the last good rules (None: no rules)
        layout = QVBoxLayout(self)
        self.note = wrapping_label()
        layout.addWidget(self.note)
        self.table = QTableWidget(0, len(FIELDS))
        self.table.setHorizontalHeaderLabels(["term", "say", "case", "language", "voice"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)
        row = QHBoxLayout()
        self.add_button, self.remove_button = QPushButton("Add rule"), QPushButton("Remove")
        row.addWidget(self.add_button)
        row.addWidget(self.remove_button)
        row.addStretch(1)
        layout.addLayout(row)
        self.add_button.clicked.connect(lambda: self.add_rule())
        self.remove_button.clicked.connect(self.remove_selected)
        self._load()
        self.table.itemChanged.connect(lambda _item: self.apply())

    def add_rule(self, *values: str) -> None:
        self.table.blockSignals(True)
        row = self.table.rowCount()
        self.table.insertRow(row)
        for column in range(len(FIELDS)):
            self.table.setItem(row, column, QTableWidgetItem(values[column] if column < len(values) else ""))
        self.table.blockSignals(False)
        if values:
            self.apply()
        else:
            self.table.editItem(self.table.item(row, 0))

    def remove_selected(self) -> None:
        for row in sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True):
            self.table.removeRow(row)
        self.apply()

    def rows(self) -> list[list[str]]:
        out = []
        for r in range(self.table.rowCount()):
            cells = [(self.table.item(r, c).text() if self.table.item(r, c) else "").strip() for c in range(len(FIELDS))]
            if any(cells):
                out.append(cells)
        return out

    def apply(self) -> Lexicon | None:
        """The table's rules checked; good ones are saved and used from the next take."""
        text = self._csv(self.rows())
        try:
            lexicon = Lexicon.from_rules_text(text, "csv", name=self.path.name) if self.rows() else None
        except LexiconError as e:
            self.note.setText(f"takes keep the last good rules until this is mended: {e}")
            self.error.emit(str(e))
            return None
        self.lexicon = lexicon
        self.note.setText(f"{len(lexicon)} rule(s), used by every take (whole words; {self.path})" if lexicon
                          else f"no rules: add one to change how a word is said ({self.path})")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, text)
        except OSError as e:
            self.error.emit(f"could not save the pronunciation rules: {e}")
        return lexicon

    @staticmethod
    def _csv(rows: list[list[str]]) -> str:
        import io
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(FIELDS)
        writer.writerows(rows)
        return buffer.getvalue()

    def _load(self) -> None:
        if not self.path.exists():
            self.apply()
            return
        try:
            lexicon = Lexicon.load(self.path)
        except LexiconError as e:   # a file edited by hand: shown, kept, not used
            self.note.setText(f"{self.path} is not used until mended: {e}")
            return
        for rule in lexicon.rules:
            self.add_rule(rule.term, rule.say, rule.case, rule.language or "", rule.voice or "")
        self.apply()
