"""Plots: per-frame stacked latency against the 80 ms real-time budget, prefill and TTFA bars, and a
take's waveform and spectrogram. Everything here is cheap to redraw while a take runs: the latency
chart draws at most MAX_BARS bars (min/median/max per column beyond that), and the take view only
ever computes and uploads the audio that is new, in one-second tiles."""
from __future__ import annotations

import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

STAGES = ("talker", "code_predictor", "decoder")
STAGE_COLORS = {"talker": (70, 130, 220), "code_predictor": (230, 150, 40), "decoder": (90, 180, 90)}
OUTLIER = (200, 40, 40)
COLORMAP = pg.colormap.get("inferno")


def _plain_axes(plot: pg.PlotWidget) -> None:
    """No "(x0.001)" scaling: seconds, ms and kHz stay as labelled."""
    for name in ("left", "bottom"):
        plot.getAxis(name).enableAutoSIPrefix(False)


def color_plot(plot: pg.PlotWidget, colors) -> None:
    """A plot in the theme's colours (pyqtgraph does not follow the Qt palette)."""
    plot.setBackground(colors.base)
    for name in ("left", "bottom"):
        axis = plot.getAxis(name)
        axis.setPen(pg.mkPen(colors.muted))
        axis.setTextPen(pg.mkPen(colors.text))


def aggregate(values: np.ndarray, columns: int) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """[stages, n] per-frame values -> (x centres, bar width, median per stage [stages, m], (min, max)
    of the totals [2, m]) with m <= columns: what a pixel column can show of many frames. Frames are
    binned k at a time (k = ceil(n / columns)); the last bin may hold fewer."""
    n = values.shape[1]
    total = values.sum(axis=0)
    if n <= columns:
        return np.arange(n, dtype=float), 0.8, values, np.stack([total, total])
    k = -(-n // columns)
    m = -(-n // k)
    padded = np.full((values.shape[0] + 1, m * k), np.nan)
    padded[:-1, :n], padded[-1, :n] = values, total
    bins = padded.reshape(len(padded), m, k)
    median = np.nanmedian(bins[:-1], axis=2)
    spread = np.stack([np.nanmin(bins[-1], axis=1), np.nanmax(bins[-1], axis=1)])
    starts = np.arange(m) * k
    return starts + (np.minimum(starts + k, n) - starts - 1) / 2, 0.9 * k, median, spread


def step_up(value: float, step: float) -> float:
    """`value` rounded up to a multiple of `step`: ranges that change rarely keep the axes' ticks
    (pyqtgraph recomputes them on every range change)."""
    return step * max(1.0, np.ceil(value / step))


def robust_top(totals: np.ndarray, budget_ms: float) -> float:
    """A y-range that always shows the budget line and is not flattened by one slow frame."""
    if not len(totals):
        return 1.25 * budget_ms
    return max(1.25 * budget_ms, step_up(1.15 * float(np.percentile(totals, 90)), 20.0))


class LatencyPlot(pg.PlotWidget):
    """Stacked bars per frame: talker, code predictor, decoder (ms); the dashed line is the 80 ms
    budget. Frames above the range are clipped and marked with a red triangle."""
    MAX_BARS = 300

    def __init__(self, budget_ms: float = 80.0):
        super().__init__()
        self.budget_ms = budget_ms
        self.setLabel("left", "ms per frame")
        self.setLabel("bottom", "frame")
        _plain_axes(self)
        self.setMouseEnabled(x=False, y=False)   # (the legend is a label above the plot: legend_html)
        self.budget = pg.InfiniteLine(pos=budget_ms, angle=0, pen=pg.mkPen(OUTLIER, width=2, style=Qt.DashLine),
                                      label=f"real time ({budget_ms:.0f} ms)",
                                      labelOpts={"position": 0.98, "color": OUTLIER, "anchors": [(1, 1), (1, 1)]})
        self.addItem(self.budget)
        self.bars = {}
        for stage in STAGES:
            bar = pg.BarGraphItem(x=[], height=[], y0=[], width=0.8, brush=STAGE_COLORS[stage])
            self.addItem(bar)
            self.bars[stage] = bar
        self.spread = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), pen=pg.mkPen((60, 60, 60)))
        self.addItem(self.spread)
        self.outliers = pg.ScatterPlotItem(symbol="t", size=9, brush=OUTLIER, pen=None)
        self.addItem(self.outliers)
        self.frames = 0
        self.clipped = 0   # frames above the visible range
        self._label = "frame"
        self.show_timings([], [], [])

    def apply_colors(self, colors) -> None:
        color_plot(self, colors)
        self.budget.label.setColor(colors.error)
        self.budget.setPen(pg.mkPen(colors.error, width=2, style=Qt.DashLine))
        self.spread.setData(pen=pg.mkPen(colors.muted))

    def show_timings(self, talker, code_predictor, decoder) -> None:
        n = min(len(talker), len(code_predictor), len(decoder))
        values = np.array([np.asarray(v[:n], float) for v in (talker, code_predictor, decoder)]).reshape(3, n)
        x, width, heights, spread = aggregate(values, self.MAX_BARS)
        totals = values.sum(axis=0)
        top = robust_top(totals, self.budget_ms)
        base = np.zeros(len(x))
        for stage, h in zip(STAGES, heights):   # stacked, each clipped to the visible range
            y0 = np.minimum(base, top)
            self.bars[stage].setOpts(x=x, height=np.minimum(base + h, top) - y0, y0=y0, width=width)
            base = base + h
        aggregated = n > self.MAX_BARS
        if aggregated:
            lo, hi = np.minimum(spread[0], top), np.minimum(spread[1], top)
            self.spread.setData(x=x, y=(lo + hi) / 2, height=hi - lo, beam=0)
        else:
            self.spread.setData(x=np.zeros(0), y=np.zeros(0), height=np.zeros(0))
        over = spread[1] > top
        self.outliers.setData(x=x[over], y=np.full(int(over.sum()), top * 0.97))
        self.frames, self.clipped = n, int((totals > top).sum())
        label = f"frame (bars: median of {-(-n // len(x))} frames, whiskers: min-max)" if aggregated else "frame"
        if label != self._label:   # (a new label re-lays the plot out)
            self._label = label
            self.setLabel("bottom", label)
        self.setYRange(0, top * 1.02, padding=0)
        self.setXRange(-0.5, step_up(n, 25 if n <= 100 else 250) - 0.5, padding=0.01)


