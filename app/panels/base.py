"""What every panel shares: a stable id (its QSettings group), a `changed` signal, and settings
saved the moment the operator changes something (not only on a clean close)."""
from __future__ import annotations

from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import (QAbstractButton, QAbstractSpinBox, QComboBox, QFormLayout, QGroupBox, QLabel, QLineEdit,
                               QPlainTextEdit, QSizePolicy, QSlider, QVBoxLayout, QWidget)


def wrapping_label(text: str = "", name: str | None = None) -> QLabel:
    """A label for notes and figures of any length: it wraps, and never widens the window."""
    label = QLabel(text)
    if name:
        label.setObjectName(name)
    label.setWordWrap(True)
    label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
    return label


def watch(widgets, slot) -> None:
    """Calls `slot` whenever any of the widgets' values change."""
    for w in widgets:
        if isinstance(w, QComboBox):
            w.currentTextChanged.connect(slot)
        elif isinstance(w, QAbstractButton):
            w.toggled.connect(slot)
        elif isinstance(w, QAbstractSpinBox):
            w.valueChanged.connect(slot)
        elif isinstance(w, (QLineEdit, QPlainTextEdit)):
            w.textChanged.connect(slot)
        elif isinstance(w, QSlider):
            w.valueChanged.connect(slot)


class Panel(QWidget):
    panel_id = "panel"
    changed = Signal()

    def __init__(self, settings: QSettings):
        super().__init__()
        self.settings = settings
        self._restoring = False
        self._restored = False   # nothing is saved before the saved settings were read
        self.changed.connect(self._save_now)

    def framed_form(self, title: str) -> QFormLayout:
        """The panel as one titled group of labelled rows."""
        box = QGroupBox(title)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(box)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)   # fields take the column's width
        form.setRowWrapPolicy(QFormLayout.WrapLongRows)   # a narrow column puts a field under its label
        return form

    def key(self, name: str) -> str:
        return f"{self.panel_id}/{name}"

    def value(self, name: str, default=None):
        return self.settings.value(self.key(name), default)

    def set_value(self, name: str, value) -> None:
        self.settings.setValue(self.key(name), value)

    def restore(self) -> None:
        """Widgets from the saved settings (without saving them back)."""
        self._restoring = True
        try:
            self.restore_settings()
        finally:
            self._restoring = False
            self._restored = True

    def _save_now(self) -> None:
        if self._restored and not self._restoring:
            self.save_settings()
            self.settings.sync()

    # panels override these
    def set_model(self, info) -> None:
        """A model was loaded (its ModelInfo)."""

    def restore_settings(self) -> None:
        pass

    def save_settings(self) -> None:
        pass


def as_bool(value) -> bool:
    return value is True or str(value).lower() == "true"
