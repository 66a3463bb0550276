"""Plots: per-frame stacked latency against the 80 ms real-time budget, and a take's waveform and
spectrogram with a playhead. Curves are redrawn from preallocated arrays (pyqtgraph)."""
from __future__ import annotations

import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

STAGE_COLORS = {"talker": (70, 130, 220), "code_predictor": (230, 150, 40), "decoder": (90, 180, 90)}


class LatencyPlot(pg.PlotWidget):
    """Stacked bars per frame: talker, code predictor, decoder (ms); the line is the 80 ms budget."""

    def __init__(self, budget_ms: float = 80.0):
        super().__init__()
        self.setBackground("w")
        self.setLabel("left", "ms per frame")
        self.setLabel("bottom", "frame")
        self.addLegend(offset=(-10, 10), brush=(255, 255, 255, 200))
        self.budget = pg.InfiniteLine(pos=budget_ms, angle=0, pen=pg.mkPen((200, 40, 40), width=2, style=Qt.DashLine),
                                      label="real time (80 ms)", labelOpts={"position": 0.05, "color": (200, 40, 40)})
        self.addItem(self.budget)
        self.bars = {}
        for stage, color in STAGE_COLORS.items():
            bar = pg.BarGraphItem(x=[], height=[], y0=[], width=0.8, brush=color, name=stage.replace("_", " "))
            self.addItem(bar)
            self.bars[stage] = bar

    def show_timings(self, talker: list[float], code_predictor: list[float], decoder: list[float]) -> None:
        n = min(len(talker), len(code_predictor), len(decoder))
        x = np.arange(n)
        base = np.zeros(n)
        for stage, values in (("talker", talker), ("code_predictor", code_predictor), ("decoder", decoder)):
            h = np.asarray(values[:n], float)
            self.bars[stage].setOpts(x=x, height=h, y0=base.copy(), width=0.8)
            base += h


class WaveformView(QWidget):
    """Waveform and spectrogram of one take; the playhead follows playback; a click seeks."""
    seek_requested = Signal(float)   # seconds

    def __init__(self):
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.wave = pg.PlotWidget(background="w")
        self.wave.setLabel("bottom", "s")
        self.wave.setMouseEnabled(y=False)
        self.curve = self.wave.plot(pen=pg.mkPen((40, 40, 40)))
        self.curve.setDownsampling(auto=True, method="peak")
        self.curve.setClipToView(True)
        self.spec = pg.PlotWidget(background="w")
        self.spec.setLabel("left", "kHz")
        self.image = pg.ImageItem()
        self.spec.addItem(self.image)
        self.spec.setXLink(self.wave)
        self.heads = [pg.InfiniteLine(pos=0, angle=90, pen=pg.mkPen((200, 40, 40), width=1)) for _ in range(2)]
        self.wave.addItem(self.heads[0])
        self.spec.addItem(self.heads[1])
        layout.addWidget(self.wave, 1)
        layout.addWidget(self.spec, 1)
        self.sample_rate = 24000
        self.wave.scene().sigMouseClicked.connect(self._clicked)

    def _clicked(self, event) -> None:
        if event.button() == Qt.LeftButton:
            x = self.wave.plotItem.vb.mapSceneToView(event.scenePos()).x()
            if x >= 0:
                self.seek_requested.emit(float(x))

    def show_audio(self, audio: np.ndarray, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        t = np.arange(len(audio)) / sample_rate
        self.curve.setData(t, audio)
        self.image.setImage(spectrogram(audio), autoLevels=True)
        duration = len(audio) / sample_rate
        self.image.setRect(0, 0, duration, sample_rate / 2000)
        self.wave.setXRange(0, max(duration, 1e-3), padding=0.01)
        self.spec.setYRange(0, sample_rate / 2000, padding=0)
        self.set_playhead(0)

    def set_playhead(self, sample: int) -> None:
        for head in self.heads:
            head.setValue(sample / self.sample_rate)


def spectrogram(audio: np.ndarray, n_fft: int = 512, hop: int = 240) -> np.ndarray:
    """log-magnitude STFT, [time, frequency] for ImageItem."""
    if len(audio) < n_fft:
        return np.zeros((1, n_fft // 2 + 1), np.float32)
    frames = np.lib.stride_tricks.sliding_window_view(audio, n_fft)[::hop] * np.hanning(n_fft)
    mag = np.abs(np.fft.rfft(frames, axis=-1))
    return np.log10(mag + 1e-5).astype(np.float32)
