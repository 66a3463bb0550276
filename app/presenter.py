"""Between the window and the engine: what each of the operator's actions does. It reads the panels,
asks the session (app/session.py, no Qt) what may start, makes the controller's jobs (a model load, a
take, a script, a voice profile, a preview, a download, the server) and shows their outcomes in the
panels. The window only lays out; the engine runs on the controller's threads."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal

from kazeia.engine.synthesis.placement import silent_cpu_stages

from .controller import EngineController
from .live_take import LiveTake
from .playback import Playback
from .session import Session
from .take_request import TakeRequest
from .takes import Take


class Presenter(QObject):
    """(Job signals come from the controller's threads: they connect to methods of QObjects of the
    GUI thread, never to lambdas, so their slots run on the GUI thread.)"""
    # what has been done with an outcome (observers, tests): after the panels show it
    model_loaded = Signal(object)     # ModelInfo
    take_finished = Signal(object)    # the engine's Result (the take is kept by now)
    voice_created = Signal(str)
    voice_kept = Signal(object)       # the names of the profiles kept from a take
    preview_played = Signal(object)   # audio
    script_finished = Signal(object)  # RenderSummary
    book_finished = Signal(object)    # book.render.BookResult, or the message of what failed

    def __init__(self, view, session: Session, audio):
        super().__init__(view)
        self.view, self.session, self.audio = view, session, audio
        self.applied = None   # placement and threads the engine has now (from the worker)
        self._stopped_because = "stopped"   # what the Serve dialog says once the server has stopped
        self.playback = Playback(audio, session.store, lambda: view.backend.has_output)
        self.live = LiveTake(view.latency, view.take_view, audio)
        self._typed = None        # a take spoken as it is typed: its text (controller.TypedText)
        self._typed_box = ""      # the text box as last handed to it
        self._preview_of = None   # (profile name, language) of the preview being made, to cache it
        self.controller = EngineController(self)
        self._connect()

    def _connect(self) -> None:
        v = self.view
        v.backend.placement_changed.connect(self._placement_changed)
        v.backend.threads_changed.connect(self._threads_changed)
        tr = v.transport
        tr.generate_button.clicked.connect(lambda: self.generate())
        tr.type_button.toggled.connect(self.speak_as_typed)
        tr.stop_button.clicked.connect(self.stop)
        tr.play_button.clicked.connect(self.toggle_play)
        tr.ab_button.clicked.connect(self.ab_or_switch)
        self.playback.status.connect(lambda message: v.show_status(message, 5000))
        self.playback.error.connect(v.show_error)
        v.take_view.seek_requested.connect(self.seek)
        t = v.takes
        t.selection_changed.connect(self._show_selected)
        t.play_requested.connect(self.playback.play_take)
        t.ab_requested.connect(self.start_ab)
        t.blind_requested.connect(self.start_blind_test)
        t.keep_voice_requested.connect(self.keep_voice)
        t.restore_requested.connect(self.restore_take)
        t.redo_chunk_requested.connect(self.redo_chunk)
        t.removing.connect(lambda take: self.playback.playing is take and self.playback.stop())
        v.compare.compare_requested.connect(self.compare_placements)
        v.compare.listen_requested.connect(self.listen_comparison)
        v.compare.blind_requested.connect(self.blind_test_comparison)
        lib = v.library
        lib.create_requested.connect(lambda path, transcript: self.add_voice(path, transcript=transcript))
        lib.preview_requested.connect(self.preview_voice)
        s = v.script
        s.render_requested.connect(self.render_script)
        s.stop_requested.connect(self.controller.cancel)
        s.play_requested.connect(self.playback.play_file)
        bk = v.book
        bk.render_requested.connect(self.render_book)
        bk.stop_requested.connect(self.controller.cancel)
        bk.play_file_requested.connect(self.playback.play_file)
        bk.play_audio_requested.connect(self.playback.play_audio)
        v.models.open_requested.connect(lambda path: self.load_model(path))
        v.models.pull_requested.connect(self.pull_model)
        v.models.cancel_requested.connect(self.controller.cancel_pull)
        v.serve.start_requested.connect(self.start_server)
        v.serve.stop_requested.connect(self.stop_server)

    # ---- model -------------------------------------------------------------------------------
    def load_model(self, path: str | None, out_type: str = "q8_0") -> None:
        v = self.view
        v.generate_button.setEnabled(False)
        job = self.controller.load_model(path, v.backend.threads.value(), v.backend.current_placement(), out_type)
        job.finished.connect(self._on_loaded)
        job.failed.connect(self._on_load_failed)
        job.status.connect(v.show_status)
        job.progress.connect(v.backend.show_conversion)
        self.controller.submit(job)

    def _on_load_failed(self, message: str) -> None:
        self.view.backend.conversion.hide()
        self.view.generate_button.setEnabled(self.session.info is not None)
        self.view.show_error(message)

    def _on_loaded(self, engine) -> None:
        v, info = self.view, engine.info
        v.backend.conversion.hide()
        v.clear_error()
        if self.controller.serving is not None:
            self.stop_server("stopped: another model was loaded")
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
            job.finished.connect(self._on_applied)
            job.failed.connect(self.view.show_error)
            self.controller.submit(job)

    def _placement_changed(self, placement: dict) -> None:
        self._apply(placement=placement)
        self.view.show_status("placement applies to the next take" if self.controller.busy else "placement set", 4000)

    def _threads_changed(self, threads: int) -> None:
        self._apply(threads=threads)
        self.view.show_status(f"{threads} threads from the next take", 4000)

    def _on_applied(self, ran) -> None:
        self.applied = ran   # what the engine has now (tests and the title bar read it)

    # ---- takes -------------------------------------------------------------------------------
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
        take.finished.connect(self._on_finished)
        take.failed.connect(self._on_take_failed)
        if v.workspace.arrangement == "narrow" and not tag and show_live:   # (typing: the text box stays)
            v.workspace.show_page(v.workspace.live)
        v.generate_button.setEnabled(False)
        v.stop_button.setEnabled(True)
        return self.controller.submit(take)

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
        step = self.session.comparison_step(take, result, outcome.ran.tag)
        if step is not None:
            self._compare_step(step)
        self.take_finished.emit(result)

    def _on_take_failed(self, message: str) -> None:
        self._end_typing()
        self.view.generate_button.setEnabled(self.session.info is not None)
        self.view.stop_button.setEnabled(False)
        self.live.fail()
        self.session.drop_comparison()
        self.view.show_error(message)

    def _show_selected(self, take) -> None:
        v = self.view
        v.takes.show_details(take)
        if take is None or self.live.running:   # a running take keeps the live view
            return
        if v.take_view.shown != take.id:
            v.take_view.show_audio(self.session.store.audio(take), take.sample_rate)
            v.take_view.shown = take.id
        v.latency.show_take(take)

    def restore_take(self, take: Take | None) -> None:
        if take is None:
            return
        v, r = self.view, self.session.restored(take)
        v.text.setPlainText(r.text)
        v.voice.restore_request(r.request)
        v.sampling.streaming_text.setChecked(r.streaming_text)
        v.sampling.restore_params(r.sampling)
        v.backend.set_placement(r.placement)
        v.show_status(f"settings restored from {take.label}", 4000)

    def redo_chunk(self, take: Take, index: int, seed: int | None = None):
        """A long take again with chunk `index` given a new seed, its settings back in the panels; the
        two takes then A/B on that chunk alone."""
        try:
            seeds = self.session.redo_seeds(take, index, seed)
            self.restore_take(take)
            job = self.job()
        except ValueError as e:
            self.view.show_error(str(e))
            return None
        return self.generate(replace(job, chunk_seeds=seeds))

    # ---- playback and A/B --------------------------------------------------------------------
    def toggle_play(self) -> None:
        self.playback.toggle(self.view.takes.current())

    def seek(self, seconds: float) -> None:
        """Click on the waveform: play the shown take from there."""
        take = self.view.takes.current()
        if take is not None:
            self.playback.play_take(take, start=int(seconds * take.sample_rate))

    def start_ab(self) -> None:
        takes = self.view.takes.selected()
        if len(takes) != 2:
            self.view.show_status("select exactly two takes for A/B", 4000)
            return
        self._play_ab(*takes)

    def _play_ab(self, a: Take, b: Take) -> None:
        self.playback.match_loudness = self.view.takes.match_loudness.isChecked()
        self.view.takes.ab_label.setText(self.playback.start_ab(a, b))

    def start_blind_test(self, takes=None):
        """The Blind test dialog on two takes (the two selected by default); returns it, or None."""
        takes = list(takes) if takes is not None else self.view.takes.selected()
        if len(takes) != 2:
            self.view.show_status("select exactly two takes for a blind test", 4000)
            return None
        if takes[0].sample_rate != takes[1].sample_rate:
            self.view.show_error("a blind test needs two takes of one sample rate")
            return None
        from .panels.blind_test import BlindTestDialog
        self.playback.stop()
        dialog = BlindTestDialog(self.view, takes, [self.session.store.audio(t) for t in takes], takes[0].sample_rate,
                                 self.playback, self.session.store.folder,
                                 match_loudness=self.view.takes.match_loudness.isChecked())
        dialog.finished_test.connect(lambda t: self.view.show_status(f"blind test: {t.verdict}"))
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def ab_or_switch(self) -> None:
        """The A/B button: switches while an A/B pair plays, else starts one with the two selected."""
        if self.playback.pair_playing():
            self.playback.switch_ab()
        else:
            self.start_ab()

    # ---- placement comparison ----------------------------------------------------------------
    def compare_current(self) -> None:
        self.compare_placements(self.view.compare.placement("A"), self.view.compare.placement("B"),
                                self.view.compare.b_model())

    def compare_placements(self, a: dict, b: dict, b_model: str | None = None):
        """The current request on placement A, then on B (same text, voice and seed); `b_model`: B
        on another model file of the same variant (another weight type or decoder)."""
        if self.session.info is None or self.controller.busy:
            return None
        try:
            request = self.job()
        except ValueError as e:
            self.view.show_error(str(e))
            return None
        first = self.session.start_comparison(request, a, b, b_model)
        self.view.workspace.show_page(self.view.compare)
        self.view.compare.show_progress("rendering A ...")
        return self.generate(*first)

    def _compare_step(self, step) -> None:
        if step.next_request is not None:
            self.view.compare.show_progress("rendering B ...")
            self.generate(step.next_request, tag=step.tag)
            return
        self.playback.ab_pair = step.pair
        self.view.compare.show_pair(*step.pair)
        self.view.show_status(step.summary, 8000)

    def listen_comparison(self) -> None:
        if self.playback.ab_pair is not None:
            self._play_ab(*self.playback.ab_pair)

    def blind_test_comparison(self):
        """The Blind test dialog on the pair just compared; returns it, or None."""
        return self.start_blind_test(self.playback.ab_pair) if self.playback.ab_pair is not None else None

    # ---- scripts -----------------------------------------------------------------------------
    def render_script(self, request: dict):
        """Renders a script on the worker; returns its Job, or None with the reason shown."""
        v = self.view
        if self.controller.busy:
            v.show_status("a take is running: the script renders after it (stop it with Esc)", 5000)
            return None
        job = self.controller.render_script(request)
        if job is None:
            v.show_status("no model is loaded" if self.session.info is None else "a script is already rendering", 5000)
            return None
        job.progress.connect(self._on_script_line)
        job.finished.connect(self._on_script_finished)
        job.failed.connect(self._on_script_failed)
        v.script.set_rendering(True)
        v.generate_button.setEnabled(False)
        return self.controller.submit(job)

    def _on_script_line(self, line: tuple) -> None:
        entry, summary = line
        self.view.script.show_entry(entry)
        self.view.script.show_progress(summary)

    def _on_script_finished(self, summary) -> None:
        v = self.view
        v.script.set_rendering(False)
        v.script.show_progress(summary)
        v.script.refresh_statuses()
        v.generate_button.setEnabled(self.session.info is not None)
        self.script_finished.emit(summary)

    def _on_script_failed(self, message: str) -> None:
        self.view.script.set_rendering(False)
        self.view.generate_button.setEnabled(self.session.info is not None)
        self.view.show_error(message)

    # ---- books -------------------------------------------------------------------------------
    def render_book(self, request: dict):
        """Renders a book on the worker in the window's current voice; returns its Job, or None
        with the reason shown."""
        v = self.view
        if self.controller.busy:
            v.show_status("a take is running: render the book after it (stop it with Esc)", 5000)
            return None
        try:
            voice = v.voice.request()
        except ValueError as e:
            v.show_error(str(e))
            return None
        profile = voice.pop("voice_profile")
        request = {**request, **voice, "voice_profile": self.session.profile_path(profile),
                   "sampling": v.sampling.params(self.session.info), "lexicon": v.pronunciation.lexicon}
        job = self.controller.render_book(request)
        if job is None:
            v.show_status("no model is loaded" if self.session.info is None else "a render is already running", 5000)
            return None
        job.progress.connect(v.book.show_progress)
        job.finished.connect(self._on_book_finished)
        job.failed.connect(self._on_book_failed)
        v.book.set_rendering(True)
        v.generate_button.setEnabled(False)
        return self.controller.submit(job)

    def _on_book_finished(self, result) -> None:
        v = self.view
        v.book.set_rendering(False)
        v.book.show_finished(result)
        v.generate_button.setEnabled(self.session.info is not None)
        self.book_finished.emit(result)

    def _on_book_failed(self, message: str) -> None:
        self.view.book.set_rendering(False)
        self.view.generate_button.setEnabled(self.session.info is not None)
        self.view.book.progress.setText(message)
        self.view.show_error(message)
        self.book_finished.emit(message)

    # ---- voices ------------------------------------------------------------------------------
    def add_voice(self, audio_path: str, name: str | None = None, transcript: str | None = None) -> str | None:
        """Makes a profile on the engine's worker; voice_created or the error follows."""
        try:
            name, path = self.session.new_voice(audio_path, name)
        except ValueError as e:
            self.view.show_error(str(e))
            return None
        self.view.show_status(f"making voice profile {name} ...")
        job = self.controller.create_voice(name, audio_path, transcript, path)
        job.finished.connect(self._on_voice_created)
        job.failed.connect(self.view.show_error)
        self.controller.submit(job)
        return name

    def _on_voice_created(self, name: str) -> None:
        self.view.clear_error()
        self.view.voice.refresh_profiles(select=name)
        self.view.library.refresh(select=name)
        self.view.show_status(f"voice profile {name} created", 4000)
        self.voice_created.emit(name)

    def preview_voice(self, name: str) -> None:
        """A short fixed sentence with the profile, played and not kept as a take; cached in the library
        by the voice, the model and the language, so it is made once."""
        try:
            self.session.require_base("voice previews")
        except ValueError as e:
            self.view.show_error(str(e))
            return
        library, language = self.session.voices, self.view.voice.language.currentText()
        try:
            cached = library.cached_preview(name, self.session.info, language)
        except ValueError as e:   # (deleted or damaged meanwhile)
            self.view.show_error(str(e))
            return
        if cached is not None:
            self._preview_of = None
            self._on_preview(cached[0])
            return
        self.view.show_status(f"previewing {name} ...")
        self._preview_of = (name, language)
        job = self.controller.preview(library.path(name), language)
        job.finished.connect(self._on_preview)
        job.failed.connect(self.view.show_error)
        self.controller.submit(job)

    def _on_preview(self, audio) -> None:
        made, self._preview_of = self._preview_of, None
        if made is not None:
            try:
                self.session.voices.keep_preview(made[0], audio, self.session.info.sample_rate, self.session.info,
                                                 made[1])
            except (ValueError, OSError):
                pass   # (not kept: made again next time)
        self.playback.play_audio(audio)
        self.view.show_status(f"preview: {len(audio) / self.session.info.sample_rate:.1f} s", 4000)
        self.preview_played.emit(audio)

    def keep_voice(self, take: Take, name: str | None = None):
        """The take's voice as a profile in the library, one per Base model size at hand (the Base models
        pulled, and the one open); returns the Job, or None with the reason shown."""
        from kazeia.engine.models.registry import Registry
        paths = [e.path for e in Registry().entries() if e.variant == "base" and Path(e.path).is_file()]
        info = self.session.info
        if info is not None and info.variant == "base" and str(info.path) not in paths:
            paths.insert(0, str(info.path))
        if not paths:
            self.view.show_error("keeping a voice needs a Base model (0.6B or 1.7B): File > Get models... "
                                 "(Base), or open one")
            return None
        name = name or take.name or (f"kept {take.request.get('instruct')[:30]}" if take.request.get("instruct")
                                     else f"kept {take.voice}")
        self.view.show_status(f"keeping the voice of {take.label} ...")
        job = self.controller.keep_voice(take.to_json(), self.session.store.audio(take), take.sample_rate, paths,
                                         name, self.session.voices.folder)
        job.finished.connect(self._on_voice_kept)
        job.failed.connect(self.view.show_error)
        self.controller.submit(job)
        return job

    def _on_voice_kept(self, names) -> None:
        self.view.clear_error()
        self.view.voice.refresh_profiles()
        self.view.library.refresh(select=names[0] if names else None)
        self.view.show_status(f"voice kept as {', '.join(names)}", 5000)
        self.voice_kept.emit(names)

    # ---- downloads and the server (on the controller's service thread) -----------------------
    def pull_model(self, source: str) -> None:
        panel = self.view.models
        job = self.controller.pull_model(source)
        if job is None:
            return
        panel.show_pull_started(source)
        job.progress.connect(panel.show_progress)
        job.status.connect(panel.status.setText)
        job.finished.connect(panel.show_pulled)
        job.failed.connect(panel.show_pull_failed)
        self.controller.submit(job)

    def start_server(self, request) -> None:
        panel = self.view.serve
        job = self.controller.start_server(request)
        if job is None:
            panel.show_failed("load a model first" if self.session.info is None else "already serving")
            return
        job.finished.connect(self._on_serving)
        job.failed.connect(panel.show_failed)
        job.failed.connect(self.view.show_error)
        self.controller.submit(job)

    def _on_serving(self, serving) -> None:
        self.view.serve.show_serving(serving.server.url, serving.voices)

    def stop_server(self, why: str = "stopped") -> None:
        job = self.controller.stop_server()
        if job is not None:
            self._stopped_because = why
            job.finished.connect(self._on_stopped_serving)
            job.failed.connect(self.view.show_error)
            self.controller.submit(job)

    def _on_stopped_serving(self, _=None) -> None:
        self.view.serve.show_stopped(self._stopped_because)
