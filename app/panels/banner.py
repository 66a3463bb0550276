"""The error banner at the top of the window: visible until the next success or its close button
(Help > Messages keeps every message)."""
from __future__ import annotations

from PySide6.QtWidgets import QFrame, QHBoxLayout, QToolButton

from .base import wrapping_label


class ErrorBanner(QFrame):
    def __init__(self):
        super().__init__()
        self.setObjectName("banner")
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 2, 6, 2)
        self.text = wrapping_label()
        close = QToolButton()
        close.setText("x")
        close.setToolTip("hide this message (Help > Messages keeps it)")
        close.clicked.connect(self.clear)
        row.addWidget(self.text, 1)
        row.addWidget(close)
        self.hide()

    def show_message(self, message: str) -> None:
        self.text.setText(message)
        self.show()

    def clear(self) -> None:
        self.hide()
        self.text.setText("")

    def apply_colors(self, colors) -> None:
        self.setStyleSheet(f"#banner {{ background: {colors.error_background}; border: 1px solid {colors.error}; }}")
        self.text.setStyleSheet(f"color: {colors.error};")
