"""The workbench window: layout and chrome only. It places the panels (backend bar, transport, and
the workspace, wide or narrow), makes the menus and shortcuts from the commands table
(app/menus.py), shows messages and the error banner, follows the theme, touch settings and the
on-screen keyboard, and takes dropped files (app/opening.py). What the operator's actions do is
the presenters' (app/presenters/, one per feature: panels -> session -> the engine's controller);
what may start when, the session's (app/session.py, no Qt).

While a take runs the GUI thread only copies each chunk and redraws on a display timer, drawing only
what is new: the engine's latencies are not paid for by the window that shows them."""
from __future__ import annotations

import logging

from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import (QDialog, QLabel, QMainWindow, QMessageBox, QPlainTextEdit,
                               QScrollArea, QVBoxLayout, QWidget)

from kazeia.resources import icon_path

from . import theme, touch
from .audio_output import AudioOutput
from .menus import build_menus, command_slots
from .opening import choose_model, open_dropped
from .panels.backend import BackendPanel, modes_help
from .panels.banner import ErrorBanner
from .panels.compare import ComparePanel
from .panels.latency import LatencyPanel
from .panels.lexicon import LexiconPanel
from .panels.models import ModelsPanel
from .panels.sampling import SamplingPanel
from .panels.book import BookPanel
from .panels.script import ScriptPanel
from .panels.serve import ServePanel
from .panels.takes import TakesPanel
from .panels.transport import TransportBar
from .panels.voice import VoicePanel
from .panels.voice_library import VoiceLibraryPanel
from .plots import TakeView
from .presenters import Presenters
from .session import Session
from .takes import TakeStore
from .text_markup import TextPlanLabel
from .workspace import Workspace

# display ticks: the latency view and the take view take turns (4 redraws a second each)
DISPLAY_HZ = 8


