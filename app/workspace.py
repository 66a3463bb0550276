"""The window's body in two arrangements of the same panels, switched as the window is resized:
wide (desktops, landscape tablets): compose | live | the other pages in tabs, side by side;
narrow (portrait tablets, 1024 px and below): every panel a page of one tab bar. Neither needs a
minimum width above the screen it is on: wide's columns fit in WIDE_WIDTH, a page fits a phone."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QScrollArea, QSplitter, QStackedLayout, QTabWidget, QWidget

WIDE_WIDTH = 1150   # logical px: 1280 and 1366 screens are wide, 1024 and portrait ones narrow


class Workspace(QWidget):
    arrangement_changed = Signal(str)   # "wide" or "narrow"

    def __init__(self, compose: QScrollArea, live: QWidget, pages: list[tuple[str, QWidget]]):
        super().__init__()
        self.compose, self.live, self.side = compose, live, pages
        self.split = QSplitter(Qt.Horizontal)
        self.split.setChildrenCollapsible(False)
        self.side_tabs = QTabWidget()
        self.pages = QTabWidget()
        self.pages.setDocumentMode(True)
        self.stack = QStackedLayout(self)
        self.stack.addWidget(self.split)
        self.stack.addWidget(self.pages)
        self.arrangement = ""
        # the screen decides the first arrangement: wide's columns must not make the window wider than it
        screen = QGuiApplication.primaryScreen()
        self.arrange("wide" if screen is None or screen.availableGeometry().width() >= WIDE_WIDTH else "narrow")

    def page_widgets(self) -> list[tuple[str, QWidget]]:
        return [("Compose", self.compose), ("Live", self.live), *self.side]

    def arrange(self, arrangement: str) -> None:
        if arrangement == self.arrangement:
            return
        current = self.current_page()
        if arrangement == "wide":
            self.pages.clear()   # (removes the tabs; the panels live on)
            self.split.addWidget(self.compose)
            self.split.addWidget(self.live)
            for title, widget in self.side:
                self.side_tabs.addTab(widget, title)
            self.split.addWidget(self.side_tabs)
            self.split.setStretchFactor(1, 1)
            self.split.setSizes([340, 540, 400])
            self.stack.setCurrentWidget(self.split)
        else:
            self.side_tabs.clear()
            for title, widget in self.page_widgets():
                self.pages.addTab(widget, title)
            self.stack.setCurrentWidget(self.pages)
        self.arrangement = arrangement
        if current is not None:
            self.show_page(current)
        self.arrangement_changed.emit(arrangement)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.arrange("wide" if event.size().width() >= WIDE_WIDTH else "narrow")

    def current_page(self) -> QWidget | None:
        if not self.arrangement:
            return None
        tabs = self.side_tabs if self.arrangement == "wide" else self.pages
        return tabs.currentWidget()

    def show_page(self, widget: QWidget) -> None:
        """Brings a panel into view: its tab (wide: compose and live are always in view)."""
        tabs = self.side_tabs if self.arrangement == "wide" else self.pages
        if tabs.indexOf(widget) >= 0:
            tabs.setCurrentWidget(widget)
