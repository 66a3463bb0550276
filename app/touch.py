"""Touch: on a touch screen (found among Qt's input devices, or forced in View > Touch) hit targets
are at least 44 px, lists, tables and the text scroll by dragging (QScroller, kinetic), a tap on a
take plays it and a long press opens its actions, and the on-screen keyboard never covers the text
being typed. Tooltips' information is reachable with the "?" button (What's this)."""
from __future__ import annotations

from PySide6.QtCore import QElapsedTimer, QEvent, QObject, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QInputDevice
from PySide6.QtWidgets import QAbstractItemView, QAbstractScrollArea, QApplication, QScroller, QWhatsThis, QWidget

CHOICES = ("auto", "on", "off")
HIT_TARGET = 44            # px: the smallest comfortable target for a finger (Apple HIG, Material: 48 dp)
LONG_PRESS_MS = 600
TAP_SLOP = 12              # px a finger may move and still tap

TOUCH_STYLE = f"""
QAbstractButton, QComboBox, QAbstractSpinBox, QLineEdit {{ min-height: {HIT_TARGET}px; }}
QPushButton, QToolButton {{ min-width: {HIT_TARGET}px; padding: 0 10px; }}
QCheckBox::indicator {{ width: 26px; height: 26px; }}
QTabBar::tab {{ min-height: {HIT_TARGET}px; padding: 0 14px; }}
QScrollBar:vertical {{ width: 18px; }}
QScrollBar:horizontal {{ height: 18px; }}
"""


def touch_screen_present() -> bool:
    return any(d.type() == QInputDevice.DeviceType.TouchScreen for d in QInputDevice.devices())


def touch_wanted(choice: str) -> bool:
    if choice not in CHOICES:
        raise ValueError(f"touch {choice!r}: expected one of {', '.join(CHOICES)}")
    return touch_screen_present() if choice == "auto" else choice == "on"


def set_touch_style(root: QWidget, on: bool) -> None:
    """Hit targets and rows sized for a finger (or back to the desktop's)."""
    root.setStyleSheet(TOUCH_STYLE if on else "")
    for view in root.findChildren(QAbstractItemView):
        header = view.verticalHeader() if hasattr(view, "verticalHeader") else None
        if header is not None:
            header.setMinimumSectionSize(HIT_TARGET if on else 0)
            header.setDefaultSectionSize(HIT_TARGET if on else view.fontMetrics().height() + 10)


def enable_drag_scrolling(root: QWidget) -> None:
    """Kinetic scrolling by finger for every list, table, text and scroll area (the mouse keeps its
    own: a drag with the mouse still selects)."""
    for area in root.findChildren(QAbstractScrollArea):
        QScroller.grabGesture(area.viewport(), QScroller.TouchGesture)


def tooltips_as_whats_this(root: QWidget) -> None:
    """Every tooltip is also the widget's What's this text, which "?" then a tap shows."""
    for w in [root, *root.findChildren(QWidget)]:
        if w.toolTip() and not w.whatsThis():
            w.setWhatsThis(w.toolTip())


