"""A layout that places its items left to right and wraps to a new row when the width runs out, as
text does: the backend bar's groups take one row on a desktop and two or three on a portrait
tablet, and never ask for more width than their widest single group."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QWidgetItem


class FlowLayout(QLayout):
    def __init__(self, parent=None, spacing: int = 6):
        super().__init__(parent)
        self._items: list = []
        self._spacing = spacing

    # -- QLayout's item list ---------------------------------------------------------------------
    def addItem(self, item) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int):
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int):
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def add(self, widget) -> None:
        self.addChildWidget(widget)
        self.addItem(QWidgetItem(widget))

    # -- geometry --------------------------------------------------------------------------------
    def expandingDirections(self):
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), apply=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, apply=True)

    def sizeHint(self) -> QSize:
        """Everything on one row."""
        m = self.contentsMargins()
        visible = [i for i in self._items if not i.isEmpty()]
        width = sum(i.sizeHint().width() for i in visible) + self._spacing * max(0, len(visible) - 1)
        height = max((i.sizeHint().height() for i in visible), default=0)
        return QSize(width + m.left() + m.right(), height + m.top() + m.bottom())

    def minimumSize(self) -> QSize:
        """The widest single item: narrower than that, something would be cut."""
        m = self.contentsMargins()
        size = QSize()
        for item in self._items:
            if not item.isEmpty():
                size = size.expandedTo(item.minimumSize())
        return size + QSize(m.left() + m.right(), m.top() + m.bottom())

    def _place(self, rect: QRect, apply: bool) -> int:
        """Rows of items at their size hints; an item that is allowed to grow takes the rest of its
        row. Returns the height used."""
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        rows: list[list] = [[]]
        used = 0
        for item in (i for i in self._items if not i.isEmpty()):
            w = min(item.sizeHint().width(), area.width())
            if rows[-1] and used + self._spacing + w > area.width():
                rows.append([])
                used = 0
            used += (self._spacing if rows[-1] else 0) + w
            rows[-1].append(item)
        y = area.y()
        for row in rows:
            if not row:
                continue
            height = max(i.sizeHint().height() for i in row)
            widths = [min(i.sizeHint().width(), area.width()) for i in row]
            spare = area.width() - sum(widths) - self._spacing * (len(row) - 1)
            growing = [k for k, i in enumerate(row) if i.expandingDirections() & Qt.Horizontal]
            for k in growing:
                widths[k] += spare // len(growing)
            if apply:
                x = area.x()
                for item, w in zip(row, widths):
                    h = min(height, max(item.sizeHint().height(), item.minimumSize().height()))
                    item.setGeometry(QRect(QPoint(x, y + (height - h) // 2), QSize(w, h)))
                    x += w + self._spacing
            y += height + self._spacing
        return y - self._spacing - area.y() + m.top() + m.bottom() if y > area.y() else m.top() + m.bottom()
