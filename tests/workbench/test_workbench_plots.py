"""The plots alone: the latency chart keeps the budget in view and aggregates long takes; the take
view draws only what is new and ends equal to the whole take drawn at once."""
from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("PySide6")

from kazeia.app.plots import LatencyPlot, TakeView, spectrogram  # noqa: E402


def test_latency_chart_keeps_the_budget_visible_and_aggregates():
    plot = LatencyPlot(80.0)
    n = 850
    talker = np.full(n, 10.0)
    talker[400] = 5000.0   # one stalled frame must not flatten the rest
    plot.show_timings(talker, np.full(n, 20.0), np.full(n, 15.0))
    top = plot.getViewBox().viewRange()[1][1]
    assert 80 * 1.2 <= top < 500 and plot.clipped == 1
    assert len(plot.bars["talker"].opts["x"]) <= LatencyPlot.MAX_BARS   # min/median/max per column
    assert max(np.asarray(plot.bars["talker"].opts["height"]) + plot.bars["talker"].opts["y0"]) <= top
    assert len(plot.outliers.data) == 1   # the clipped frame is marked
    assert "median" in plot.getAxis("bottom").labelText


def test_take_view_draws_only_new_audio_and_matches_the_whole_take(qtbot):
    view = TakeView(24000)
    qtbot.addWidget(view)
    rng = np.random.default_rng(0)
    audio = (0.3 * rng.standard_normal(24000 * 3 + 1234)).astype(np.float32)
    for start in range(0, len(audio), 7680):   # streamed in 4-frame chunks
        view.append(audio[start:start + 7680])
        view.flush()
    view.flush(final=True)
    images = [item for plot, item in view._tiles if plot is view.spec]
    columns = np.concatenate([img.image for img in images])[:len(spectrogram(audio))]
    assert np.allclose(columns, spectrogram(audio), atol=1e-3)
    curves = [item for plot, item in view._tiles if plot is view.wave]
    assert len(curves) == 4   # one-second tiles: a redraw touches only the last one
    x, y = curves[1].getData()
    assert len(x) <= 2 * (24000 // TakeView.BLOCK + 1) and y.max() <= audio[24000:48000].max()
