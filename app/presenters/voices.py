"""The voice library's actions: a profile made from a recording, a profile's preview (made once per
voice, model and language, then played from the library's cache), and a take's voice kept as a
profile for the Base models at hand (which ones: the session's rule)."""
from __future__ import annotations

from PySide6.QtCore import Signal

from ..takes import Take
from .base import FeaturePresenter


class VoicesPresenter(FeaturePresenter):
    # what has been done with an outcome (observers, tests): after the panels show it
    voice_created = Signal(str)
    voice_kept = Signal(object)       # the names of the profiles kept from a take
    preview_played = Signal(object)   # audio

    def __init__(self, view, session, controller, playback):
        super().__init__(view, session, controller, playback)
        self._preview_of = None   # (profile name, language) of the preview being made, to cache it
        view.library.create_requested.connect(lambda path, transcript: self.add_voice(path, transcript=transcript))
        view.library.preview_requested.connect(self.preview_voice)
        view.takes.keep_voice_requested.connect(self.keep_voice)

    def add_voice(self, audio_path: str, name: str | None = None, transcript: str | None = None) -> str | None:
        """Makes a profile on the engine's worker; voice_created or the error follows."""
        try:
            name, path = self.session.new_voice(audio_path, name)
        except ValueError as e:
            self.view.show_error(str(e))
            return None
        self.view.show_status(f"making voice profile {name} ...")
        self._run(self.controller.create_voice(name, audio_path, transcript, path), self._on_voice_created)
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
        library, language = self.session.voices, self.view.voice.language.currentText()
        try:
            self.session.require_base("voice previews")
            cached = library.cached_preview(name, self.session.info, language)
        except ValueError as e:   # (no Base model; or the profile deleted or damaged meanwhile)
            self.view.show_error(str(e))
            return
        if cached is not None:
            self._preview_of = None
            self._on_preview(cached[0])
            return
        self.view.show_status(f"previewing {name} ...")
        self._preview_of = (name, language)
        self._run(self.controller.preview(library.path(name), language), self._on_preview)

    def _on_preview(self, audio) -> None:
        made, self._preview_of = self._preview_of, None
        info = self.session.info
        if made is not None:
            try:
                self.session.voices.keep_preview(made[0], audio, info.sample_rate, info, made[1])
            except (ValueError, OSError):
                pass   # (not kept: made again next time)
        self.playback.play_audio(audio)
        self.view.show_status(f"preview: {len(audio) / info.sample_rate:.1f} s", 4000)
        self.preview_played.emit(audio)

    def keep_voice(self, take: Take, name: str | None = None):
        """The take's voice as a profile in the library, one per Base model size at hand (the Base models
        pulled, and the one open); returns the Job, or None with the reason shown."""
        try:
            paths = self.session.voice_keeping_models()
        except ValueError as e:
            self.view.show_error(str(e))
            return None
        name = self.session.kept_voice_name(take, name)
        self.view.show_status(f"keeping the voice of {take.label} ...")
        job = self.controller.keep_voice(take.to_json(), self.session.store.audio(take), take.sample_rate, paths,
                                         name, self.session.voices.folder)
        return self._run(job, self._on_voice_kept)

    def _on_voice_kept(self, names) -> None:
        self.view.clear_error()
        self.view.voice.refresh_profiles()
        self.view.library.refresh(select=names[0] if names else None)
        self.view.show_status(f"voice kept as {', '.join(names)}", 5000)
        self.voice_kept.emit(names)
