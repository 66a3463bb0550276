"""Light and dark: the window follows the system's colour scheme (Qt 6.5+ reports it and its changes)
unless the operator forces one (View > Theme). Widgets take a Fusion palette; the plots, which
pyqtgraph draws with colours of their own, take theirs from the same Colors."""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette

CHOICES = ("auto", "light", "dark")


@dataclass(frozen=True)
class Colors:
    name: str
    window: str
    base: str           # text fields, tables, plot backgrounds
    alternate: str
    text: str
    muted: str          # disabled text
    button: str
    highlight: str
    highlighted_text: str
    link: str
    error: str          # error text and the real-time line
    error_background: str
    wave: str           # the take's waveform


LIGHT = Colors("light", window="#efefef", base="#ffffff", alternate="#f5f5f5", text="#1a1a1a", muted="#6e6e6e",
               button="#e6e6e6", highlight="#2f65ca", highlighted_text="#ffffff", link="#1d4ea8", error="#b00020",
               error_background="#fdecea", wave="#282828")
DARK = Colors("dark", window="#2b2b2e", base="#1e1e20", alternate="#26262a", text="#e8e8e8", muted="#8f8f94",
              button="#3a3a3e", highlight="#3a6fd6", highlighted_text="#ffffff", link="#8ab4ff", error="#ff8a80",
              error_background="#4a1f1f", wave="#d8d8d8")


def system_is_dark() -> bool:
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def resolve(choice: str) -> Colors:
    if choice not in CHOICES:
        raise ValueError(f"theme {choice!r}: expected one of {', '.join(CHOICES)}")
    if choice == "auto":
        return DARK if system_is_dark() else LIGHT
    return DARK if choice == "dark" else LIGHT


def palette(c: Colors) -> QPalette:
    p = QPalette()
    roles = {QPalette.Window: c.window, QPalette.WindowText: c.text, QPalette.Base: c.base,
             QPalette.AlternateBase: c.alternate, QPalette.Text: c.text, QPalette.Button: c.button,
             QPalette.ButtonText: c.text, QPalette.BrightText: c.error, QPalette.Highlight: c.highlight,
             QPalette.HighlightedText: c.highlighted_text, QPalette.Link: c.link, QPalette.ToolTipBase: c.base,
             QPalette.ToolTipText: c.text, QPalette.PlaceholderText: c.muted}
    for role, color in roles.items():
        p.setColor(role, QColor(color))
    for role in (QPalette.WindowText, QPalette.Text, QPalette.ButtonText):
        p.setColor(QPalette.Disabled, role, QColor(c.muted))
    return p


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours (4.5 is the floor for body text)."""
    def luminance(color: str) -> float:
        q = QColor(color)
        channels = [(v / 255) / 12.92 if v / 255 <= 0.03928 else ((v / 255 + 0.055) / 1.055) ** 2.4
                    for v in (q.red(), q.green(), q.blue())]
        return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


class Theme(QObject):
    """The colours in force; `changed` when the choice or the system's scheme changes."""
    changed = Signal(object)   # Colors

    def __init__(self, choice: str = "auto"):
        super().__init__()
        self.choice = choice if choice in CHOICES else "auto"
        self.colors = resolve(self.choice)
        QGuiApplication.styleHints().colorSchemeChanged.connect(lambda _: self.apply())

    def set_choice(self, choice: str) -> None:
        self.colors = resolve(choice)   # (a bad choice raises before anything changes)
        self.choice = choice
        self.apply()

    def apply(self) -> None:
        self.colors = resolve(self.choice)
        app = QGuiApplication.instance()
        if app.style().name().lower() != "fusion":   # the one style that draws any palette faithfully
            app.setStyle("Fusion")
        app.setPalette(palette(self.colors))
        self.changed.emit(self.colors)
