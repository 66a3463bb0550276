"""Live latency: per-frame stage costs against the real-time budget, prefill and TTFA, the figures
in words, and where each stage ran. During a take it shows the running take; afterwards the take
selected in the table (its own numbers, not the last generation's)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QVBoxLayout

from ..plots import LatencyPlot, StartupBars, legend_html
from .base import Panel, wrapping_label


class LatencyPanel(Panel):
    panel_id = "latency"

    def __init__(self, settings, budget_ms: float = 80.0):
        super().__init__(settings)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.legend = wrapping_label(name="legend")
        self.legend.setTextFormat(Qt.RichText)
        self.legend.setText(legend_html())
        self.chart = LatencyPlot(budget_ms)
        self.startup = StartupBars()
        self.title = wrapping_label(name="latency_title")
        self.stats = wrapping_label(name="stats")
        self.where = wrapping_label(name="where")   # an accelerator mode never runs silently on the CPU
        layout.addWidget(self.title)
        layout.addWidget(self.legend)
        layout.addWidget(self.chart, 3)
        row = QHBoxLayout()
        row.addWidget(self.startup, 2)
        row.addWidget(self.stats, 3)
        layout.addLayout(row)
        layout.addWidget(self.where)
        self._ticks = 0
        self._error_color = "#b00020"

    def show_live(self, timings, elapsed_s: float) -> None:
        """The running take (called at most ~10 times a second)."""
        t = timings
        self.chart.show_timings(t.talker_ms, t.code_predictor_ms, t.decoder_ms)
        self.startup.show_values(t.prefill_ms or None, t.ttfa_ms or None)
        if self._ticks % 2 == 0:   # words twice a second (a label's new text re-lays the window out)
            self.title.setText(f"generating: {t.frames} frames ({t.audio_seconds:.2f} s of audio) in {elapsed_s:.1f} s")
            self.stats.setText(per_frame_text(t.mean_ms("talker"), t.mean_ms("code_predictor"), t.mean_ms("decoder"),
                                              t.rtf if t.frames else None, None))
        self._ticks += 1

    def show_take(self, take) -> None:
        t, f = take.timings, take.frame_ms
        self.title.setText(f"take: {take.label}  [{take.stop_reason or '?'}]")
        self.chart.show_timings(f.get("talker", []), f.get("code_predictor", []), f.get("decoder", []))
        self.startup.show_values(t.get("prefill_ms"), t.get("ttfa_ms"))
        self.stats.setText(per_frame_text(t.get("talker_ms", 0), t.get("code_predictor_ms", 0), t.get("decoder_ms", 0),
                                          t.get("rtf"), take.peak_memory_mb or None))
        self.show_where(take.where)

    def apply_colors(self, colors) -> None:
        self.chart.apply_colors(colors)
        self.startup.apply_colors(colors)
        self._error_color = colors.error

    def show_where(self, where: dict, problems: list[str] | None = None) -> None:
        problems = problems if problems is not None else [f"{s}: {line}" for s, line in where.items() if "fall" in line]
        text = "\n".join(f"{stage.replace('_', ' ')} on {line}" for stage, line in where.items())
        if problems:   # a stage scheduled onto the accelerator ran ops on the CPU
            text = "NOT ALL ON THE ACCELERATOR: " + "; ".join(problems) + "\n" + text
        self.where.setStyleSheet(f"color: {self._error_color};" if problems else "")
        self.where.setText(text)


def per_frame_text(talker: float, cp: float, decoder: float, rtf: float | None, peak_mb: float | None) -> str:
    total = talker + cp + decoder
    parts = [f"per frame: talker {talker:.1f} ms, code predictor {cp:.1f} ms, decoder {decoder:.1f} ms "
             f"= {total:.1f} ms of the 80 ms budget"]
    if rtf is not None and rtf == rtf:
        parts.append(f"RTF {rtf:.2f}" + (" (faster than real time)" if rtf < 1 else " (slower than real time)"))
    if peak_mb:
        parts.append(f"peak memory {peak_mb:.0f} MB")
    return "\n".join(parts)