def legend_html() -> str:
    """The latency chart's legend, as a label's rich text: a legend inside the plot covered its own
    real-time line's label."""
    return "&nbsp;&nbsp;".join(f'<span style="color: rgb{STAGE_COLORS[s]}">&#9632;</span> {s.replace("_", " ")}'
                               for s in STAGES)


class StartupBars(pg.PlotWidget):
    """Prefill (the prompt through the talker) and TTFA (request to first audio) as two bars, their
    values in the axis labels (always readable, however long the bars). The ms axis has two ticks,
    0 and its end, so its numbers never run together however narrow the plot."""

    def __init__(self):
        super().__init__()
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        _plain_axes(self)
        self.setLabel("bottom", "ms")
        self.bar = pg.BarGraphItem(x0=[0, 0], y=[0, 1], height=0.6, width=[0, 0],
                                   brushes=[(140, 90, 190), (120, 120, 120)])
        self.addItem(self.bar)
        self.setFixedHeight(90)
        self.show_values(None, None)

    def show_values(self, prefill_ms: float | None, ttfa_ms: float | None) -> None:
        if (prefill_ms, ttfa_ms) == getattr(self, "_shown", None):
            return   # known from the first frame on: nothing to redraw during the take
        self._shown = (prefill_ms, ttfa_ms)
        values = [v or 0.0 for v in (prefill_ms, ttfa_ms)]
        self.bar.setOpts(x0=[0, 0], y=[0, 1], height=0.6, width=values)
        text = ["-" if v is None else f"{v:.0f} ms" if v >= 10 else f"{v:.2f} ms" for v in (prefill_ms, ttfa_ms)]
        self.getAxis("left").setTicks([[(0, f"prefill {text[0]}"), (1, f"TTFA {text[1]}")]])
        end = step_up(max(max(values), 100), 100)
        self.getAxis("bottom").setTicks([[(0, "0"), (end / 2, f"{end / 2:.0f}")], []])
        self.setXRange(0, end, padding=0.02)
        self.setYRange(-0.6, 1.6, padding=0)

    def apply_colors(self, colors) -> None:
        color_plot(self, colors)


