"""The size test's widget walker finds what a user would see cut, and passes what fits (offscreen,
one widget at a time): otherwise a green size test would prove nothing."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import (QCheckBox, QComboBox, QLabel, QLineEdit, QPushButton, QScrollArea,  # noqa: E402
                               QTableWidget, QVBoxLayout, QWidget)

from support.layout_check import clipped  # noqa: E402

LONG = "a text far too long for the narrow widget it was given to show"


def shown(qtbot, make, width: int = 120) -> list[str]:
    window = QWidget()
    qtbot.addWidget(window)
    layout = QVBoxLayout(window)
    widget = make()
    layout.addWidget(widget)
    window.setFixedWidth(width)
    window.show()
    qtbot.waitExposed(window)
    return clipped(window)


@pytest.mark.parametrize("make", [
    lambda: QLabel(LONG),
    lambda: QPushButton(LONG),
    lambda: QCheckBox(LONG),
    lambda: QComboBox() if False else _combo(LONG),
    lambda: _placeholder(LONG),
], ids=["label", "button", "check box", "combo box", "placeholder"])
def test_cut_text_is_found(qtbot, make):
    found = shown(qtbot, make)
    assert found and "needs" in found[0], found


@pytest.mark.parametrize("make", [
    lambda: QLabel("fits"), lambda: QPushButton("OK"), lambda: QCheckBox("on"), lambda: _combo("auto"),
    lambda: _placeholder("name"), lambda: _wrapped(LONG)], ids=["label", "button", "check box", "combo box",
                                                                 "placeholder", "wrapped label"])
def test_what_fits_passes(qtbot, make):
    assert shown(qtbot, make, width=400) == []


def test_a_header_cut_by_its_section_is_found(qtbot):
    def make():
        table = QTableWidget(1, 2)
        table.setHorizontalHeaderLabels(["a long column title", "b"])
        table.horizontalHeader().resizeSection(0, 30)
        return table
    found = shown(qtbot, make, width=300)
    assert any("header 'a long column title'" in f for f in found), found


def test_content_wider_than_a_view_that_cannot_scroll_sideways_is_found(qtbot):
    def make():
        area = QScrollArea()
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        inner = QWidget()
        inner.setMinimumWidth(500)
        QVBoxLayout(inner).addWidget(QPushButton("inside"))
        area.setWidget(inner)
        area.setWidgetResizable(True)
        return area
    found = shown(qtbot, make, width=200)
    assert any("cannot scroll sideways" in f for f in found), found


def _combo(text: str) -> QComboBox:
    box = QComboBox()
    box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(3)
    box.addItem(text)
    return box


def _placeholder(text: str) -> QLineEdit:
    edit = QLineEdit()
    edit.setPlaceholderText(text)
    return edit


def _wrapped(text: str) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    return label
