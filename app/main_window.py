"""The workbench window: chrome and composition only. It places the panels (backend bar, transport,
and the workspace, wide or narrow), makes the menus and shortcuts from the commands table, shows
errors in a banner, follows the theme and touch settings, and joins the panels to the engine's
controller: generate / stop / compare, playback and A/B (the window owns the audio output).

While a take runs the GUI thread only copies each chunk (audio into the output and the take view)
and redraws on a display timer, drawing only what is new: the engine's latencies are not paid for
by the window that shows them."""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QGuiApplication, QIcon, QKeySequence, QShortcut
from PySide6.QtWidgets import (QDialog, QFileDialog, QFrame, QHBoxLayout, QInputDialog, QLabel, QMainWindow, QMenu,
                               QMessageBox, QPlainTextEdit, QScrollArea, QToolButton, QVBoxLayout, QWidget)

from kazeia.engine.gguf_file import FILE_TYPES
from kazeia.engine.placement import silent_cpu_stages
from kazeia.resources import icon_path

from . import theme, touch
from .actions import COMMANDS, shortcut_lines
from .audio_output import AudioOutput
from .comparison import PlacementComparison, difference_text
from .controller import EngineController
from .panels.backend import BackendPanel, modes_help
from .panels.base import wrapping_label
from .panels.compare import ComparePanel
from .panels.lexicon import LexiconPanel
from .panels.models import ModelsPanel
from .panels.serve import ServePanel
from .panels.latency import LatencyPanel
from .panels.sampling import SamplingPanel
from .panels.script import ScriptPanel
from .panels.takes import TakesPanel
from .panels.transport import TransportBar
from .panels.voice import VoicePanel
from .panels.voice_library import VoiceLibraryPanel
from .live_take import LiveTake
from .playback import Playback
from .plots import TakeView
from .take_request import TakeRequest
from .takes import Take, TakeStore
from .text_markup import TextPlanLabel
from .voices import AUDIO_SUFFIXES, VoiceLibrary
from .workspace import Workspace

DISPLAY_HZ = 8   # display ticks: the latency view and the take view take turns (4 redraws a second each)
CONVERT_TYPES_NOTE = ("q8_0 (default): half the bytes per frame of f16, so about twice the speed, with quality "
                      "the bench measures as close to f32; f16/bf16: larger and slower; f32: the reference's numbers.")


