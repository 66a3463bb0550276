"""Generate, Speak as I type, Stop, Play and A/B: the controls an operator needs whatever page is shown, on screen in
every layout, and "?" for what the tooltips say (a finger never hovers)."""
from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QPushButton, QToolButton, QWidget

from ..touch import TapForHelp


class TransportBar(QWidget):
    panel_id = "transport"

    def __init__(self):
        super().__init__()
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 0, 4, 0)
        self.generate_button = QPushButton("Generate (Ctrl+Enter)")
        self.type_button = QPushButton("Speak as I type")
        self.type_button.setCheckable(True)
        self.type_button.setToolTip("each word is spoken as you type on after it, as the whole text would be, as a language model's "
                                    "answer is heard through the server's live sockets; press again to finish "
                                    "(the rest is spoken and kept as a take)")
        self.stop_button = QPushButton("Stop (Esc)")
        self.stop_button.setEnabled(False)
        self.play_button = QPushButton("Play / stop (Space)")
        self.play_button.setToolTip("play the selected take, or stop playback")
        self.ab_button = QPushButton("A/B (B)")
        self.ab_button.setToolTip("with two takes selected: play A; pressed again while playing, switch between "
                                  "A and B at the same position")
        self.help_button = QToolButton()
        self.help_button.setText("?")
        self.help_button.setToolTip("tap here, then on any control, to read what it does")
        self.help = TapForHelp(self)
        self.help_button.clicked.connect(self.help.start)
        for w in (self.generate_button, self.type_button, self.stop_button, self.play_button, self.ab_button):
            row.addWidget(w)
        row.addStretch(1)
        row.addWidget(self.help_button)
