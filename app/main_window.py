"""The workbench window: model, voice, sampling and backend controls; generate with live latency
and streaming playback; takes with A/B listening, restore and export."""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout,
                               QInputDialog, QLabel, QLineEdit, QListWidget, QListWidgetItem, QMainWindow,
                               QPlainTextEdit, QProgressBar, QPushButton, QSpinBox, QSplitter, QVBoxLayout, QWidget)

from kazeia.engine import SamplingParams
from kazeia.engine.placement import MODES, STAGES, mode_status, silent_cpu_stages, stage_lines
from kazeia.engine.threads import available_cores

from .audio_output import AudioOutput
from .controller import EngineController
from .export import FORMATS, export_takes
from .loudness import matched_gain
from .takes import Take, TakeStore
from .views import LatencyPlot, WaveformView
from .voices import AUDIO_SUFFIXES, VoiceLibrary


class MainWindow(QMainWindow):
    def __init__(self, model_path: str | None = None, settings: QSettings | None = None,
                 audio: AudioOutput | None = None, store: TakeStore | None = None):
        super().__init__()
        self.setWindowTitle("Kazeia workbench")
        self.settings = settings or QSettings("Kazeia", "Workbench")
        self.audio = audio or AudioOutput()
        self.store = store or TakeStore()
        self.voices = VoiceLibrary(self.store.folder.parent)
        self.info = None
        self.live: Take | None = None          # the take being generated
        self.live_audio: list[np.ndarray] = []
        self._waveform_drawn_at = 0.0   # when the live waveform was last redrawn
        self.playing: Take | None = None
        self.ab_pair: tuple[Take, Take] | None = None
        self._live_playback = False
        self._build()
        self.controller = EngineController(self)   # after the widgets: its thread must not outlive a failed build
        self._connect()
        self._restore_settings()
        self._refresh_takes()
        self.playhead_timer = QTimer(self)
        self.playhead_timer.setInterval(33)   # ~30 Hz
        self.playhead_timer.timeout.connect(self._update_playhead)
        self.playhead_timer.start()
        self.load_model(model_path or self.settings.value("model/last") or None)

    # ---- layout ------------------------------------------------------------------------------
    def _build(self) -> None:
        root = QWidget()
        self.setCentralWidget(root)
        outer = QVBoxLayout(root)

        top = QHBoxLayout()
        self.open_button = QPushButton("Open model...")
        self.model_label = QLabel("no model")
        self.model_label.setObjectName("model_label")
        self.threads = QSpinBox()
        self.threads.setRange(1, max(1, available_cores()))
        self.threads.setValue(available_cores())
        self.placement = {}
        self.conversion = QProgressBar()
        self.conversion.setFormat("converting %p%")
        self.conversion.hide()
        top.addWidget(self.open_button)
        top.addWidget(self.model_label, 1)
        top.addWidget(self.conversion)
        top.addWidget(QLabel("threads"))
        top.addWidget(self.threads)
        status = mode_status()
        for stage in STAGES:
            box = QComboBox()
            for mode in MODES:
                box.addItem(mode)
                item = box.model().item(box.count() - 1)
                item.setToolTip(status[mode].reason)
                if not status[mode].available:
                    item.setEnabled(False)
            box.setToolTip(f"where the {stage.replace('_', ' ')} runs")
            self.placement[stage] = box
            top.addWidget(QLabel(stage.replace("_", " ")))
            top.addWidget(box)
        self.device_box = QComboBox()
        top.addWidget(QLabel("output"))
        top.addWidget(self.device_box)
        outer.addLayout(top)

        split = QSplitter(Qt.Horizontal)
        outer.addWidget(split, 1)

        left = QWidget()
        lv = QVBoxLayout(left)
        voice = QGroupBox("Voice")
        vf = QFormLayout(voice)
        self.speaker = QComboBox()
        self.language = QComboBox()
        self.instruct = QLineEdit()
        self.instruct.setPlaceholderText("describe the voice (VoiceDesign, 1.7B CustomVoice)")
        self.voice_note = QLabel("")
        self.voice_note.setWordWrap(True)
        self.profile = QComboBox()
        self.profile.setToolTip("voice profiles (Base models): drop reference audio on the window to add one")
        profile_buttons = QHBoxLayout()
        self.new_voice_button, self.rename_voice_button, self.delete_voice_button, self.preview_voice_button = (
            QPushButton("New from audio..."), QPushButton("Rename"), QPushButton("Delete"), QPushButton("Preview"))
        for b in (self.new_voice_button, self.rename_voice_button, self.delete_voice_button, self.preview_voice_button):
            profile_buttons.addWidget(b)
        vf.addRow("speaker", self.speaker)
        vf.addRow("language", self.language)
        vf.addRow("instruction", self.instruct)
        vf.addRow("voice profile", self.profile)
        vf.addRow(profile_buttons)
        vf.addRow(self.voice_note)
        lv.addWidget(voice)
        self.text = QPlainTextEdit("Hello from Kazeia, the local speech workbench.")
        lv.addWidget(self.text, 1)
        sampling = QGroupBox("Sampling")
        sf = QFormLayout(sampling)
        self.seed = QSpinBox()
        self.seed.setRange(0, 2 ** 31 - 1)
        self.greedy = QCheckBox("greedy (argmax)")
        self.temperature, self.cp_temperature = self._spin(0.9), self._spin(0.9)
        self.top_p, self.cp_top_p = self._spin(1.0), self._spin(1.0)
        for box in (self.top_p, self.cp_top_p):
            box.setMaximum(1.0)
        self.top_k, self.cp_top_k = QSpinBox(), QSpinBox()
        for box in (self.top_k, self.cp_top_k):
            box.setRange(0, 2048)
            box.setValue(50)
        self.max_frames = QSpinBox()
        self.max_frames.setRange(0, 8191)
        self.max_frames.setSpecialValueText("auto")
        self.streaming_text = QCheckBox("feed text while generating")
        self.play_live = QCheckBox("play while generating")
        self.play_live.setChecked(True)
        for label, w in (("seed", self.seed), ("", self.greedy), ("temperature", self.temperature), ("top-k", self.top_k),
                         ("top-p", self.top_p), ("code predictor temperature", self.cp_temperature),
                         ("code predictor top-k", self.cp_top_k), ("code predictor top-p", self.cp_top_p),
                         ("max frames", self.max_frames),
                         ("", self.streaming_text), ("", self.play_live)):
            sf.addRow(label, w)
        lv.addWidget(sampling)
        buttons = QHBoxLayout()
        self.generate_button = QPushButton("Generate (Ctrl+Enter)")
        self.stop_button = QPushButton("Stop (Esc)")
        self.stop_button.setEnabled(False)
        buttons.addWidget(self.generate_button)
        buttons.addWidget(self.stop_button)
        lv.addLayout(buttons)
        self.progress = QLabel("")
        lv.addWidget(self.progress)
        split.addWidget(left)

        center = QWidget()
        cv = QVBoxLayout(center)
        self.latency = LatencyPlot()
        self.stats = QLabel("")
        self.stats.setObjectName("stats")
        self.waveform = WaveformView()
        # where each stage ran (devices, splits, CPU fallbacks): an accelerator mode never runs
        # silently on the CPU
        self.where = QLabel("")
        self.where.setObjectName("where")
        self.where.setWordWrap(True)
        cv.addWidget(self.latency, 2)
        cv.addWidget(self.stats)
        cv.addWidget(self.where)
        cv.addWidget(self.waveform, 3)
        split.addWidget(center)

        right = QWidget()
        rv = QVBoxLayout(right)
        rv.addWidget(QLabel("Takes"))
        self.take_list = QListWidget()
        self.take_list.setSelectionMode(QListWidget.ExtendedSelection)
        rv.addWidget(self.take_list, 1)
        row = QHBoxLayout()
        self.play_button, self.stop_play_button = QPushButton("Play (Space)"), QPushButton("Stop")
        row.addWidget(self.play_button)
        row.addWidget(self.stop_play_button)
        rv.addLayout(row)
        row = QHBoxLayout()
        self.ab_button = QPushButton("A/B (B)")
        self.ab_button.setToolTip("select two takes, then press B to switch between them while playing")
        self.match_loudness = QCheckBox("match loudness")
        self.match_loudness.setChecked(True)
        row.addWidget(self.ab_button)
        row.addWidget(self.match_loudness)
        rv.addLayout(row)
        self.ab_label = QLabel("")
        self.ab_label.setWordWrap(True)
        rv.addWidget(self.ab_label)
        row = QHBoxLayout()
        self.restore_button, self.rename_button, self.delete_button = (QPushButton("Restore settings"),
                                                                       QPushButton("Rename"), QPushButton("Delete"))
        for b in (self.restore_button, self.rename_button, self.delete_button):
            row.addWidget(b)
        rv.addLayout(row)
        row = QHBoxLayout()
        self.export_format = QComboBox()
        self.export_format.addItems(list(FORMATS))
        self.export_pattern = QLineEdit("{index}_{name}")
        self.export_button = QPushButton("Export selected...")
        row.addWidget(self.export_format)
        row.addWidget(self.export_pattern)
        row.addWidget(self.export_button)
        rv.addLayout(row)
        split.addWidget(right)
        split.setSizes([330, 700, 330])
        self.setAcceptDrops(True)
        self.resize(1400, 820)

    @staticmethod
    def _spin(value: float) -> QDoubleSpinBox:
        box = QDoubleSpinBox()
        box.setRange(0.01, 5.0)
        box.setSingleStep(0.05)
        box.setDecimals(2)
        box.setValue(value)
        return box

    def _connect(self) -> None:
        c = self.controller
        c.loaded.connect(self._on_loaded)
        c.chunk_ready.connect(self._on_chunk)
        c.finished.connect(self._on_finished)
        c.failed.connect(self._on_failed)
        c.status.connect(self.statusBar().showMessage)
        c.conversion.connect(self._on_conversion)
        self.waveform.seek_requested.connect(self.seek)
        self.open_button.clicked.connect(self._open_dialog)
        self.generate_button.clicked.connect(self.generate)
        self.stop_button.clicked.connect(self.stop)
        QShortcut(QKeySequence("Ctrl+Return"), self, self.generate)
        QShortcut(QKeySequence("Ctrl+Enter"), self, self.generate)
        QShortcut(QKeySequence(Qt.Key_Escape), self, self.stop)
        QShortcut(QKeySequence(Qt.Key_Space), self.take_list, self.toggle_play)
        QShortcut(QKeySequence("B"), self, self.switch_ab)
        self.play_button.clicked.connect(self.toggle_play)
        self.stop_play_button.clicked.connect(self.stop_playback)
        self.ab_button.clicked.connect(self.start_ab)
        self.restore_button.clicked.connect(self.restore_take)
        self.rename_button.clicked.connect(self.rename_take)
        self.delete_button.clicked.connect(self.delete_take)
        self.export_button.clicked.connect(self.export_selected)
        self.new_voice_button.clicked.connect(self._new_voice_dialog)
        self.rename_voice_button.clicked.connect(self.rename_voice)
        self.delete_voice_button.clicked.connect(self.delete_voice)
        self.preview_voice_button.clicked.connect(self.preview_voice)
        self.take_list.currentItemChanged.connect(self._show_selected)
        for box in self.placement.values():
            box.currentTextChanged.connect(self._placement_changed)
        self.greedy.toggled.connect(lambda on: [w.setEnabled(not on) for w in (self.temperature, self.top_k, self.top_p,
                                                                               self.cp_temperature, self.cp_top_k,
                                                                               self.cp_top_p)])
        self.device_box.currentIndexChanged.connect(self._device_changed)
        self._fill_devices()

    # ---- model -------------------------------------------------------------------------------
    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open model", "", "GGUF models (*.gguf);;All files (*)")
        if not path:
            path = QFileDialog.getExistingDirectory(self, "Or a Hugging Face checkpoint folder")
        if path:
            self.load_model(path)

    def load_model(self, path: str | None) -> None:
        self.generate_button.setEnabled(False)
        self.controller.load_model(path, self.threads.value(), self.current_placement())

    def _on_conversion(self, done: int, total: int) -> None:
        self.conversion.setVisible(done < total)
        self.conversion.setRange(0, max(total, 1))
        self.conversion.setValue(done)

    def _on_loaded(self, info) -> None:
        self.conversion.hide()
        self.info = info
        self.settings.setValue("model/last", str(info.path))
        label = f"{info.path.name}: {info.variant}, {info.size}, {info.file_type}"
        if info.random_weights:
            label += "   [RANDOM WEIGHTS: produces noise]"
        self.model_label.setText(label)
        self.speaker.clear()
        self.speaker.addItems([s.name for s in info.speakers])
        self.speaker.setEnabled(bool(info.speakers))
        current_language = self.settings.value("voice/language", "auto")
        self.language.clear()
        self.language.addItems(["auto", *info.languages])
        self.language.setCurrentText(current_language)
        spk = self.settings.value("voice/speaker")
        if spk in [s.name for s in info.speakers]:
            self.speaker.setCurrentText(spk)
        wants_instruct = info.variant == "voice_design" or (info.variant == "custom_voice" and info.size != "0b6")
        self.instruct.setEnabled(wants_instruct)
        base = info.variant == "base"
        for w in (self.profile, self.new_voice_button, self.rename_voice_button, self.delete_voice_button,
                  self.preview_voice_button):
            w.setEnabled(base)
        self._refresh_voices()
        self.voice_note.setText("Base models speak with a cloned voice: pick a profile or make one from reference "
                                "audio (a file, or drop it on the window)." if base else "")
        self.streaming_text.setChecked(base)
        self.generate_button.setEnabled(True)
        self.statusBar().showMessage(f"loaded {info.path.name}", 5000)

    def current_placement(self) -> dict:
        return {stage: box.currentText() for stage, box in self.placement.items()}

    def _placement_changed(self) -> None:
        try:
            self.controller.set_placement(self.current_placement())
            self.statusBar().showMessage("placement applies to the next take", 4000)
        except ValueError as e:
            self._on_failed(str(e))

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
            self.load_model(path)

    # ---- voice library (Base models) -------------------------------------------------------------
    def _refresh_voices(self, select: str | None = None) -> None:
        self.profile.clear()
        self.profile.addItems(self.voices.names())
        if select:
            self.profile.setCurrentText(select)

    def _new_voice_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Reference audio", "", "Audio (*.wav *.flac *.ogg *.mp3 *.aiff)")
        if path:
            text, ok = QInputDialog.getText(self, "Transcript", "what the reference says (optional: enables "
                                                                "in-context cloning)")
            self.add_voice(path, transcript=text if ok else None)

    def add_voice(self, audio_path: str, name: str | None = None, transcript: str | None = None) -> str | None:
        if self.controller.engine is None or self.info.variant != "base":
            self._on_failed("voice profiles need a Base model")
            return None
        try:
            created = self.voices.create(name or Path(audio_path).stem, self.controller.engine.model, audio_path,
                                         text=transcript)
        except ValueError as e:
            self._on_failed(str(e))
            return None
        self._refresh_voices(select=created)
        self.statusBar().showMessage(f"voice profile {created} created", 4000)
        return created

    def rename_voice(self) -> None:
        name = self.profile.currentText()
        if not name:
            return
        new, ok = QInputDialog.getText(self, "Rename voice", "name", text=name)
        if ok:
            try:
                self._refresh_voices(select=self.voices.rename(name, new))
            except ValueError as e:
                self._on_failed(str(e))

    def delete_voice(self) -> None:
        if self.profile.currentText():
            self.voices.delete(self.profile.currentText())
            self._refresh_voices()

    def preview_voice(self) -> None:
        self.text.setPlainText(self.text.toPlainText() or "This is how I sound.")
        self.generate()

    # ---- generation --------------------------------------------------------------------------
    def sampling(self) -> SamplingParams:
        s = SamplingParams.from_model(self.info, seed=self.seed.value(), temperature=self.temperature.value(),
                                      top_k=self.top_k.value(), top_p=self.top_p.value(),
                                      cp_temperature=self.cp_temperature.value(), cp_top_k=self.cp_top_k.value(),
                                      cp_top_p=self.cp_top_p.value(),
                                      max_frames=self.max_frames.value() or None)
        return s.greedy() if self.greedy.isChecked() else s

    def request(self) -> dict:
        voice = None
        if self.info is not None and self.info.variant == "base":
            if not self.profile.currentText():
                raise ValueError("pick or create a voice profile for this Base model")
            voice = self.voices.load(self.profile.currentText(), self.controller.engine.model)
        return {"text": self.text.toPlainText(), "speaker": self.speaker.currentText() or None,
                "language": self.language.currentText() or "auto",
                "instruct": self.instruct.text() if self.instruct.isEnabled() and self.instruct.text() else None,
                "voice": voice, "streaming_text": self.streaming_text.isChecked()}

    def generate(self) -> None:
        if self.info is None or self.controller.busy:
            return
        try:
            request = self.request()
        except ValueError as e:
            self._on_failed(str(e))
            return
        sampling = self.sampling()
        recorded = {k: v for k, v in request.items() if k not in ("text", "voice")}
        recorded["voice_profile"] = self.profile.currentText() if request["voice"] is not None else None
        self.live = Take(id=TakeStore.new_id(), created=time.time(), text=request["text"], model=str(self.info.path),
                         request=recorded, sampling=asdict(sampling),
                         placement=self.current_placement(), threads=self.threads.value(), timings={},
                         stop_reason="", sample_rate=self.info.sample_rate)
        self.live_audio = []
        self.stop_playback()
        self._live_playback = self.play_live.isChecked() and self.audio.available
        if self._live_playback:
            try:
                frames = sampling.max_frames or 8191
                self.audio.begin_stream(frames * 1920)
            except Exception as e:
                self._live_playback = False
                self.statusBar().showMessage(str(e), 5000)
        if not self.controller.generate({**request, "sampling": sampling}):
            return
        self.generate_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.progress.setText("starting ...")

    def stop(self) -> None:
        if self.controller.busy:
            self.controller.cancel()
        else:
            self.stop_playback()

    def _on_chunk(self, chunk) -> None:
        self.live_audio.append(chunk.audio)
        if self._live_playback:
            self.audio.append(chunk.audio)
        t = chunk.timings
        elapsed = time.perf_counter() - self.controller.started_at
        self.progress.setText(f"{t.frames} frames ({t.audio_seconds:.2f} s of audio) in {elapsed:.1f} s")
        # chunks come every few frames (the streaming decoder's launches): redraw the bars on each,
        # the waveform and spectrogram (whole take so far) at most twice a second
        self.latency.show_timings(t.talker_ms, t.code_predictor_ms, t.decoder_ms)
        self._show_stats(t)
        if chunk.first_frame == 0 or time.perf_counter() - self._waveform_drawn_at >= 0.5:
            self.waveform.show_audio(np.concatenate(self.live_audio), self.info.sample_rate)
            self._waveform_drawn_at = time.perf_counter()

    def _show_stats(self, t) -> None:
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        prefill = f"{t.prefill_ms:.0f} ms" if t.prefill_ms else "..."   # known once generation ends
        self.stats.setText(f"prefill {prefill} | TTFA {t.ttfa_ms:.0f} ms | RTF {t.rtf:.2f} | per frame: "
                           f"talker {t.mean_ms('talker'):.1f}, code predictor {t.mean_ms('code_predictor'):.1f}, "
                           f"decoder {t.mean_ms('decoder'):.1f} ms | peak memory {peak:.0f} MB")

    def _on_finished(self, result) -> None:
        self.generate_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        if self._live_playback:
            self.audio.end_stream()
        t = result.timings
        self.latency.show_timings(t.talker_ms, t.code_predictor_ms, t.decoder_ms)
        self._show_stats(t)
        self.progress.setText(f"done: {t.frames} frames, stopped by {result.stop_reason}")
        take = self.live
        take.audio = result.audio
        take.stop_reason = result.stop_reason
        take.where = stage_lines(result.placement_report)
        self._show_where(take.where, silent_cpu_stages(result.placement_report))
        take.timings = {"prefill_ms": t.prefill_ms, "ttfa_ms": t.ttfa_ms, "rtf": t.rtf, "frames": t.frames,
                        "talker_ms": t.mean_ms("talker"), "code_predictor_ms": t.mean_ms("code_predictor"),
                        "decoder_ms": t.mean_ms("decoder")}
        if t.frames:
            try:
                self.store.add(take)
            except OSError as e:
                self._on_failed(f"could not save the take: {e}")
            self._refresh_takes(select=take)
        self.live = None

    def _on_failed(self, message: str) -> None:
        self.generate_button.setEnabled(self.info is not None)
        self.stop_button.setEnabled(False)
        self.audio.stop()
        self.progress.setText("")
        self.statusBar().showMessage(f"error: {message}")

    # ---- takes -------------------------------------------------------------------------------
    def _refresh_takes(self, select: Take | None = None) -> None:
        self.take_list.clear()
        for take in reversed(self.store.takes):
            item = QListWidgetItem(take.label)
            item.setData(Qt.UserRole, take.id)
            item.setToolTip(f"{take.request} seed {take.sampling.get('seed')} | {take.placement} | {take.timings}")
            self.take_list.addItem(item)
            if select is not None and take.id == select.id:
                self.take_list.setCurrentItem(item)

    def _take_of(self, item) -> Take | None:
        if item is None:
            return None
        tid = item.data(Qt.UserRole)
        return next((t for t in self.store.takes if t.id == tid), None)

    def selected_takes(self) -> list[Take]:
        return [t for t in (self._take_of(i) for i in self.take_list.selectedItems()) if t is not None]

    def _show_selected(self, item, _previous=None) -> None:
        take = self._take_of(item)
        if take is not None:
            self.waveform.show_audio(self.store.audio(take), take.sample_rate)
            self._show_take_timings(take)

    def _show_where(self, where: dict, problems: list[str]) -> None:
        text = "\n".join(f"{stage.replace('_', ' ')} on {line}" for stage, line in where.items())
        if problems:   # a stage scheduled onto the accelerator ran ops on the CPU
            text = "NOT ALL ON THE ACCELERATOR: " + "; ".join(problems) + "\n" + text
        self.where.setStyleSheet("color: #b00020;" if problems else "")
        self.where.setText(text)

    def _show_take_timings(self, take: Take) -> None:
        self._show_where(take.where, [f"{s}: {line}" for s, line in take.where.items() if "fall" in line])
        t = take.timings
        self.stats.setText(f"{take.label}: {t.get('frames', 0)} frames, TTFA {t.get('ttfa_ms', 0):.0f} ms, "
                           f"RTF {t.get('rtf', 0):.2f}, talker {t.get('talker_ms', 0):.1f} / code predictor "
                           f"{t.get('code_predictor_ms', 0):.1f} / decoder {t.get('decoder_ms', 0):.1f} ms per frame "
                           f"on {take.placement}")

    def toggle_play(self) -> None:
        if self.audio.playing:
            self.stop_playback()
            return
        take = self._take_of(self.take_list.currentItem())
        if take is not None:
            self.play_take(take)

    def play_take(self, take: Take, start: int = 0, gain: float = 1.0) -> None:
        if not self.audio.available:
            self.statusBar().showMessage(self.audio.reason, 5000)
            return
        try:
            self.audio.play(self.store.audio(take) * np.float32(gain), start=start)
            self.playing = take
        except Exception as e:
            self.statusBar().showMessage(f"playback failed: {e}", 5000)

    def seek(self, seconds: float) -> None:
        """Click on the waveform: play the shown take from there."""
        take = self._take_of(self.take_list.currentItem())
        if take is not None:
            self.play_take(take, start=int(seconds * take.sample_rate))

    def stop_playback(self) -> None:
        self.audio.stop()
        self.playing = None

    def start_ab(self) -> None:
        takes = self.selected_takes()
        if len(takes) != 2:
            self.statusBar().showMessage("select exactly two takes for A/B", 4000)
            return
        self.ab_pair = (takes[0], takes[1])
        a, b = takes
        self.ab_label.setText(f"A: {a.label}\nB: {b.label}\nA {a.timings.get('talker_ms', 0):.1f}/"
                              f"{a.timings.get('code_predictor_ms', 0):.1f}/{a.timings.get('decoder_ms', 0):.1f} ms on "
                              f"{a.placement.get('code_predictor')} vs B {b.timings.get('talker_ms', 0):.1f}/"
                              f"{b.timings.get('code_predictor_ms', 0):.1f}/{b.timings.get('decoder_ms', 0):.1f} ms on "
                              f"{b.placement.get('code_predictor')} (talker/code predictor/decoder)")
        self.play_take(a, gain=self._gain(a))

    def switch_ab(self) -> None:
        """Switches between A and B at the same position."""
        if self.ab_pair is None:
            return
        a, b = self.ab_pair
        other = b if self.playing is a else a
        position = self.audio.position
        self.play_take(other, start=position, gain=self._gain(other))

    def _gain(self, take: Take) -> float:
        if not self.match_loudness.isChecked() or self.ab_pair is None:
            return 1.0
        return matched_gain(self.store.audio(take), take.sample_rate)

    def restore_take(self) -> None:
        take = self._take_of(self.take_list.currentItem())
        if take is None:
            return
        self.text.setPlainText(take.text)
        r, s = take.request, take.sampling
        if r.get("speaker"):
            self.speaker.setCurrentText(r["speaker"])
        if r.get("voice_profile"):
            self.profile.setCurrentText(r["voice_profile"])
        self.language.setCurrentText(r.get("language") or "auto")
        self.instruct.setText(r.get("instruct") or "")
        self.streaming_text.setChecked(bool(r.get("streaming_text")))
        self.seed.setValue(int(s.get("seed", 0)))
        self.greedy.setChecked(not s.get("do_sample", True))
        self.temperature.setValue(s.get("temperature", 0.9))
        self.top_k.setValue(s.get("top_k", 50))
        self.top_p.setValue(s.get("top_p", 1.0))
        self.cp_temperature.setValue(s.get("cp_temperature", 0.9))
        self.cp_top_k.setValue(s.get("cp_top_k", 50))
        self.cp_top_p.setValue(s.get("cp_top_p", 1.0))
        self.max_frames.setValue(s.get("max_frames") or 0)
        for stage, mode in take.placement.items():
            if stage in self.placement:
                self.placement[stage].setCurrentText(mode)
        self.statusBar().showMessage(f"settings restored from {take.label}", 4000)

    def rename_take(self) -> None:
        take = self._take_of(self.take_list.currentItem())
        if take is None:
            return
        name, ok = QInputDialog.getText(self, "Rename take", "name", text=take.name)
        if ok:
            self.store.rename(take, name)
            self._refresh_takes(select=take)

    def delete_take(self) -> None:
        for take in self.selected_takes():
            if self.playing is take:
                self.stop_playback()
            self.store.delete(take)
        self._refresh_takes()

    def export_selected(self, folder: str | None = None) -> list[Path]:
        takes = self.selected_takes()
        if not takes:
            self.statusBar().showMessage("select takes to export", 4000)
            return []
        folder = folder or QFileDialog.getExistingDirectory(self, "Export to folder")
        if not folder:
            return []
        try:
            paths = export_takes([(t, self.store.audio(t)) for t in takes], Path(folder), self.export_pattern.text(),
                                 self.export_format.currentText())
        except (OSError, KeyError, ValueError, IndexError) as e:
            self._on_failed(f"export failed: {e}")
            return []
        self.statusBar().showMessage(f"exported {len(paths)} take(s) to {folder}", 5000)
        return paths

    # ---- audio devices, playhead ---------------------------------------------------------------
    def _fill_devices(self) -> None:
        self.device_box.blockSignals(True)
        self.device_box.clear()
        devices = self.audio.devices()
        if not devices:
            self.device_box.addItem("no audio output")
            self.device_box.setEnabled(False)
            self.device_box.setToolTip(self.audio.reason or "no output device")
            self.play_live.setChecked(False)
            self.play_live.setEnabled(False)
            self.statusBar().showMessage(self.audio.reason or "no audio output: playback is off, export still works")
        else:
            for index, name in devices:
                self.device_box.addItem(name, index)
            saved = self.settings.value("audio/device")
            if saved:
                self.device_box.setCurrentText(saved)
            self.audio.set_device(self.device_box.currentData())
        self.device_box.blockSignals(False)

    def _device_changed(self) -> None:
        self.audio.set_device(self.device_box.currentData())

    def _update_playhead(self) -> None:
        if self.audio.playing:
            self.waveform.set_playhead(self.audio.position)

    # ---- settings ------------------------------------------------------------------------------
    def _restore_settings(self) -> None:
        s = self.settings
        self.text.setPlainText(s.value("voice/text", self.text.toPlainText()))
        self.instruct.setText(s.value("voice/instruct", ""))
        self.seed.setValue(int(s.value("sampling/seed", 0)))
        self.greedy.setChecked(s.value("sampling/greedy", "false") == "true")
        self.threads.setValue(int(s.value("backend/threads", self.threads.value())))
        if self.play_live.isEnabled():   # stays off without an audio device
            self.play_live.setChecked(s.value("audio/play_live", "true") == "true")
        for stage, box in self.placement.items():
            mode = s.value(f"backend/{stage}", "cpu")
            index = box.findText(mode)
            if index >= 0 and box.model().item(index).isEnabled():
                box.setCurrentIndex(index)

    def save_settings(self) -> None:
        s = self.settings
        s.setValue("voice/text", self.text.toPlainText())
        s.setValue("voice/instruct", self.instruct.text())
        s.setValue("voice/speaker", self.speaker.currentText())
        s.setValue("voice/language", self.language.currentText())
        s.setValue("sampling/seed", self.seed.value())
        s.setValue("sampling/greedy", "true" if self.greedy.isChecked() else "false")
        s.setValue("backend/threads", self.threads.value())
        s.setValue("audio/play_live", "true" if self.play_live.isChecked() else "false")
        s.setValue("audio/device", self.device_box.currentText())
        for stage, box in self.placement.items():
            s.setValue(f"backend/{stage}", box.currentText())
        s.sync()

    def closeEvent(self, event) -> None:
        self.save_settings()
        self.audio.stop()
        self.controller.shutdown()
        super().closeEvent(event)
