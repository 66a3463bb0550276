"""Walks a window's visible widgets and lists what a user would see cut: text that does not fit its
widget (labels, buttons, check boxes, combo boxes, spin boxes, line edits' placeholders, tab and
table headers, group titles, measured with the widget's own font) and widgets that lie outside
their parent or the screen. Used by the workbench's size test at every screen size."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import (QAbstractButton, QAbstractItemView, QAbstractScrollArea, QAbstractSpinBox,
                               QCheckBox, QComboBox, QGroupBox, QHeaderView, QLabel, QLineEdit,
                               QMenuBar, QPushButton, QRadioButton, QScrollBar, QStyle, QStyleOptionButton,
                               QStyleOptionComboBox, QTabBar, QWidget)

SLACK = 1   # px of rounding


def _name(w: QWidget) -> str:
    text = ""
    for attr in ("text", "title", "placeholderText", "currentText"):
        if hasattr(w, attr):
            try:
                text = getattr(w, attr)() or text
            except TypeError:
                pass
        if text:
            break
    return f"{type(w).__name__}({w.objectName() or ''}{':' if w.objectName() else ''}{text[:40]!r})"


def _label_problem(w: QLabel) -> str | None:
    text = w.text()
    if not text or w.pixmap() is not None and not w.pixmap().isNull():
        return None
    rect = w.contentsRect()
    rich = w.textFormat() == Qt.RichText or (w.textFormat() == Qt.AutoText and text.lstrip().startswith("<"))
    if w.wordWrap() or rich:
        doc = QTextDocument()
        doc.setDefaultFont(w.font())
        doc.setDocumentMargin(0)
        if rich:
            doc.setHtml(text)
        else:
            doc.setPlainText(text)
        if w.wordWrap():
            doc.setTextWidth(max(1, rect.width()))
        ideal = doc.idealWidth()
        height = doc.size().height()
        if ideal > rect.width() + SLACK or height > rect.height() + SLACK:
            return f"needs {ideal:.0f}x{height:.0f}, has {rect.width()}x{rect.height()}"
        return None
    fm = w.fontMetrics()
    lines = text.split("\n")
    width = max(fm.horizontalAdvance(line) for line in lines)
    height = fm.height() * len(lines)
    if width > rect.width() + SLACK or height > rect.height() + SLACK:
        return f"needs {width}x{height}, has {rect.width()}x{rect.height()}"
    return None


def _button_problem(w: QAbstractButton) -> str | None:
    text = w.text().replace("&&", "\0").replace("&", "").replace("\0", "&")
    if not text:
        return None
    fm = w.fontMetrics()
    needed = fm.horizontalAdvance(text)
    style = w.style()
    if isinstance(w, (QCheckBox, QRadioButton)):
        opt = QStyleOptionButton()
        opt.initFrom(w)
        opt.text = w.text()
        element = QStyle.SE_CheckBoxContents if isinstance(w, QCheckBox) else QStyle.SE_RadioButtonContents
        room = style.subElementRect(element, opt, w).width()
    elif isinstance(w, QPushButton):
        opt = QStyleOptionButton()
        opt.initFrom(w)
        opt.text = w.text()
        room = style.subElementRect(QStyle.SE_PushButtonContents, opt, w).width() - 2 * style.pixelMetric(
            QStyle.PM_ButtonMargin, opt, w) // 2
    else:   # tool buttons: a small frame
        room = w.contentsRect().width() - 4
    if needed > room + SLACK or fm.height() > w.height():
        return f"text needs {needed} px, has {room}"
    return None


def _combo_problem(w: QComboBox) -> str | None:
    text = w.currentText()
    if not text:
        return None
    opt = QStyleOptionComboBox()
    opt.initFrom(w)
    opt.editable = w.isEditable()
    opt.currentText = text
    room = w.style().subControlRect(QStyle.CC_ComboBox, opt, QStyle.SC_ComboBoxEditField, w).width() - 2
    needed = w.fontMetrics().horizontalAdvance(text)
    return f"text needs {needed} px, has {room}" if needed > room + SLACK else None


def _line_edit_problem(w: QLineEdit) -> str | None:
    if w.text() or not w.placeholderText() or isinstance(w.parent(), (QAbstractSpinBox, QComboBox)):
        return None
    frame = w.style().pixelMetric(QStyle.PM_DefaultFrameWidth, None, w) if w.hasFrame() else 0
    margins = w.textMargins()
    room = w.width() - 2 * frame - 4 - margins.left() - margins.right()
    needed = w.fontMetrics().horizontalAdvance(w.placeholderText())
    return f"placeholder needs {needed} px, has {room}" if needed > room + SLACK else None


def _spin_problem(w: QAbstractSpinBox) -> str | None:
    edit = w.findChild(QLineEdit)
    if edit is None or not w.text():
        return None
    needed = w.fontMetrics().horizontalAdvance(w.text())
    room = edit.width() - 2
    return f"value needs {needed} px, has {room}" if needed > room + SLACK else None


def _header_problems(w: QHeaderView) -> list[str]:
    model = w.model()
    if model is None:
        return []
    out = []
    fm = w.fontMetrics()
    margin = 2 * w.style().pixelMetric(QStyle.PM_HeaderMargin, None, w)
    for i in range(w.count()):
        if w.isSectionHidden(i):
            continue
        text = str(model.headerData(i, w.orientation(), Qt.DisplayRole) or "")
        if not text:
            continue
        needed = fm.horizontalAdvance(text) + margin
        if w.orientation() == Qt.Horizontal:
            if w.isSortIndicatorShown() and w.sortIndicatorSection() == i:
                needed += w.style().pixelMetric(QStyle.PM_HeaderMarkSize, None, w)
            room = w.sectionSize(i)
        else:
            room = w.width()
        if needed > room + SLACK:
            out.append(f"header {text!r} needs {needed} px, has {room}")
    return out


def _tab_problems(w: QTabBar) -> list[str]:
    out = []
    fm = w.fontMetrics()
    for i in range(w.count()):
        needed = fm.horizontalAdvance(w.tabText(i).replace("&", ""))
        room = w.tabRect(i).width() - w.style().pixelMetric(QStyle.PM_TabBarTabHSpace, None, w) // 2
        if needed > room + SLACK:
            out.append(f"tab {w.tabText(i)!r} needs {needed} px, has {room}")
        if not w.rect().contains(w.tabRect(i)) and not w.usesScrollButtons():
            out.append(f"tab {w.tabText(i)!r} lies outside its bar")
    return out


def _cut(w: QWidget, window: QWidget) -> str | None:
    """The part of `w` that its parents hide: none may be, but for content scrolled out of a scroll
    area's or item view's viewport (in the directions that area scrolls)."""
    if w.isWindow() or isinstance(w, QScrollBar):
        return None
    rect = QRect(w.mapTo(window, QPoint(0, 0)), w.size())
    parent = w.parentWidget()
    while parent is not None and parent is not window:
        outer = QRect(parent.mapTo(window, QPoint(0, 0)), parent.size())
        area = parent.parentWidget()
        if isinstance(area, QAbstractScrollArea) and area.viewport() is parent:
            if area.horizontalScrollBarPolicy() == Qt.ScrollBarAlwaysOff and \
                    (rect.left() < outer.left() - SLACK or rect.right() > outer.right() + SLACK):
                return (f"{rect.width()} px wide, cut at the sides by a {outer.width()} px view that cannot "
                        "scroll sideways")
            return None   # the rest scrolls
        if not outer.adjusted(-SLACK, -SLACK, SLACK, SLACK).contains(rect):
            shown = outer.intersected(rect)
            return f"{rect.width()}x{rect.height()}, only {shown.width()}x{shown.height()} shown by {_name(parent)}"
        parent = parent.parentWidget()
    return None


def clipped(window: QWidget) -> list[str]:
    """What is cut in `window` as it is shown now (hidden pages are not looked at)."""
    out = []
    screen = window.screen().availableGeometry()
    frame = window.frameGeometry()
    if not screen.adjusted(-SLACK, -SLACK, SLACK, SLACK).contains(frame):
        out.append(f"window {frame.width()}x{frame.height()} at {frame.x()},{frame.y()} is not inside the screen "
                   f"{screen.width()}x{screen.height()}")
    for w in window.findChildren(QWidget):
        if not w.isVisible() or w.window() is not window or w.width() <= 0:
            continue
        if isinstance(w.parentWidget(), QMenuBar) or _inside_item_editor(w):
            continue
        problems = []
        where = _cut(w, window)
        if where:
            problems.append(where)
        if isinstance(w, QLabel):
            problems.append(_label_problem(w))
        elif isinstance(w, QAbstractButton) and not isinstance(w, QTabBar):
            problems.append(_button_problem(w))
        elif isinstance(w, QComboBox):
            problems.append(_combo_problem(w))
        elif isinstance(w, QAbstractSpinBox):
            problems.append(_spin_problem(w))
        elif isinstance(w, QLineEdit):
            problems.append(_line_edit_problem(w))
        elif isinstance(w, QHeaderView):
            problems.extend(_header_problems(w))
        elif isinstance(w, QTabBar):
            problems.extend(_tab_problems(w))
        elif isinstance(w, QGroupBox) and w.title():
            needed = w.fontMetrics().horizontalAdvance(w.title()) + 16
            if needed > w.width():
                problems.append(f"title needs {needed} px, has {w.width()}")
        out += [f"{_path(w)}: {p}" for p in problems if p]
    return out


def _inside_item_editor(w: QWidget) -> bool:
    p = w.parentWidget()
    while p is not None:
        if isinstance(p, QAbstractItemView) and w is not p and p.viewport().isAncestorOf(w):
            return True
        p = p.parentWidget()
    return False


def _path(w: QWidget) -> str:
    parts = []
    p = w
    while p is not None and not p.isWindow():
        if p.objectName():
            parts.append(p.objectName())
            break
        p = p.parentWidget()
    return f"{_name(w)}" + (f" in {parts[0]}" if parts and parts[0] != w.objectName() else "")
