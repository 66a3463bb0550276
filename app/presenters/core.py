"""The workbench's core actions: the model (opened, its placement and threads) and the take spoken from
the compose panels (Generate, Speak as I type, Stop), shown live as it runs and kept when it ends."""
from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Signal

from kazeia.engine.synthesis.placement import silent_cpu_stages

from ..live_take import LiveTake
from ..take_request import TakeRequest
from ..takes import Take
from .base import FeaturePresenter


class CorePresenter(FeaturePresenter):
    # what has been done with an outcome (observers, tests): after the panels show it
    model_loaded = Signal(object)     # ModelInfo
    take_finished = Signal(object)    # the engine's Result (the take is kept by now)
    take_recorded = Signal(object, object)   # a finished take and its TakeOutcome, before take_finished

    def __init__(self, view, session, controller, playback, audio):
        super().__init__(view, session, controller, playback)
        self.audio = audio
        self.applied = None   # placement and threads the engine has now (from the worker)
        self.live = LiveTake(view.latency, view.take_view, audio)
        self._typed = None        # a take spoken as it is typed: its text (typed_text.TypedText)
        self._typed_box = ""      # the text box as last handed to it
        view.backend.placement_changed.connect(self._placement_changed)
        view.backend.threads_changed.connect(self._threads_changed)
        view.transport.generate_button.clicked.connect(lambda: self.generate())
        view.transport.type_button.toggled.connect(self.speak_as_typed)
        view.transport.stop_button.clicked.connect(self.stop)
        view.models.open_requested.connect(lambda path: self.load_model(path))

    # ---- model -------------------------------------------------------------------------------
    def load_model(self, path: str | None, out_type: str = "q8_0") -> None:
        v = self.view
        v.generate_button.setEnabled(False)
        job = self.controller.load_model(path, v.backend.threads.value(), v.backend.current_placement(), out_type)
        job.status.connect(v.show_status)
        job.progress.connect(v.backend.show_conversion)
        self._run(job, self._on_loaded, self._on_load_failed)

    def _on_load_failed(self, message: str) -> None:
        self.view.backend.conversion.hide()
        self.view.generate_button.setEnabled(self.session.info is not None)
        self.view.show_error(message)

    def _on_loaded(self, engine) -> None:
        v, info = self.view, engine.info
        v.backend.conversion.hide()
        v.clear_error()
        self.session.info = info
        v.settings.setValue("model/last", str(info.path))
        for panel in v.panels:
            panel.set_model(info)
        v.text_plan.set_model([sp.name for sp in info.speakers], info.languages)
        if info.variant == "base":
            v.sampling.streaming_text.setChecked(True)
        v.generate_button.setEnabled(True)
        v.show_status(f"loaded {info.path.name}", 5000)
        self.model_loaded.emit(info)

    def _apply(self, placement=None, threads=None) -> None:
        job = self.controller.apply(placement=placement, threads=threads)
        if job is not None:
            self._run(job, self._on_applied)

    def _placement_changed(self, placement: dict) -> None:
        self._apply(placement=placement)
        self.view.show_status("placement applies to the next take" if self.controller.busy else "placement set",
                              4000)

    def _threads_changed(self, threads: int) -> None:
        self._apply(threads=threads)
        self.view.show_status(f"{threads} threads from the next take", 4000)

    def _on_applied(self, ran) -> None:
        self.applied = ran   # what the engine has now (tests and the title bar read it)

    # ---- the take from the compose panels ----------------------------------------------------
    def job(self) -> TakeRequest:
        """The request for a take from the panels (raises ValueError with a message for the banner)."""
        v = self.view
        voice = v.voice.request()
        profile = voice.pop("voice_profile")
        return TakeRequest(v.text.toPlainText(), v.sampling.params(self.session.info), v.backend.current_placement(),
                           v.backend.threads.value(), **voice, streaming_text=v.sampling.streaming_text.isChecked(),
                           voice_profile=self.session.profile_path(profile), voice_profile_name=profile,
                           lexicon=v.pronunciation.lexicon)

    def generate(self, job: TakeRequest | None = None, tag: dict | None = None):
        """Starts a take from the panels (or `job`); returns its Job, or None with the reason shown."""
        v, info = self.view, self.session.info
        why = self.session.take_refusal(self.controller.busy, self.controller.rendering)
        if why:
            if info is not None:
                v.show_status(why, 5000)
            return None
        try:
            job = job or self.job()
        except ValueError as e:
            v.show_error(str(e))
            return None
        take = self.controller.generate(replace(job, tag=tag or {}))
        if take is None:
            return None
        return self._run_take(take, job, tag)

    def _run_take(self, take, job: TakeRequest, tag: dict | None, show_live: bool = True):
        """The live views and the take's outcome for a take job just made; it is submitted."""
        v, info = self.view, self.session.info
        self.playback.stop()
        play_live = v.sampling.play_live.isChecked() and v.backend.has_output
        frames = job.sampling.max_frames or 8191
        why = self.live.begin(Take.for_request(job, job.model_path or str(info.path), info.sample_rate), play_live,
                              frames * info.hparams["decoder"]["samples_per_frame"])
        if why:
            v.show_status(why, 5000)
        take.started.connect(self.live.started)
        take.progress.connect(self.live.chunk)
        if v.workspace.arrangement == "narrow" and not tag and show_live:   # (typing: the text box stays)
            v.workspace.show_page(v.workspace.live)
        v.generate_button.setEnabled(False)
        v.stop_button.setEnabled(True)
        return self._run(take, self._on_finished, self._on_take_failed)

    def speak_as_typed(self, on: bool) -> None:
        """"Speak as I type" pressed (on) or released: a take whose text is the box's, spoken while it
        is typed, as the whole text's take (what the box holds is its start; only text added at the end
        is heard).
        Released, the rest is spoken and the take kept."""
        v = self.view
        if not on:
            self._end_typing()
            return
        why = self.session.take_refusal(self.controller.busy, self.controller.rendering)
        try:
            job = None if why else replace(self.job(), text="", streaming_text=True)
        except ValueError as e:
            why = str(e)
        take = None if why else self.controller.speak_typed(job)
        if take is None:
            v.show_status(why or "a take is running", 5000)
            self._uncheck_typing()
            return
        self._typed, self._typed_box = take.typed, ""
        self._run_take(take, job, None, show_live=False)
        v.text.textChanged.connect(self._on_typed)
        self._on_typed()
        v.text.setFocus()

    def _on_typed(self) -> None:
        text = self.view.text.toPlainText()
        if text.startswith(self._typed_box):
            self._typed.write(text[len(self._typed_box):])
        else:
            self.view.show_status("speaking as you type: only text added at the end is heard", 5000)
        self._typed_box = text

    def _end_typing(self) -> None:
        if self._typed is None:
            return
        self.view.text.textChanged.disconnect(self._on_typed)
        self._typed.close()
        self._typed = None
        self._uncheck_typing()

    def _uncheck_typing(self) -> None:
        button = self.view.transport.type_button
        button.blockSignals(True)
        button.setChecked(False)
        button.blockSignals(False)

    def stop(self) -> None:
        """Esc: stops a script render, else the take (a comparison does not go on), else playback."""
        if self.controller.rendering:
            self.controller.cancel()
        elif self.controller.busy:
            self.session.drop_comparison()
            self.controller.cancel()
        else:
            self.playback.stop()

    def tick(self) -> None:
        """A display tick: the live take's views and the level meter."""
        self.live.tick()
        meter = self.view.backend.meter
        if self.audio.playing:
            self.view.take_view.set_playhead(self.audio.position)
            meter.show_level(self.audio.meter()[0], self.audio.level.limited_db)
        elif meter.value() > -60:
            meter.show_level(-90.0, 0.0)

    def _on_finished(self, outcome) -> None:
        self._end_typing()   # (a typed take ends at its frame limit, or stopped)
        v, result = self.view, outcome.result
        v.generate_button.setEnabled(True)
        v.stop_button.setEnabled(False)
        take = self.live.finish(outcome)
        if take is None:
            return
        v.clear_error()
        if result.timings.frames:
            problem = self.session.keep(take)
            if problem:
                v.show_error(problem)
            v.takes.refresh(select=take)
        v.latency.show_take(take)
        v.latency.show_where(take.where, silent_cpu_stages(result.placement_report))
        chunks = f" in {len(take.chunks)} chunks" if take.chunks else ""
        v.show_status(f"done: {result.timings.frames} frames{chunks}, stopped by {result.stop_reason}", 5000)
        self.take_recorded.emit(take, outcome)
        self.take_finished.emit(result)

    def _on_take_failed(self, message: str) -> None:
        self._end_typing()
        self.view.generate_button.setEnabled(self.session.info is not None)
        self.view.stop_button.setEnabled(False)
        self.live.fail()
        self.session.drop_comparison()
        self.view.show_error(message)
