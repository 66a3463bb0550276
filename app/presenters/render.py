"""Renders on the engine's worker: a script (the Script page: every line, or those asked again) and
a book (the Speak a book dialog, in the window's current voice, sampling and pronunciation rules).
One render at a time, and takes wait for it; Stop (Esc) ends it."""
from __future__ import annotations

from PySide6.QtCore import Signal

from .base import FeaturePresenter


class RenderPresenter(FeaturePresenter):
    # what has been done with an outcome (observers, tests): after the panels show it
    script_finished = Signal(object)  # RenderSummary
    book_finished = Signal(object)    # book.render.BookResult, or the message of what failed

    def __init__(self, view, session, controller, playback):
        super().__init__(view, session, controller, playback)
        s, bk = view.script, view.book
        s.render_requested.connect(self.render_script)
        s.stop_requested.connect(controller.cancel)
        s.play_requested.connect(playback.play_file)
        bk.render_requested.connect(self.render_book)
        bk.stop_requested.connect(controller.cancel)
        bk.play_file_requested.connect(playback.play_file)
        bk.play_audio_requested.connect(playback.play_audio)

    def _start(self, job, refused: str, panel, progress, finished, failed):
        """A render job made (None: refused, `refused` says why unless no model is loaded) started with
        its panel showing it; returns it."""
        if job is None:
            self.view.show_status("no model is loaded" if self.session.info is None else refused, 5000)
            return None
        job.progress.connect(progress)
        panel.set_rendering(True)
        self.view.generate_button.setEnabled(False)
        return self._run(job, finished, failed)

    def _ended(self, panel) -> None:
        panel.set_rendering(False)
        self.view.generate_button.setEnabled(self.session.info is not None)

    # ---- scripts -----------------------------------------------------------------------------
    def render_script(self, request: dict):
        """Renders a script on the worker; returns its Job, or None with the reason shown."""
        if self.controller.busy:
            self.view.show_status("a take is running: the script renders after it (stop it with Esc)", 5000)
            return None
        return self._start(self.controller.render_script(request), "a script is already rendering", self.view.script,
                           self._on_script_line, self._on_script_finished, self._on_script_failed)

    def _on_script_line(self, line: tuple) -> None:
        entry, summary = line
        self.view.script.show_entry(entry)
        self.view.script.show_progress(summary)

    def _on_script_finished(self, summary) -> None:
        self._ended(self.view.script)
        self.view.script.show_progress(summary)
        self.view.script.refresh_statuses()
        self.script_finished.emit(summary)

    def _on_script_failed(self, message: str) -> None:
        self._ended(self.view.script)
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
        return self._start(self.controller.render_book(request), "a render is already running", v.book,
                           v.book.show_progress, self._on_book_finished, self._on_book_failed)

    def _on_book_finished(self, result) -> None:
        self._ended(self.view.book)
        self.view.book.show_finished(result)
        self.book_finished.emit(result)

    def _on_book_failed(self, message: str) -> None:
        self._ended(self.view.book)
        self.view.book.progress.setText(message)
        self.view.show_error(message)
        self.book_finished.emit(message)