class MainWindow(QMainWindow):
    error_shown = Signal(str)

    def __init__(self, model_path: str | None = None, settings: QSettings | None = None,
                 audio: AudioOutput | None = None, store: TakeStore | None = None):
        super().__init__()
        self.setWindowTitle("Kazeia workbench")
        self.setWindowIcon(QIcon(str(icon_path())))
        self.settings = settings or QSettings("Kazeia", "Workbench")
        self.audio = audio or AudioOutput()
        self.session = Session(store or TakeStore())
        self.store, self.voices = self.session.store, self.session.voices
        self.theme = theme.Theme(str(self.settings.value("view/theme", "auto")))
        self.touch = False
        self._build()
        # after the widgets: the controller's threads must not outlive a failed build
        self.presenter = Presenters(self, self.session, self.audio)
        self.controller, self.playback = self.presenter.controller, self.presenter.playback
        self._connect()
        build_menus(self, command_slots(self), self.takes.table)
        for panel in self.panels:
            panel.restore()
        self.text.setPlainText(self.settings.value("text/current", self.text.toPlainText()))
        self.audio.set_volume(self.backend.volume.value() / 100)
        if self.backend.has_output:
            self.audio.set_device(self.backend.device_box.currentData())
        self.theme.changed.connect(self._apply_colors)
        self.theme.apply()
        touch.tooltips_as_whats_this(self)
        touch.enable_drag_scrolling(self)
        self.set_touch(str(self.settings.value("view/touch", "auto")))
        keyboard = QGuiApplication.inputMethod()
        keyboard.keyboardRectangleChanged.connect(lambda: self.avoid_keyboard())
        self.display_timer = QTimer(self)
        self.display_timer.setInterval(1000 // DISPLAY_HZ)
        self.display_timer.timeout.connect(self.presenter.core.tick)
        self.display_timer.start()
        self.presenter.core.load_model(model_path or self.settings.value("model/last") or None)
        if self.store.problems:   # (damaged take files set aside on loading: said once, kept)
            self.show_status("takes: " + "; ".join(self.store.problems))

    info = property(lambda self: self.session.info)

    # ---- layout ------------------------------------------------------------------------------
    def _build(self) -> None:
        root = QWidget()
        self.setCentralWidget(root)
        self.outer = QVBoxLayout(root)
        self.outer.setContentsMargins(4, 4, 4, 4)
        self.banner = ErrorBanner()
        self.banner_text = self.banner.text
        self.outer.addWidget(self.banner)

        self.backend = BackendPanel(self.settings, self.audio.devices(), self.audio.reason)
        self.outer.addWidget(self.backend)
        self.transport = TransportBar()
        self.generate_button = self.transport.generate_button
        self.stop_button = self.transport.stop_button
        self.outer.addWidget(self.transport)
        self._build_compose()
        live = self._build_live()

        self.takes = TakesPanel(self.settings, self.store)
        self.compare = ComparePanel(self.settings)
        self.library = VoiceLibraryPanel(self.settings, self.voices)
        self.script = ScriptPanel(self.settings)
        rules = self.store.folder.parent / "pronunciation.csv"
        self.pronunciation = LexiconPanel(self.settings, rules)
        pages = [("Takes", self.takes), ("Compare placements", self.compare),
                 ("Voices", self.library), ("Script", self.script)]
        self.workspace = Workspace(self.compose, live, pages)
        # dialogs, not pages: used now and then, and a fifth tab does not fit a 1280-wide touch
        # screen; not modal: the operator keeps working while it serves or a model downloads
        self.pronunciation_dialog = self._dialog_of(self.pronunciation, "Pronunciation rules",
                                                    (640, 420))
        self.serve = ServePanel(self.settings, self.voices.folder)
        self.serve_dialog = self._dialog_of(self.serve, "Serve this model", (720, 480))
        self.models = ModelsPanel(self.settings)
        self.models_dialog = self._dialog_of(self.models, "Get models", (760, 440))
        self.book = BookPanel(self.settings)
        self.book_dialog = self._dialog_of(self.book, "Speak a book", (760, 640))
        self.outer.addWidget(self.workspace, 1)
        # the panels, listed once: settings restored at start and saved on close, the model given
        # to each
        self.panels = (self.backend, self.voice, self.sampling, self.latency, self.takes,
                       self.compare, self.library, self.script, self.pronunciation, self.serve,
                       self.book)

        self.no_output = QLabel("")
        self.statusBar().addPermanentWidget(self.no_output)
        if not self.backend.has_output:   # stays visible: playback is off for the whole session
            self.no_output.setText(self.audio.reason
                                   or "no audio output: playback is off, export still works")
            self.sampling.play_live.setChecked(False)
            self.sampling.play_live.setEnabled(False)
        self.setAcceptDrops(True)
        self.resize(1280, 800)

    def _build_compose(self) -> None:
        """The compose column: voice, text, the text's plan and sampling, in a scroll area."""
        compose = QWidget()
        lv = QVBoxLayout(compose)
        lv.setContentsMargins(0, 0, 0, 0)
        self.voice = VoicePanel(self.settings, self.voices)
        lv.addWidget(self.voice)
        self.text = QPlainTextEdit("Hello from Kazeia, the local speech workbench.")
        self.text.setMinimumHeight(80)
        lv.addWidget(self.text, 1)
        # markup shown, errors where they are, chunks to come
        self.text_plan = TextPlanLabel(self.text)
        lv.addWidget(self.text_plan)
        self.sampling = SamplingPanel(self.settings)
        lv.addWidget(self.sampling)
        self.compose = QScrollArea()   # everything reachable on a 768-pixel-high screen
        self.compose.setObjectName("compose")
        self.compose.setWidget(compose)
        self.compose.setWidgetResizable(True)
        self.compose.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        # never narrower than what it holds: with no horizontal scroll bar, narrower would cut it
        scroll_bar = self.compose.verticalScrollBar().sizeHint().width()
        self.compose.setMinimumWidth(compose.minimumSizeHint().width() + scroll_bar + 4)

    def _build_live(self) -> QWidget:
        """The live take's views: latencies and the waveform."""
        live = QWidget()
        cv = QVBoxLayout(live)
        cv.setContentsMargins(0, 0, 0, 0)
        self.latency = LatencyPanel(self.settings)
        self.take_view = TakeView()
        cv.addWidget(self.latency, 1)
        cv.addWidget(self.take_view, 1)
        live.setMinimumWidth(300)
        return live

    def _dialog_of(self, panel, title: str, size: tuple[int, int]) -> QDialog:
        dialog = QDialog(self)
        dialog.setWindowTitle(title)
        QVBoxLayout(dialog).addWidget(panel)
        dialog.resize(*size)
        return dialog

    def _connect(self) -> None:
        b = self.backend
        b.open_requested.connect(lambda: choose_model(self))
        b.device_changed.connect(self.audio.set_device)
        b.volume_changed.connect(self.audio.set_volume)
        b.modes_button.clicked.connect(self.show_modes_help)
        for panel in (self.takes, self.library):
            panel.error.connect(self.show_error)
        self.takes.status.connect(lambda message: self.show_status(message, 5000))
        self.library.status.connect(lambda message: self.show_status(message, 5000))
        self.library.profiles_changed.connect(
            lambda name: self.voice.refresh_profiles(select=name or None))
        self._text_save = QTimer(self)   # the text is saved a second after typing stops
        self._text_save.setSingleShot(True)
        self._text_save.setInterval(1000)
        self._text_save.timeout.connect(lambda: self.settings.setValue("text/current",
                                                                       self.text.toPlainText()))
        self.text.textChanged.connect(self._text_save.start)

    # ---- theme, touch, the on-screen keyboard ----------------------------------------------
    def set_theme(self, choice: str) -> None:
        self.theme.set_choice(choice)
        self.settings.setValue("view/theme", choice)

    def _apply_colors(self, colors) -> None:
        for view in (self.banner, self.text_plan, self.latency, self.take_view):
            view.apply_colors(colors)
        # a style sheet keeps the palette its widgets were polished with: polish them again
        if self.touch:
            touch.set_touch_style(self, False)
            touch.set_touch_style(self, True)

    def set_touch(self, choice: str) -> None:
        """auto (a touch screen is present), on or off: hit targets and rows for a finger."""
        if choice not in touch.CHOICES:   # (a settings file edited by hand)
            choices = ", ".join(touch.CHOICES)
            self.show_status(f"touch setting {choice!r} is not one of {choices}: auto", 5000)
            choice = "auto"
        self.touch = touch.touch_wanted(choice)
        self.settings.setValue("view/touch", choice)
        touch.set_touch_style(self, self.touch)

    def avoid_keyboard(self, rect=None) -> int:
        """Lifts the window's content above the on-screen keyboard, the text cursor kept in view."""
        return touch.lift_above_keyboard(self, self.outer, self.compose, self.text, rect)

    # ---- messages and dialogs ----------------------------------------------------------------
    def show_status(self, message: str, timeout_ms: int = 0) -> None:
        self.session.note(message)
        logging.info(message)
        self.statusBar().showMessage(message, timeout_ms)

    def show_error(self, message: str) -> None:
        """The banner until the next success; the status bar keeps the history."""
        self.banner.show_message(message)
        self.show_status(f"error: {message}")
        self.error_shown.emit(message)

    def clear_error(self) -> None:
        self.banner.clear()

    def info_box(self, title: str, text: str) -> None:
        box = QMessageBox(QMessageBox.Information, title, text, QMessageBox.Close, self)
        box.setTextInteractionFlags(Qt.TextSelectableByMouse)
        box.open()

    def show_models(self) -> None:
        self.models.refresh()
        self.models_dialog.show()
        self.models_dialog.raise_()

    def show_modes_help(self) -> None:
        self.info_box("What the placement modes mean", modes_help())

    # ---- drag and drop, closing --------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        open_dropped(self, event.mimeData().urls())

    def save_settings(self) -> None:
        for panel in self.panels:
            panel.save_settings()
        self.settings.setValue("text/current", self.text.toPlainText())
        self.settings.sync()

    def closeEvent(self, event) -> None:
        self.save_settings()
        self.audio.stop()
        self.controller.shutdown()   # (a download is cancelled: nothing half-written is registered)
        super().closeEvent(event)