def spectrogram_columns(audio: np.ndarray, n_fft: int = 512, hop: int = 240) -> np.ndarray:
    """dB-full-scale magnitude STFT frames [time, frequency] (a full-scale sine peaks at 0 dB)."""
    if len(audio) < n_fft:
        return np.zeros((0, n_fft // 2 + 1), np.float32)
    frames = np.lib.stride_tricks.sliding_window_view(audio, n_fft)[::hop] * np.hanning(n_fft)
    mag = np.abs(np.fft.rfft(frames, axis=-1)) / (n_fft / 4)
    return (20 * np.log10(mag + 1e-5)).astype(np.float32)


def spectrogram(audio: np.ndarray, n_fft: int = 512, hop: int = 240) -> np.ndarray:
    return spectrogram_columns(np.asarray(audio, np.float32), n_fft, hop)


class TakeView(QWidget):
    """Waveform (peak envelope) and spectrogram of one take, built incrementally: `append` stores
    samples, `flush` draws only what arrived since the last flush, into one-second tiles, so the cost
    of a redraw never grows with the take's length. The playhead follows playback; a click seeks."""
    seek_requested = Signal(float)   # seconds
    BLOCK = 120       # samples per envelope point pair (5 ms)
    N_FFT, HOP = 512, 240
    LEVELS = (-90.0, 0.0)   # dBFS range of the spectrogram colours

    def __init__(self, sample_rate: int = 24000):
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.wave = pg.PlotWidget()
        self.wave.setMinimumHeight(90)
        self.wave.setLabel("bottom", "s")
        self.wave.setLabel("left", "amplitude")
        self.wave.getAxis("left").setTicks([[(-1, "-1"), (0, "0"), (1, "1")], []])   # readable at 90 px high
        self.wave.setMouseEnabled(x=True, y=False)
        self.spec = pg.PlotWidget()
        self.spec.setMinimumHeight(90)
        self.spec.setLabel("left", "kHz")
        self.spec.setMouseEnabled(x=True, y=False)
        for plot in (self.wave, self.spec):
            _plain_axes(plot)
        self.spec.setXLink(self.wave)
        self.heads = [pg.InfiniteLine(pos=0, angle=90, pen=pg.mkPen(OUTLIER, width=1)) for _ in range(2)]
        self.wave.addItem(self.heads[0])
        self.spec.addItem(self.heads[1])
        layout.addWidget(self.wave, 1)
        layout.addWidget(self.spec, 1)
        self.wave.scene().sigMouseClicked.connect(self._clicked)
        self._tiles: list = []
        self._wave_pen = pg.mkPen((40, 40, 40))
        self.clear(sample_rate)

    def apply_colors(self, colors) -> None:
        for plot in (self.wave, self.spec):
            color_plot(plot, colors)
        self._wave_pen = pg.mkPen(colors.wave)
        for plot, item in self._tiles:
            if isinstance(item, pg.PlotDataItem):
                item.setPen(self._wave_pen)

    # -- data --------------------------------------------------------------------------------------
    def clear(self, sample_rate: int | None = None) -> None:
        self.sample_rate = sample_rate or self.sample_rate
        self.shown = None   # the id of the take shown, if it is a kept one
        for plot, item in self._tiles:
            plot.removeItem(item)
        self._tiles = []
        self._samples = np.zeros(self.sample_rate, np.float32)   # grows by doubling
        self._count = 0      # samples appended
        self._enveloped = 0  # samples already in the envelope
        self._analysed = 0   # samples already past the spectrogram's hop position
        self._curve = self._image = None
        self._tile_start = -1
        self._env_x = self._env_y = None
        self._cols = None
        self._cols_used = 0
        self.wave.setXRange(0, 1, padding=0.01)
        self.wave.setYRange(-1, 1, padding=0.02)
        self.spec.setYRange(0, self.sample_rate / 2000, padding=0)

    def append(self, audio: np.ndarray) -> None:
        n = len(audio)
        if self._count + n > len(self._samples):
            grown = np.zeros(max(2 * len(self._samples), self._count + n), np.float32)
            grown[:self._count] = self._samples[:self._count]
            self._samples = grown
        self._samples[self._count:self._count + n] = audio
        self._count += n

    @property
    def duration(self) -> float:
        return self._count / self.sample_rate

    def show_audio(self, audio: np.ndarray, sample_rate: int) -> None:
        self.clear(sample_rate)
        self.append(np.asarray(audio, np.float32))
        self.flush(final=True)
        self.set_playhead(0)

    def flush(self, final: bool = False) -> None:
        """Draws the samples appended since the last flush (`final`: the partial last block too)."""
        tile = self.sample_rate   # samples per tile
        while True:
            end = self._count if final else self._count - self._count % self.BLOCK
            end = min(end, (self._enveloped // tile + 1) * tile)   # never past the current tile
            if end <= self._enveloped:
                break
            self._draw_envelope(self._enveloped, end, tile)
            self._enveloped = end
        while self._analysed + self.N_FFT <= self._count:
            stop = self._count - self.N_FFT + 1   # frames start at multiples of HOP below this
            start_frame, stop_frame = self._analysed // self.HOP, (stop - 1) // self.HOP + 1
            if stop_frame <= start_frame:
                break
            a = start_frame * self.HOP
            b = (stop_frame - 1) * self.HOP + self.N_FFT
            self._draw_columns(start_frame, spectrogram_columns(self._samples[a:b], self.N_FFT, self.HOP))
            self._analysed = stop_frame * self.HOP
        length = self.duration if final else step_up(self.duration, 5.0)   # while growing: 5 s steps
        self.wave.setXRange(0, max(length, 1e-3), padding=0.01)

    def _draw_envelope(self, start: int, end: int, tile: int) -> None:
        t0 = start // tile
        if t0 != self._tile_start:   # a new one-second tile
            self._tile_start = t0
            points = 2 * (tile // self.BLOCK + 1)
            self._env_x, self._env_y = np.zeros(points), np.zeros(points)
            self._env_used = 0
            self._curve = pg.PlotDataItem(pen=self._wave_pen)
            self.wave.addItem(self._curve)
            self._tiles.append((self.wave, self._curve))
        seg = self._samples[start:end]
        blocks = -(-len(seg) // self.BLOCK)
        padded = np.zeros(blocks * self.BLOCK, np.float32)
        padded[:len(seg)] = seg
        padded[len(seg):] = seg[-1] if len(seg) else 0
        b = padded.reshape(blocks, self.BLOCK)
        lo, hi = b.min(axis=1), b.max(axis=1)
        x = (start + np.arange(blocks) * self.BLOCK) / self.sample_rate
        k = self._env_used
        self._env_x[k:k + 2 * blocks:2], self._env_x[k + 1:k + 2 * blocks:2] = x, x
        self._env_y[k:k + 2 * blocks:2], self._env_y[k + 1:k + 2 * blocks:2] = lo, hi
        self._env_used += 2 * blocks
        self._curve.setData(self._env_x[:self._env_used], self._env_y[:self._env_used])

    def _draw_columns(self, first: int, cols: np.ndarray) -> None:
        per_tile = self.sample_rate // self.HOP
        while len(cols):
            tile, offset = divmod(first, per_tile)
            if self._image is None or tile != self._image_tile:
                self._image_tile = tile
                self._cols = np.full((per_tile, cols.shape[1]), self.LEVELS[0], np.float32)
                self._image = pg.ImageItem(levels=self.LEVELS)
                self._image.setColorMap(COLORMAP)
                self._image.setRect(tile * per_tile * self.HOP / self.sample_rate, 0,
                                    per_tile * self.HOP / self.sample_rate, self.sample_rate / 2000)
                self.spec.addItem(self._image)
                self._tiles.append((self.spec, self._image))
            n = min(len(cols), per_tile - offset)
            self._cols[offset:offset + n] = cols[:n]
            self._image.setImage(self._cols, autoLevels=False, levels=self.LEVELS)
            first, cols = first + n, cols[n:]

    # -- playhead ----------------------------------------------------------------------------------
    def _clicked(self, event) -> None:
        if event.button() == Qt.LeftButton:
            x = self.wave.plotItem.vb.mapSceneToView(event.scenePos()).x()
            if x >= 0:
                self.seek_requested.emit(float(x))

    def set_playhead(self, sample: int) -> None:
        for head in self.heads:
            head.setValue(sample / self.sample_rate)