class MainWindow(QMainWindow):
    # what the window has done with an outcome (observers, tests): after its own handling
    model_loaded = Signal(object)     # ModelInfo
    take_finished = Signal(object)    # the engine's Result (the take is kept by now)
    voice_created = Signal(str)
    preview_played = Signal(object)   # audio
    script_finished = Signal(object)  # RenderSummary
    error_shown = Signal(str)

    def __init__(self, model_path: str | None = None, settings: QSettings | None = None,
                 audio: AudioOutput | None = None, store: TakeStore | None = None):
        super().__init__()
        self.setWindowTitle("Kazeia workbench")
        self.setWindowIcon(QIcon(str(icon_path())))
        self.settings = settings or QSettings("Kazeia", "Workbench")
        self.audio = audio or AudioOutput()
        self.store = store or TakeStore()
        self.voices = VoiceLibrary(self.store.folder.parent)
        self.info = None
        self._comparison: PlacementComparison | None = None   # a running placement comparison
        self.messages: list[str] = []        # status history (Help > Messages)
        self.applied = None                  # placement and threads the engine has now (from the worker)
        self.playback = Playback(self.audio, self.store, lambda: self.backend.has_output)
        self.theme = theme.Theme(str(self.settings.value("view/theme", "auto")))
        self.touch = False
        self._build()
        self.live = LiveTake(self.latency, self.take_view, self.audio)
        self.controller = EngineController(self)   # after the widgets: its thread must not outlive a failed build
        self._connect()
        self._menus()
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
        QGuiApplication.inputMethod().keyboardRectangleChanged.connect(lambda: self.avoid_keyboard())
        self.display_timer = QTimer(self)
        self.display_timer.setInterval(1000 // DISPLAY_HZ)
        self.display_timer.timeout.connect(self._display_tick)
        self.display_timer.start()
        self.load_model(model_path or self.settings.value("model/last") or None)

    # ---- layout ------------------------------------------------------------------------------
    def _build(self) -> None:
        root = QWidget()
        self.setCentralWidget(root)
        self.outer = QVBoxLayout(root)
        self.outer.setContentsMargins(4, 4, 4, 4)
        self.banner = QFrame()
        self.banner.setObjectName("banner")
        row = QHBoxLayout(self.banner)
        row.setContentsMargins(6, 2, 6, 2)
        self.banner_text = wrapping_label()
        close = QToolButton()
        close.setText("x")
        close.setToolTip("hide this message (Help > Messages keeps it)")
        close.clicked.connect(self.clear_error)
        row.addWidget(self.banner_text, 1)
        row.addWidget(close)
        self.banner.hide()
        self.outer.addWidget(self.banner)

        self.backend = BackendPanel(self.settings, self.audio.devices(), self.audio.reason)
        self.outer.addWidget(self.backend)
        self.transport = TransportBar()
        self.generate_button, self.stop_button = self.transport.generate_button, self.transport.stop_button
        self.outer.addWidget(self.transport)

        compose = QWidget()
        lv = QVBoxLayout(compose)
        lv.setContentsMargins(0, 0, 0, 0)
        self.voice = VoicePanel(self.settings, self.voices)
        lv.addWidget(self.voice)
        self.text = QPlainTextEdit("Hello from Kazeia, the local speech workbench.")
        self.text.setMinimumHeight(80)
        lv.addWidget(self.text, 1)
        self.text_plan = TextPlanLabel(self.text)   # markup shown, errors where they are, chunks to come
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

        live = QWidget()
        cv = QVBoxLayout(live)
        cv.setContentsMargins(0, 0, 0, 0)
        self.latency = LatencyPanel(self.settings)
        self.take_view = TakeView()
        cv.addWidget(self.latency, 1)
        cv.addWidget(self.take_view, 1)
        live.setMinimumWidth(300)

        self.takes = TakesPanel(self.settings, self.store)
        self.compare = ComparePanel(self.settings)
        self.library = VoiceLibraryPanel(self.settings, self.voices)
        self.script = ScriptPanel(self.settings)
        self.pronunciation = LexiconPanel(self.settings, self.store.folder.parent / "pronunciation.csv")
        self.workspace = Workspace(self.compose, live, [("Takes", self.takes), ("Compare placements", self.compare),
                                                        ("Voices", self.library), ("Script", self.script)])
        # (a dialog, not a page: used now and then, and a fifth tab does not fit a 1280-wide touch screen)
        self.pronunciation_dialog = QDialog(self)
        self.pronunciation_dialog.setWindowTitle("Pronunciation rules")
        QVBoxLayout(self.pronunciation_dialog).addWidget(self.pronunciation)
        self.pronunciation_dialog.resize(640, 420)
        self.serve = ServePanel(self.settings, self.voices.folder)
        self.serve_dialog = QDialog(self)   # (not modal: the operator keeps working while it serves)
        self.serve_dialog.setWindowTitle("Serve this model")
        QVBoxLayout(self.serve_dialog).addWidget(self.serve)
        self.serve_dialog.resize(720, 480)
        self.models = ModelsPanel(self.settings)
        self.models_dialog = QDialog(self)   # (not modal: takes go on while a model downloads)
        self.models_dialog.setWindowTitle("Get models")
        QVBoxLayout(self.models_dialog).addWidget(self.models)
        self.models_dialog.resize(760, 440)
        self.outer.addWidget(self.workspace, 1)
        # the panels, listed once: settings restored at start and saved on close, the model given to each
        self.panels = (self.backend, self.voice, self.sampling, self.latency, self.takes, self.compare, self.library,
                       self.script, self.pronunciation, self.serve)

        self.no_output = QLabel("")
        self.statusBar().addPermanentWidget(self.no_output)
        if not self.backend.has_output:   # stays visible: playback is off for the whole session
            self.no_output.setText(self.audio.reason or "no audio output: playback is off, export still works")
            self.sampling.play_live.setChecked(False)
            self.sampling.play_live.setEnabled(False)
        self.setAcceptDrops(True)
        self.resize(1280, 800)

    def _connect(self) -> None:
        b = self.backend
        b.open_requested.connect(self._open_dialog)
        b.placement_changed.connect(self._placement_changed)
        b.threads_changed.connect(self._threads_changed)
        b.device_changed.connect(self.audio.set_device)
        b.volume_changed.connect(self.audio.set_volume)
        b.modes_button.clicked.connect(self.show_modes_help)
        tr = self.transport
        tr.generate_button.clicked.connect(lambda: self.generate())
        tr.stop_button.clicked.connect(self.stop)
        tr.play_button.clicked.connect(self.toggle_play)
        self.playback.status.connect(lambda message: self.show_status(message, 5000))
        self.playback.error.connect(self.show_error)
        tr.ab_button.clicked.connect(self.ab_or_switch)
        self.take_view.seek_requested.connect(self.seek)
        t = self.takes
        t.selection_changed.connect(self._show_selected)
        t.play_requested.connect(self.playback.play_take)
        t.ab_requested.connect(self.start_ab)
        t.restore_requested.connect(self.restore_take)
        t.redo_chunk_requested.connect(self.redo_chunk)
        t.removing.connect(lambda take: self.playback.playing is take and self.playback.stop())
        t.status.connect(lambda message: self.show_status(message, 5000))
        t.error.connect(self.show_error)
        self.compare.compare_requested.connect(self.compare_placements)
        self.compare.listen_requested.connect(self.listen_comparison)
        lib = self.library
        lib.create_requested.connect(lambda path, transcript: self.add_voice(path, transcript=transcript))
        lib.preview_requested.connect(self.preview_voice)
        lib.profiles_changed.connect(lambda name: self.voice.refresh_profiles(select=name or None))
        lib.error.connect(self.show_error)
        s = self.script
        s.render_requested.connect(self.render_script)
        s.stop_requested.connect(self.controller.cancel)
        s.play_requested.connect(self.playback.play_file)
        self.models.open_requested.connect(lambda path: self.load_model(path))
        self._text_save = QTimer(self)   # the text is saved a second after typing stops
        self._text_save.setSingleShot(True)
        self._text_save.setInterval(1000)
        self._text_save.timeout.connect(lambda: self.settings.setValue("text/current", self.text.toPlainText()))
        self.text.textChanged.connect(self._text_save.start)

    def _commands(self) -> dict:
        return {"open": self._open_dialog, "open_demo": lambda: self.load_model(None),
                "export": lambda: self.takes.export_selected(), "quit": self.close, "generate": lambda: self.generate(),
                "stop": self.stop, "play": self.toggle_play, "ab": self.start_ab, "switch_ab": self.playback.switch_ab,
                "compare": self.compare_current, "restore": lambda: self.restore_take(self.takes.current()),
                "rename": self.takes.rename_current, "delete": self.takes.delete_selected,
                "new_voice": self.library.new_from_audio,
                "show_voices": lambda: self.workspace.show_page(self.library), "shortcuts": self.show_shortcuts,
                "pronunciation": self.pronunciation_dialog.show, "serve": self.serve_dialog.show,
                "get_models": self.show_models,
                "modes": self.show_modes_help, "messages": self.show_messages}

    def _menus(self) -> None:
        slots, menus = self._commands(), {}
        for command in COMMANDS:
            keys = [QKeySequence(k) for k in command.keys]
            if command.scope == "takes":   # (Space must still type a space in the text)
                for key in keys:
                    QShortcut(key, self.takes.table, slots[command.id], context=Qt.WidgetShortcut)
            if not command.menu:
                for key in keys:
                    QShortcut(key, self, slots[command.id])
                continue
            if command.menu not in menus:
                menus[command.menu] = self.menuBar().addMenu(command.menu)
            action = QAction(command.text, self)
            if command.scope == "window":
                action.setShortcuts(keys)
            elif keys:
                action.setText(f"{command.text}\t{command.keys[0]}")
            action.triggered.connect(slots[command.id])
            menus[command.menu].addAction(action)
        self.menuBar().insertMenu(menus["&Help"].menuAction(), self._view_menu())

    def _view_menu(self) -> QMenu:
        """Theme and touch, each auto (what the system says) or forced."""
        menu = QMenu("&View", self)
        for title, choices, current, apply in (
                ("Theme", theme.CHOICES, self.theme.choice, self.set_theme),
                ("Touch", touch.CHOICES, str(self.settings.value("view/touch", "auto")), self.set_touch)):
            sub = menu.addMenu(title)
            group = QActionGroup(sub)
            for choice in choices:
                action = sub.addAction(choice)
                action.setCheckable(True)
                action.setChecked(choice == current)
                action.triggered.connect(lambda _=False, c=choice, f=apply: f(c))
                group.addAction(action)
        return menu

    # ---- theme, touch, the on-screen keyboard ----------------------------------------------
    def set_theme(self, choice: str) -> None:
        self.theme.set_choice(choice)
        self.settings.setValue("view/theme", choice)

    def _apply_colors(self, colors) -> None:
        self.banner.setStyleSheet(f"#banner {{ background: {colors.error_background}; "
                                  f"border: 1px solid {colors.error}; }}")
        self.banner_text.setStyleSheet(f"color: {colors.error};")
        self.text_plan.apply_colors(colors)
        self.latency.apply_colors(colors)
        self.take_view.apply_colors(colors)
        if self.touch:   # a style sheet keeps the palette its widgets were polished with: polish them again
            touch.set_touch_style(self, False)
            touch.set_touch_style(self, True)

    def set_touch(self, choice: str) -> None:
        """auto (a touch screen is present), on or off: hit targets and rows for a finger."""
        if choice not in touch.CHOICES:   # (a settings file edited by hand)
            self.show_status(f"touch setting {choice!r} is not one of {', '.join(touch.CHOICES)}: auto", 5000)
            choice = "auto"
        self.touch = touch.touch_wanted(choice)
        self.settings.setValue("view/touch", choice)
        touch.set_touch_style(self, self.touch)

    def avoid_keyboard(self, rect=None) -> int:
        """Lifts the window's content above the on-screen keyboard, the text cursor kept in view."""
        covered = touch.keyboard_overlap(self, rect)
        margins = self.outer.contentsMargins()
        self.outer.setContentsMargins(margins.left(), margins.top(), margins.right(), 4 + covered)
        if covered:
            self.outer.activate()
            self.text.ensureCursorVisible()
            focus = QGuiApplication.focusObject()
            if isinstance(focus, QWidget) and self.compose.isAncestorOf(focus):
                self.compose.ensureWidgetVisible(focus)
        return covered

    # ---- messages ----------------------------------------------------------------------------
    def show_status(self, message: str, timeout_ms: int = 0) -> None:
        self.messages.append(f"{time.strftime('%H:%M:%S')}  {message}")
        logging.info(message)
        self.statusBar().showMessage(message, timeout_ms)

    def show_error(self, message: str) -> None:
        """A visible banner until the next success; the status bar keeps the history."""
        self.banner_text.setText(message)
        self.banner.show()
        self.show_status(f"error: {message}")
        self.error_shown.emit(message)

    def clear_error(self) -> None:
        self.banner.hide()
        self.banner_text.setText("")

    def _info_box(self, title: str, text: str) -> None:
        box = QMessageBox(QMessageBox.Information, title, text, QMessageBox.Close, self)
        box.setTextInteractionFlags(Qt.TextSelectableByMouse)
        box.open()

    def show_models(self) -> None:
        self.models.refresh()
        self.models_dialog.show()
        self.models_dialog.raise_()

    def show_shortcuts(self) -> None:
        self._info_box("Shortcuts", "\n".join(shortcut_lines()))

    def show_modes_help(self) -> None:
        self._info_box("What the placement modes mean", modes_help())

    def show_messages(self) -> None:
        self._info_box("Messages", "\n".join(self.messages[-40:]) or "no messages yet")

    # ---- model -------------------------------------------------------------------------------
    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open model", "", "GGUF models (*.gguf);;All files (*)")
        if not path:
            path = QFileDialog.getExistingDirectory(self, "Or a Hugging Face checkpoint folder")
        if path:
            self.open_path(path)

    def open_path(self, path: str) -> None:
        """A GGUF file, or a Hugging Face folder (asks which weight type to convert it to)."""
        out_type = "q8_0"
        if Path(path).is_dir():
            types = ["q8_0", *[t for t in FILE_TYPES if t != "q8_0"]]
            out_type, ok = QInputDialog.getItem(self, "Convert the checkpoint", "weight type (converted once, "
                                                "then cached):\n" + CONVERT_TYPES_NOTE, types, 0, False)
            if not ok:
                return
        self.load_model(path, out_type)

    def load_model(self, path: str | None, out_type: str = "q8_0") -> None:
        self.generate_button.setEnabled(False)
        job = self.controller.load_model(path, self.backend.threads.value(), self.backend.current_placement(), out_type)
        job.finished.connect(self._on_loaded)
        job.failed.connect(self._on_load_failed)
        job.status.connect(self.show_status)
        job.progress.connect(self._on_conversion)
        self.controller.submit(job)

    def _on_load_failed(self, message: str) -> None:
        self.backend.conversion.hide()
        self.generate_button.setEnabled(self.info is not None)
        self.show_error(message)

    def _on_conversion(self, progress: tuple) -> None:
        done, total = progress
        bar = self.backend.conversion
        bar.setVisible(done < total)
        bar.setRange(0, max(total, 1))
        bar.setValue(done)

    def _on_loaded(self, engine) -> None:
        info = engine.info
        self.backend.conversion.hide()
        self.clear_error()
        self.info = info
        self.settings.setValue("model/last", str(info.path))
        for panel in self.panels:
            panel.set_model(info)
        self.text_plan.set_model([sp.name for sp in info.speakers], info.languages)
        self.serve.set_engine(engine)
        if info.variant == "base":
            self.sampling.streaming_text.setChecked(True)
        self.generate_button.setEnabled(True)
        self.show_status(f"loaded {info.path.name}", 5000)
        self.model_loaded.emit(info)

    def _apply(self, placement=None, threads=None) -> None:
        job = self.controller.apply(placement=placement, threads=threads)
        if job is not None:
            job.finished.connect(self._on_applied)
            job.failed.connect(self.show_error)
            self.controller.submit(job)

    def _placement_changed(self, placement: dict) -> None:
        self._apply(placement=placement)
        self.show_status("placement applies to the next take" if self.controller.busy else
                         "placement set", 4000)

    def _threads_changed(self, threads: int) -> None:
        self._apply(threads=threads)
        self.show_status(f"{threads} threads from the next take", 4000)

    def _on_applied(self, ran) -> None:
        self.applied = ran   # what the engine has now (tests and the title bar read it)

    # ---- generation --------------------------------------------------------------------------
    def job(self) -> TakeRequest:
        """The request for a take from the panels (raises ValueError with a message for the banner)."""
        voice = self.voice.request()
        profile = voice.pop("voice_profile")
        return TakeRequest(self.text.toPlainText(), self.sampling.params(self.info), self.backend.current_placement(),
                           self.backend.threads.value(), **voice, streaming_text=self.sampling.streaming_text.isChecked(),
                           voice_profile=str(self.voices.path(profile)) if profile else None,
                           voice_profile_name=profile, lexicon=self.pronunciation.lexicon)

    def generate(self, job: dict | None = None, tag: dict | None = None):
        """Starts a take from the panels (or `job`); returns its Job, or None with the reason shown."""
        if self.info is None:
            return None
        if self.controller.rendering:
            self.show_status("a script is rendering: takes wait until it ends or is stopped (Script tab)", 5000)
            return None
        if self.controller.busy:
            self.show_status("a take is running: stop it first (Esc)", 4000)
            return None
        try:
            job = job or self.job()
        except ValueError as e:
            self.show_error(str(e))
            return None
        take = self.controller.generate(replace(job, tag=tag or {}))
        if take is None:
            return None
        self.playback.stop()
        play_live = self.sampling.play_live.isChecked() and self.backend.has_output
        frames = job.sampling.max_frames or 8191
        why = self.live.begin(Take.for_request(job, str(self.info.path), self.info.sample_rate), play_live,
                              frames * self.info.hparams["decoder"]["samples_per_frame"])
        if why:
            self.show_status(why, 5000)
        take.started.connect(self._on_started)
        take.progress.connect(self._on_chunk)
        take.finished.connect(self._on_finished)
        take.failed.connect(self._on_take_failed)
        if self.workspace.arrangement == "narrow" and not tag:
            self.workspace.show_page(self.workspace.live)
        self.generate_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        return self.controller.submit(take)

    def render_script(self, request: dict):
        """Renders a script on the worker; returns its Job, or None with the reason shown."""
        if self.controller.busy:
            self.show_status("a take is running: the script renders after it (stop it with Esc)", 5000)
            return None
        job = self.controller.render_script(request)
        if job is None:
            self.show_status("no model is loaded" if self.info is None else "a script is already rendering", 5000)
            return None
        job.progress.connect(self._on_script_line)
        job.finished.connect(self._on_script_finished)
        job.failed.connect(self._on_script_failed)
        self.script.set_rendering(True)
        self.generate_button.setEnabled(False)
        return self.controller.submit(job)

    def _on_script_line(self, line: tuple) -> None:
        entry, summary = line
        self.script.show_entry(entry)
        self.script.show_progress(summary)

    def _on_script_finished(self, summary) -> None:
        self.script.set_rendering(False)
        self.script.show_progress(summary)
        self.script.refresh_statuses()
        self.generate_button.setEnabled(self.info is not None)
        self.script_finished.emit(summary)

    def _on_script_failed(self, message: str) -> None:
        self.script.set_rendering(False)
        self.generate_button.setEnabled(self.info is not None)
        self.show_error(message)

    def stop(self) -> None:
        if self.controller.rendering:   # Esc stops a script render too
            self.controller.cancel()
            return
        if self.controller.busy:
            self._comparison = None   # a stopped comparison does not go on to B
            self.controller.cancel()
        else:
            self.playback.stop()

    def _on_started(self, ran) -> None:
        self.live.started(ran)

    def _on_chunk(self, chunk) -> None:
        self.live.chunk(chunk)

    def _display_tick(self) -> None:
        self.live.tick()
        if self.audio.playing:
            self.take_view.set_playhead(self.audio.position)
            self.backend.meter.show_level(self.audio.meter()[0], self.audio.level.limited_db)
        elif self.backend.meter.value() > -60:
            self.backend.meter.show_level(-90.0, 0.0)

    def _on_finished(self, outcome) -> None:
        result, ran = outcome.result, outcome.ran
        self.generate_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        take = self.live.finish(outcome)
        if take is None:
            return
        t = result.timings
        self.clear_error()
        if t.frames:
            try:
                self.store.add(take)
            except OSError as e:
                self.show_error(f"could not save the take: {e}")
            self.takes.refresh(select=take)
        self.latency.show_take(take)
        self.latency.show_where(take.where, silent_cpu_stages(result.placement_report))
        chunks = f" in {len(take.chunks)} chunks" if take.chunks else ""
        self.show_status(f"done: {t.frames} frames{chunks}, stopped by {result.stop_reason}", 5000)
        if self._comparison is not None and self._comparison.owns(ran.tag):
            self._compare_step(take, result, ran.tag)
        self.take_finished.emit(result)

    def _on_take_failed(self, message: str) -> None:
        self.generate_button.setEnabled(self.info is not None)
        self.stop_button.setEnabled(False)
        self.live.fail()
        self._comparison = None
        self.show_error(message)

    # ---- placement comparison ----------------------------------------------------------------
    def compare_current(self) -> None:
        self.compare_placements(self.compare.placement("A"), self.compare.placement("B"))

    def compare_placements(self, a: dict, b: dict):
        """Renders the current request on placement A, then on B (same text, voice and seed)."""
        if self.info is None or self.controller.busy:
            return None
        try:
            request = self.job()
        except ValueError as e:
            self.show_error(str(e))
            return None
        self._comparison = PlacementComparison(request, a, b)
        self.workspace.show_page(self.compare)
        self.compare.show_progress("rendering A ...")
        return self.generate(*self._comparison.first())

    def _compare_step(self, take: Take, result, tag: dict) -> None:
        step = self._comparison.step(take, result, tag)
        if step[0] == "B":
            self.compare.show_progress("rendering B ...")
            self.generate(step[1], tag=step[2])
            return
        _, (a, b), difference = step
        self.store.save()
        self._comparison = None
        self.playback.ab_pair = (a, b)
        self.compare.show_pair(a, b)
        self.show_status(f"compared: {difference_text(difference)}", 8000)

    def listen_comparison(self) -> None:
        if self.playback.ab_pair is not None:
            self._play_ab(*self.playback.ab_pair)

    # ---- takes -------------------------------------------------------------------------------
    def _show_selected(self, take) -> None:
        self.takes.show_details(take)
        if take is None or self.live.running:   # a running take keeps the live view
            return
        if self.take_view.shown != take.id:
            self.take_view.show_audio(self.store.audio(take), take.sample_rate)
            self.take_view.shown = take.id
        self.latency.show_take(take)

    def toggle_play(self) -> None:
        self.playback.toggle(self.takes.current())

    def seek(self, seconds: float) -> None:
        """Click on the waveform: play the shown take from there."""
        take = self.takes.current()
        if take is not None:
            self.playback.play_take(take, start=int(seconds * take.sample_rate))

    def start_ab(self) -> None:
        takes = self.takes.selected()
        if len(takes) != 2:
            self.show_status("select exactly two takes for A/B", 4000)
            return
        self._play_ab(*takes)

    def _play_ab(self, a: Take, b: Take) -> None:
        self.playback.match_loudness = self.takes.match_loudness.isChecked()
        self.takes.ab_label.setText(self.playback.start_ab(a, b))

    def ab_or_switch(self) -> None:
        """The A/B button: switches while an A/B pair plays, else starts one with the two selected."""
        if self.playback.pair_playing():
            self.playback.switch_ab()
        else:
            self.start_ab()

    def restore_take(self, take: Take | None) -> None:
        if take is None:
            return
        self.text.setPlainText(take.text)
        self.voice.restore_request(take.request)
        self.sampling.streaming_text.setChecked(bool(take.request.get("streaming_text")))
        self.sampling.restore_params(take.sampling)
        self.backend.set_placement(take.placement)
        self.show_status(f"settings restored from {take.label}", 4000)

    def redo_chunk(self, take: Take, index: int, seed: int | None = None):
        """A long take again with chunk `index` given a new seed: its settings go back into the
        panels and the take is made again; every other chunk comes out exactly as it was (a chunk's
        audio depends on its own seed only), so the two takes A/B on that chunk alone."""
        import random
        if not take.chunks or not 0 <= index < len(take.chunks):
            self.show_error(f"{take.label} has no chunk {index + 1}")
            return None
        self.restore_take(take)
        seeds = {int(k): v for k, v in take.request.get("chunk_seeds", {}).items()}
        seeds[index] = random.randrange(2 ** 31) if seed is None else seed
        try:
            job = self.job()
        except ValueError as e:
            self.show_error(str(e))
            return None
        return self.generate(replace(job, chunk_seeds=seeds))

    # ---- voice library -----------------------------------------------------------------------
    def add_voice(self, audio_path: str, name: str | None = None, transcript: str | None = None) -> str | None:
        """Creates a profile on the engine's worker; voice_created or failed follows."""
        if self.info is None or self.info.variant != "base":
            self.show_error("voice profiles need a Base model")
            return None
        name = self.voices.free_name(name or Path(audio_path).stem)
        self.show_status(f"making voice profile {name} ...")
        job = self.controller.create_voice(name, audio_path, transcript, self.voices.path(name))
        job.finished.connect(self._on_voice_created)
        job.failed.connect(self.show_error)
        self.controller.submit(job)
        return name

    def _on_voice_created(self, name: str) -> None:
        self.clear_error()
        self.voice.refresh_profiles(select=name)
        self.library.refresh(select=name)
        self.show_status(f"voice profile {name} created", 4000)
        self.voice_created.emit(name)

    def preview_voice(self, name: str) -> None:
        """A short fixed sentence with the profile, played and not kept."""
        if self.info is None or self.info.variant != "base":
            self.show_error("load a Base model to preview voice profiles")
            return
        self.show_status(f"previewing {name} ...")
        job = self.controller.preview(self.voices.path(name), self.voice.language.currentText())
        job.finished.connect(self._on_preview)
        job.failed.connect(self.show_error)
        self.controller.submit(job)

    def _on_preview(self, audio) -> None:
        self.playback.play_audio(audio)
        self.show_status(f"preview: {len(audio) / self.info.sample_rate:.1f} s", 4000)
        self.preview_played.emit(audio)

    # ---- drag and drop -----------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        urls = event.mimeData().urls()
        if not urls:
            return
        path = urls[0].toLocalFile()
        if Path(path).suffix.lower() in AUDIO_SUFFIXES:
            self.add_voice(path)
        else:
            self.open_path(path)

    # ---- closing -----------------------------------------------------------------------------
    def save_settings(self) -> None:
        for panel in self.panels:
            panel.save_settings()
        self.settings.setValue("text/current", self.text.toPlainText())
        self.settings.sync()

    def closeEvent(self, event) -> None:
        self.models.wait()   # (a download is cancelled: nothing half-written is registered)
        self.serve.stop()
        self.save_settings()
        self.audio.stop()
        self.controller.shutdown()
        super().closeEvent(event)