class TapAndHold(QObject):
    """Taps and long presses of a finger on an item view's rows: `tapped(row)` on a short touch
    that did not move, `held(row, global_pos)` when a finger held still LONG_PRESS_MS is lifted
    (lifting it onto a menu opened under it would choose the item it lands on). A moving finger
    scrolls."""
    tapped = Signal(int)
    held = Signal(int, object)

    def __init__(self, view: QAbstractItemView):
        super().__init__(view)
        self.view = view
        view.viewport().setAttribute(Qt.WA_AcceptTouchEvents)
        view.viewport().installEventFilter(self)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(LONG_PRESS_MS)
        self._timer.timeout.connect(self._hold)
        self._clock = QElapsedTimer()
        self._start = QPointF()
        self._row = -1
        self._done = False
        self._held = False

    def eventFilter(self, obj, event) -> bool:
        kind = event.type()
        if kind not in (QEvent.TouchBegin, QEvent.TouchUpdate, QEvent.TouchEnd, QEvent.TouchCancel):
            return False
        points = event.points()
        pos = points[0].position() if points else self._start
        if kind == QEvent.TouchBegin:
            self._start, self._done, self._held = pos, False, False
            self._row = self.view.indexAt(pos.toPoint()).row()
            self._clock.start()
            self._timer.start()
        elif kind == QEvent.TouchUpdate:
            if (pos - self._start).manhattanLength() > TAP_SLOP:
                self._timer.stop()
                self._done = True   # a drag: QScroller's
        elif kind == QEvent.TouchEnd:
            self._timer.stop()
            if self._held:
                self.held.emit(self._row, self.view.viewport().mapToGlobal(self._start.toPoint()))
            elif not self._done and self._row >= 0 and self._clock.elapsed() < LONG_PRESS_MS:
                self.tapped.emit(self._row)
            self._done = True
            self._held = False
        else:
            self._timer.stop()
            self._done, self._held = True, False
        event.accept()
        return True   # a finger's own: no mouse press is made of it (QScroller sees it through its gesture)

    def _hold(self) -> None:
        if not self._done and self._row >= 0:
            self._done = self._held = True


class TapForHelp(QObject):
    """"?" then a tap (or click) on any control shows what its tooltip says; the tap does nothing
    else. A widget that takes touch events sees a TouchBegin, any other the mouse press Qt makes
    of the tap. (Qt's own What's this mode misses the first kind.)"""
    shown = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.active = False
        self._swallow = False   # the rest of the tap that showed the help

    def start(self) -> None:
        if not self.active:
            self.active = True
            QApplication.instance().installEventFilter(self)
            QApplication.setOverrideCursor(Qt.WhatsThisCursor)

    def stop(self) -> None:
        if self.active:
            self.active = False
            QApplication.instance().removeEventFilter(self)
            QApplication.restoreOverrideCursor()

    def eventFilter(self, obj, event) -> bool:
        kind = event.type()
        if self._swallow and kind in (QEvent.TouchUpdate, QEvent.TouchEnd, QEvent.MouseButtonRelease, QEvent.MouseMove):
            if kind in (QEvent.TouchEnd, QEvent.MouseButtonRelease):
                self._swallow = False
                self.stop()
            return True
        # (a tap soon after the "?" one comes as a double click)
        if kind not in (QEvent.TouchBegin, QEvent.MouseButtonPress, QEvent.MouseButtonDblClick) or \
                not isinstance(obj, QWidget):
            return False
        widget, text = obj, ""
        while widget is not None and not text:
            text = widget.whatsThis() or widget.toolTip()
            widget = widget.parentWidget()
        where = event.points()[0].globalPosition().toPoint() if kind == QEvent.TouchBegin else \
            event.globalPosition().toPoint()
        QWhatsThis.showText(where, text or "nothing to say about this one", obj)
        self.shown.emit(text)
        event.accept()
        self._swallow = True
        return True


def keyboard_overlap(window: QWidget, rect: QRectF | None = None) -> int:
    """How many px of the window's bottom the on-screen keyboard covers (0 without one). Qt gives
    the keyboard's rectangle in the focus window's coordinates."""
    rect = QApplication.inputMethod().keyboardRectangle() if rect is None else rect
    if rect.isEmpty():
        return 0
    return max(0, min(window.height(), window.height() - int(rect.top())))


def lift_above_keyboard(window: QWidget, outer, scroll_area, text, rect: QRectF | None = None) -> int:
    """Lifts the window's content (its outer layout) above the on-screen keyboard, keeping the text
    cursor and the focused field of the scroll area in view; returns the px covered."""
    covered = keyboard_overlap(window, rect)
    margins = outer.contentsMargins()
    outer.setContentsMargins(margins.left(), margins.top(), margins.right(), 4 + covered)
    if covered:
        outer.activate()
        text.ensureCursorVisible()
        focus = QGuiApplication.focusObject()
        if isinstance(focus, QWidget) and scroll_area.isAncestorOf(focus):
            scroll_area.ensureWidgetVisible(focus)
    return covered
