"""The Blind test dialog: two takes (a placement comparison's pair, two voices, two weight types) in an
ABX or a blind preference test (engine/takes/blind_test.py). Which take is A and which is B is drawn from the
test's seed, and nothing in the dialog names a take until the last answer: the buttons say A, B, X (or
1, 2), the title says the trial. Both takes are loudness-matched and every sound plays from where the
last one was (switching mid-phrase is how small differences are heard). Keys: A, B, X (or 1, 2) play,
Space stops, Home goes back to the start, Left / Right answer; every target is finger-sized."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QDialog, QFileDialog, QFormLayout, QGridLayout, QHBoxLayout, QLabel,
                               QListWidget, QPushButton, QSpinBox, QStackedWidget, QVBoxLayout, QWidget)

from kazeia.engine.takes.blind_test import DEFAULT_TRIALS, BlindTest, saved_tests
from kazeia.engine.takes.loudness import matched_gain

from ..touch import HIT_TARGET
from .base import wrapping_label

BIG = 2 * HIT_TARGET   # the trial's buttons: large for a finger, and hard to miss without looking


def _big(text: str) -> QPushButton:
    b = QPushButton(text)
    # (its own style sheet: the window's touch style sheet would otherwise set 44 px)
    b.setStyleSheet(f"QPushButton {{ min-height: {BIG}px; min-width: {2 * BIG}px; }}")
    font = b.font()
    font.setPointSizeF(font.pointSizeF() * 1.6)
    b.setFont(font)
    return b


class BlindTestDialog(QDialog):
    finished_test = Signal(object)   # the BlindTest, once answered in full (saved beside the takes)

    def __init__(self, parent, takes, sounds, sample_rate: int, playback, folder: Path, match_loudness: bool = True):
        """`takes`: the two Take objects; `sounds`: their audio; `playback`: the window's (plays audio that
        is no take, so nothing else on screen follows what plays); `folder`: where results are kept."""
        super().__init__(parent)
        self.setWindowTitle("Blind test")
        self.setModal(True)
        self.setFocusPolicy(Qt.StrongFocus)   # (the trial's keys)
        self.takes, self.sounds, self.rate = list(takes), list(sounds), sample_rate
        self.playback, self.folder, self.match = playback, Path(folder), match_loudness
        self.test: BlindTest | None = None
        self.audio: dict[str, np.ndarray] = {}
        self.position = 0              # where the next sound starts (the same place in every sound)
        self.stack = QStackedWidget()
        QVBoxLayout(self).addWidget(self.stack)
        self.stack.addWidget(self._setup_page())
        self.stack.addWidget(self._trial_page())
        self.stack.addWidget(self._result_page())
        self.resize(720, 520)

    # ---- pages ----------------------------------------------------------------------------------
    def _setup_page(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addWidget(wrapping_label("ABX: A and B are the two takes, in an order drawn at random; X is one of "
                                        "them. Say which X is, trial after trial. Preference: two sounds per trial, "
                                        "say which sounds better. Which take is which is shown when the test ends."))
        form = QFormLayout()
        self.kind = QComboBox()
        self.kind.addItem("ABX: can the difference be heard?", "abx")
        self.kind.addItem("Preference: which sounds better?", "preference")
        self.trials = QSpinBox()
        self.trials.setRange(4, 100)
        self.trials.setValue(DEFAULT_TRIALS)
        form.addRow("test", self.kind)
        form.addRow("trials", self.trials)
        layout.addLayout(form)
        self.start_button = _big("Start")
        self.start_button.clicked.connect(lambda: self.start())
        layout.addWidget(self.start_button)
        layout.addWidget(QLabel("Earlier tests"))
        self.history = QListWidget()
        layout.addWidget(self.history, 1)
        self._fill_history()
        return page

    def _trial_page(self) -> QWidget:
        page = QWidget()
        page.setFocusPolicy(Qt.NoFocus)
        layout = QVBoxLayout(page)
        self.trial_label = QLabel()
        self.trial_label.setAlignment(Qt.AlignCenter)
        font = self.trial_label.font()
        font.setPointSizeF(font.pointSizeF() * 1.4)
        self.trial_label.setFont(font)
        layout.addWidget(self.trial_label)
        self.play_row = QHBoxLayout()
        self.play_buttons: dict[str, QPushButton] = {}
        for slot in ("A", "B", "X", "1", "2"):
            b = _big(f"Play {slot}")
            b.clicked.connect(lambda _=False, s=slot: self.play(s))
            self.play_buttons[slot] = b
            self.play_row.addWidget(b)
            b.setVisible(slot in ("A", "B", "X"))   # (start() shows the test's own: a hidden one takes no width)
        layout.addLayout(self.play_row)
        controls = QHBoxLayout()
        self.stop_button, self.restart_button = QPushButton("Stop (Space)"), QPushButton("From the start (Home)")
        for b in (self.stop_button, self.restart_button):
            b.setMinimumHeight(HIT_TARGET)
            controls.addWidget(b)
        self.stop_button.clicked.connect(self.stop)
        self.restart_button.clicked.connect(self.from_start)
        layout.addLayout(controls)
        answers = QGridLayout()
        self.answer_buttons = {"left": _big(""), "right": _big("")}
        self.answer_buttons["left"].clicked.connect(lambda: self.answer("left"))
        self.answer_buttons["right"].clicked.connect(lambda: self.answer("right"))
        answers.addWidget(self.answer_buttons["left"], 0, 0)
        answers.addWidget(self.answer_buttons["right"], 0, 1)
        layout.addLayout(answers)
        self.hint = wrapping_label()
        layout.addWidget(self.hint)
        layout.addStretch(1)
        for b in page.findChildren(QPushButton):   # (Space must stop, not press the button with focus)
            b.setFocusPolicy(Qt.NoFocus)
        return page

    def _result_page(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        self.verdict = QLabel()
        font = self.verdict.font()
        font.setPointSizeF(font.pointSizeF() * 1.4)
        font.setBold(True)
        self.verdict.setFont(font)
        self.verdict.setWordWrap(True)
        layout.addWidget(self.verdict)
        self.reveal = wrapping_label()
        self.reveal.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.reveal)
        self.meaning = wrapping_label()
        layout.addWidget(self.meaning)
        layout.addStretch(1)
        row = QHBoxLayout()
        self.csv_button, self.json_button, self.again_button, self.close_button = (
            QPushButton("Export CSV..."), QPushButton("Export JSON..."), QPushButton("Another test"), QPushButton("Close"))
        for b in (self.csv_button, self.json_button, self.again_button, self.close_button):
            b.setMinimumHeight(HIT_TARGET)
            row.addWidget(b)
        self.csv_button.clicked.connect(lambda: self.export("csv"))
        self.json_button.clicked.connect(lambda: self.export("json"))
        self.again_button.clicked.connect(self._back_to_setup)
        self.close_button.clicked.connect(self.accept)
        layout.addLayout(row)
        return page

    # ---- the test -------------------------------------------------------------------------------
    def start(self, seed: int | None = None) -> BlindTest:
        """A new test; `seed` fixes the takes' order and the trials (tests), else it is drawn."""
        kind = self.kind.currentData()
        self.verdict.clear()   # (the last test's result, hidden from here on, named its takes)
        self.reveal.clear()
        seed = random.SystemRandom().randrange(2 ** 32) if seed is None else int(seed)
        # which take is A: drawn from the seed too (a second stream, so the trial order stays trial_order's)
        order = (0, 1) if random.Random(f"sides-{seed}").random() < 0.5 else (1, 0)
        sides = [self.takes[i] for i in order]
        gains = [matched_gain(self.sounds[i], self.rate) if self.match else 1.0 for i in order]
        self.audio = {"A": self.sounds[order[0]] * np.float32(gains[0]), "B": self.sounds[order[1]] * np.float32(gains[1])}
        self.test = BlindTest(kind, *[{"label": t.label, "take": t.id, "voice": t.voice, "placement": t.placement,
                                       "model": t.model} for t in sides],
                              trials=self.trials.value(), seed=seed,
                              gains_db=tuple(round(20 * float(np.log10(g)), 2) for g in gains))
        for slot, b in self.play_buttons.items():
            b.setVisible(slot in (("A", "B", "X") if kind == "abx" else ("1", "2")))
        left, right = (("X is A  (\u2190)", "X is B  (\u2192)") if kind == "abx"
                       else ("1 is better  (\u2190)", "2 is better  (\u2192)"))
        self.answer_buttons["left"].setText(left)
        self.answer_buttons["right"].setText(right)
        self.hint.setText(("Keys: A, B, X play" if kind == "abx" else "Keys: 1, 2 play")
                          + "; Space stops; Home: from the start; \u2190 / \u2192 answer. Every sound plays from "
                            "where the last one stopped.")
        self.stack.setCurrentIndex(1)
        self.setFocus()
        self._show_trial()
        return self.test

    def keyPressEvent(self, event) -> None:
        """The trial's keys (the trial page's buttons take no focus, so every key comes here)."""
        if self.test is None or self.test.finished or self.stack.currentIndex() != 1:
            super().keyPressEvent(event)
            return
        slots = ("A", "B", "X") if self.test.kind == "abx" else ("1", "2")
        key, text = event.key(), event.text().upper()
        if text in slots:
            self.play(text)
        elif key == Qt.Key_Space:
            self.stop()
        elif key == Qt.Key_Home:
            self.from_start()
        elif key in (Qt.Key_Left, Qt.Key_Right):
            self.answer("left" if key == Qt.Key_Left else "right")
        else:
            super().keyPressEvent(event)

    def _show_trial(self) -> None:
        t = self.test
        self.trial_label.setText(f"Trial {t.trial + 1} of {t.trials}")
        self.setWindowTitle(f"Blind test: trial {t.trial + 1} of {t.trials}")
        self.position = 0

    def play(self, slot: str) -> None:
        """The trial's sound for `slot` from the shared position (where the last sound was)."""
        if self.test is None or self.test.finished:
            return
        sound = self.audio[self.test.sound(slot)]
        if self.playback.audio.playing:
            self.position = self.playback.audio.position
        start = self.position if self.position < len(sound) else 0
        self.playback.play_blind(sound, start)

    def stop(self) -> None:
        if self.playback.audio.playing:
            self.position = self.playback.audio.position
        self.playback.stop()

    def from_start(self) -> None:
        self.position = 0
        if self.playback.audio.playing:
            self.playback.stop()

    def answer(self, side: str) -> None:
        if self.test is None or self.test.finished:
            return
        self.playback.stop()
        abx = self.test.kind == "abx"
        self.test.answer(("A" if side == "left" else "B") if abx else ("1" if side == "left" else "2"))
        if self.test.finished:
            self._finish()
        else:
            self._show_trial()

    def _finish(self) -> None:
        t = self.test
        t.save(self.folder)
        self.setWindowTitle("Blind test: result")
        self.verdict.setText(t.verdict)
        matched = (f"loudness matched: A {t.gains_db[0]:+.1f} dB, B {t.gains_db[1]:+.1f} dB" if self.match
                   else "loudness as made (not matched)")
        self.reveal.setText(f"A was {t.a['label']} ({t.a['voice']})\nB was {t.b['label']} ({t.b['voice']})\n"
                            f"seed {t.seed}; {matched}")
        self.meaning.setText("p is the chance of a result at least this good by guessing. Below 0.05: the difference "
                             "was heard (or the preference is real) for this listener; above it, this test did not "
                             "show a difference, which is not proof that there is none (16 trials find only clear "
                             "ones).")
        self.stack.setCurrentIndex(2)
        self._fill_history()
        self.finished_test.emit(t)

    def export(self, fmt: str, path: str | None = None) -> Path | None:
        if self.test is None:
            return None
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self, "Export the result", f"blind-test-{self.test.id}.{fmt}",
                                                  "CSV (*.csv)" if fmt == "csv" else "JSON (*.json)")
            if not path:
                return None
        path = Path(path)
        return self.test.export(path if path.suffix == f".{fmt}" else path.with_suffix(f".{fmt}"))

    def _back_to_setup(self) -> None:
        self.setWindowTitle("Blind test")
        self.stack.setCurrentIndex(0)

    def _fill_history(self) -> None:
        self.history.clear()
        problems: list[str] = []
        for t in reversed(saved_tests(self.folder, problems)):
            self.history.addItem(f"{t.verdict}   (A {t.a.get('label', '?')}, B {t.b.get('label', '?')})")
        for why in problems:   # (a damaged result file is listed, never in the way of the others)
            self.history.addItem(f"unreadable: {why}")

    def done(self, result: int) -> None:   # (closed in any way: nothing keeps playing)
        self.playback.stop()
        super().done(result)
