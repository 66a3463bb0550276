"""Voice: speaker, language and instruction for the loaded model, or a voice profile (Base models),
with the profile's kind and the model it was made for."""
from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit

from .base import Panel, watch


def combo() -> QComboBox:
    """A combo box as wide as its column, not as its longest item (a voice profile's name)."""
    box = QComboBox()
    box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(8)
    return box


class VoicePanel(Panel):
    panel_id = "voice"

    def __init__(self, settings, library):
        super().__init__(settings)
        self.library = library
        form = self.framed_form("Voice")
        self.speaker, self.language, self.profile = combo(), combo(), combo()
        self.language.addItem("auto")
        self.instruct = QLineEdit()
        self.instruct.setPlaceholderText("describe the voice")
        self.instruct.setToolTip("an instruction for VoiceDesign and 1.7B CustomVoice models, e.g. "
                                 "\"a warm, low voice, speaking slowly\"")
        self.profile.setToolTip("voice profiles of Base models: make one in the Voices tab or drop audio on the window")
        self.profile_info = QLabel("")
        self.profile_info.setWordWrap(True)
        self.note = QLabel("")
        self.note.setWordWrap(True)
        form.addRow("speaker", self.speaker)
        form.addRow("language", self.language)
        form.addRow("instruction", self.instruct)
        form.addRow("voice profile", self.profile)
        form.addRow(self.profile_info)
        form.addRow(self.note)
        self.info = None
        self.profile.currentTextChanged.connect(self._show_profile)
        watch([self.speaker, self.language, self.instruct, self.profile], self.changed)

    @property
    def is_base(self) -> bool:
        return self.info is not None and self.info.variant == "base"

    def set_model(self, info) -> None:
        self._restoring = True   # filling the boxes is not an operator's change
        try:
            self.info = info
            self.speaker.clear()
            self.speaker.addItems([s.name for s in info.speakers])
            self.speaker.setEnabled(bool(info.speakers))
            self.language.clear()
            self.language.addItems(["auto", *info.languages])
            self.instruct.setEnabled(info.variant == "voice_design" or
                                     (info.variant == "custom_voice" and info.size != "0b6"))
            self.profile.setEnabled(self.is_base)
            self.refresh_profiles()
            self.restore_settings()
        finally:
            self._restoring = False
        self.note.setText("Base models speak with a cloned voice: pick a profile or make one from reference audio "
                          "(Voices tab, or drop a file on the window)." if self.is_base else "")

    def refresh_profiles(self, select: str | None = None) -> None:
        current = select or self.profile.currentText()
        self.profile.blockSignals(True)
        self.profile.clear()
        self.profile.addItems(self.library.names())
        if current:
            self.profile.setCurrentText(current)
        self.profile.blockSignals(False)
        self._show_profile(self.profile.currentText())

    def _show_profile(self, name: str) -> None:
        if not name or not self.is_base:
            self.profile_info.setText("")
            return
        try:
            e = self.library.entry(name)
        except ValueError:   # (deleted by another window)
            self.profile_info.setText("")
            return
        self.profile_info.setText(f"{e.kind} profile, made for {e.model} ({e.size})" if e.kind != "unreadable"
                                  else f"unreadable: {e.problem}")

    def request(self) -> dict:
        """The voice part of a take's request; a Base model without a profile is refused."""
        profile = None
        if self.is_base:
            if not self.profile.currentText():
                raise ValueError("pick or create a voice profile for this Base model (Voices tab)")
            profile = self.profile.currentText()
        return {"speaker": self.speaker.currentText() or None, "language": self.language.currentText() or "auto",
                "instruct": self.instruct.text() if self.instruct.isEnabled() and self.instruct.text() else None,
                "voice_profile": profile}

    def restore_request(self, r: dict) -> None:
        if r.get("speaker"):
            self.speaker.setCurrentText(r["speaker"])
        if r.get("voice_profile"):
            self.profile.setCurrentText(r["voice_profile"])
        self.language.setCurrentText(r.get("language") or "auto")
        self.instruct.setText(r.get("instruct") or "")

    def restore_settings(self) -> None:
        self.instruct.setText(self.value("instruct", ""))
        for box, name in ((self.speaker, "speaker"), (self.language, "language"), (self.profile, "profile")):
            saved = self.value(name)
            if saved and box.findText(saved) >= 0:
                box.setCurrentText(saved)

    def save_settings(self) -> None:
        self.set_value("instruct", self.instruct.text())
        for box, name in ((self.speaker, "speaker"), (self.language, "language"), (self.profile, "profile")):
            if box.currentText():
                self.set_value(name, box.currentText())
