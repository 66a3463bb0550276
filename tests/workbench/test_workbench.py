"""The workbench window, headless (offscreen; scripts/test.sh runs every workbench test again under
Xvfb at 1280x800): takes streamed live with the GUI thread's own cost measured, latencies shown equal
to the engine's, stop within a frame, threads and placement changes applied to the next take and
recorded as they ran, where each stage ran, errors in a banner, settings saved when changed, a
checkpoint folder converted with progress, Ctrl+C, `demo` by name. The panels have their own files
(test_workbench_<panel>.py); screenshots go to tests/artifacts/."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import QSettings, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from kazeia.app.panels.takes import COLUMNS  # noqa: E402
from support.workbench import (ACCEL_TIMEOUT_MS, ALL_CPU, ALL_SCHED, TIMEOUT_MS, JobProgress,  # noqa: E402
                               RealTimePacedStream, generate, make_window, screenshot)
from support.workbench import accel_window, window, workdir  # noqa: E402,F401 (fixtures)

def test_generate_streams_and_keeps_a_take(qtbot, window, monkeypatch):
    # paced at 2x real time (1.6 s for 40 frames): the demo model alone can finish inside one display
    # tick on a fast machine, and then the live view has nothing to draw while frames arrive
    from kazeia.engine import Engine
    real_take = Engine.open_take
    monkeypatch.setattr(Engine, "open_take",
                        lambda self, *a, **k: RealTimePacedStream(real_take(self, *a, **k), speed=2))
    assert "RANDOM WEIGHTS" in window.backend.model_label.text()
    screenshot(window, "workbench_idle")
    chunks, ticks, shown = [], [], []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(10)

    def on_chunk(chunk):
        chunks.append(chunk.first_frame)
        shown.append(window.latency.chart.frames)
        if chunk.first_frame == 9:
            screenshot(window, "workbench_streaming")
    watch = JobProgress(window.controller, "take", on_chunk)  # noqa: F841 (kept alive while the take runs)
    start = time.perf_counter()
    result = generate(qtbot, window, frames=40)
    elapsed_ms = 1000 * (time.perf_counter() - start)
    timer.stop()
    assert chunks == [0, *range(1, 40, 4)] and result.stop_reason == "limit"   # frame 0 alone, then 4 per launch
    assert max(shown) > 0   # the live view drew frames while they arrived (on its display timer)
    # the GUI thread kept running while the engine worked: a blocked one coalesces its ticks into one
    assert len(ticks) >= max(3, 0.3 * elapsed_ms / 10), (len(ticks), elapsed_ms)
    take = window.store.takes[0]
    assert np.array_equal(window.store.audio(take), result.audio)
    assert take.sampling["seed"] == 0 and take.request["speaker"] == window.voice.speaker.currentText()
    assert take.placement == ALL_CPU and take.threads == window.controller.engine.threads
    assert len(take.frame_ms["decoder"]) == 40 and take.timings["prefill_ms"] > 0 and take.peak_memory_mb > 0
    assert window.latency.chart.frames == 40 and "budget" in window.latency.stats.text()
    assert window.takes.proxy.rowCount() == 1 and window.take_view.duration == pytest.approx(40 * 0.08)
    screenshot(window, "workbench_finished")


@pytest.mark.slow
def test_gui_thread_cost_of_a_30_s_take_is_bounded(qtbot, window, monkeypatch, report):
    """time.thread_time on the GUI thread over a 30 s take delivered at real-time pace."""
    from kazeia.engine import Engine
    real_take = Engine.open_take
    monkeypatch.setattr(Engine, "open_take", lambda self, *a, **k: RealTimePacedStream(real_take(self, *a, **k)))
    window.sampling.play_live.setChecked(False)
    frames = 375   # 30 s of audio (greedy: the demo model runs to the limit)
    window.sampling.greedy.setChecked(True)
    window.sampling.max_frames.setValue(frames)
    with qtbot.waitSignal(window.presenter.core.take_finished, timeout=600_000) as blocker:
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        assert window.presenter.core.generate()
    gui_cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    assert len(blocker.args[0].codes) == frames and wall >= 30
    share = gui_cpu / wall
    report(f"workbench GUI thread during a 30 s take at real-time pace ({QApplication.platformName()}): "
           f"{gui_cpu:.2f} s CPU in {wall:.1f} s = {100 * share:.1f}% of one core")
    assert share <= 0.10, f"the GUI thread used {100 * share:.1f}% of a core"


def test_latencies_shown_match_the_engine_alone(qtbot, window, report):
    """The same greedy request in the window (drawn live, as fast as the engine goes: the window's
    busiest case) and on the engine alone, twice around it; per-stage ms per frame compared."""
    from kazeia.engine import Engine, Request
    window.sampling.play_live.setChecked(False)
    window.sampling.greedy.setChecked(True)
    window.sampling.max_frames.setValue(200)
    job = window.presenter.core.job()
    alone = Engine.load(window.info.path, threads=job.threads)

    def run_alone():
        stream = alone.open_take(Request(job.text, speaker=job.speaker, language=job.language, sampling=job.sampling))
        for _ in stream:
            pass
        return stream.result
    runs = [run_alone()]
    with qtbot.waitSignal(window.presenter.core.take_finished, timeout=600_000) as blocker:
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        assert window.presenter.core.generate()
    gui_cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    qtbot.wait(20)
    runs.append(run_alone())
    take = window.store.takes[-1]
    stages = ("talker", "code_predictor", "decoder")
    alone_ms = {s: float(np.mean([r.timings.mean_ms(s) for r in runs])) for s in stages}
    ratios = {s: take.timings[f"{s}_ms"] / alone_ms[s] for s in stages}
    total = sum(take.timings[f"{s}_ms"] for s in stages) / sum(alone_ms.values())
    report(f"workbench per-stage ms / engine alone ({job.threads} threads, 200 frames, GUI thread "
           f"{100 * gui_cpu / wall:.0f}% of a core at full speed): "
           + ", ".join(f"{s} {r:.2f}" for s, r in ratios.items()) + f", all stages {total:.2f}")
    assert np.array_equal(blocker.args[0].codes, runs[0].codes)   # the same request
    assert total <= 1.5   # a loose bound on a shared machine; the ratio itself is in the summary


def test_stop_cancels_within_a_frame_and_marks_the_take(qtbot, window):
    window.sampling.max_frames.setValue(400)
    made = []

    def on_chunk(chunk):
        if not made:
            made.append(chunk.timings.frames)
            window.presenter.core.stop()
            made.append(window.controller.take.stream._timings.frames)   # frames finished when Stop was pressed
    watch = JobProgress(window.controller, "take", on_chunk)  # noqa: F841
    with qtbot.waitSignal(window.presenter.core.take_finished, timeout=TIMEOUT_MS) as blocker:
        window.presenter.core.generate()
    result = blocker.args[0]
    assert result.stop_reason == "cancelled"
    assert len(result.codes) <= made[1] + 1 < 400   # at most one frame after Stop
    qtbot.waitUntil(lambda: window.generate_button.isEnabled() and not window.stop_button.isEnabled())
    stop_column = COLUMNS.index("stop")
    assert window.takes.proxy.index(0, stop_column).data() == "CANCELLED"


def test_errors_show_in_a_banner_that_clears_on_success(qtbot, window, workdir):
    bad = workdir / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    with qtbot.waitSignal(window.error_shown, timeout=TIMEOUT_MS):
        window.presenter.core.load_model(str(bad))
    assert window.banner.isVisible() and "cannot open" in window.banner_text.text()
    window.text.setPlainText("   ")
    with qtbot.waitSignal(window.error_shown, timeout=TIMEOUT_MS):
        window.presenter.core.generate()
    assert window.banner.isVisible() and "text is empty" in window.banner_text.text()
    assert any("text is empty" in m for m in window.session.messages)   # the history keeps it
    window.text.setPlainText("Still alive after errors.")
    assert generate(qtbot, window, frames=3).stop_reason == "limit"
    assert not window.banner.isVisible()


@pytest.mark.accel
def test_threads_and_placement_apply_to_the_next_take_as_they_ran(qtbot, accel_window):
    window = accel_window
    """A change made while a take runs is queued behind it: that take records what it ran with,
    the next one the new values (read from the engine, not from the combo boxes)."""
    if window.backend.threads.maximum() < 2:
        pytest.skip("one core: no other thread count to switch to")
    before = window.controller.engine.threads
    after = 2 if before == 1 else 1
    window.sampling.max_frames.setValue(60)
    changed = []

    def on_chunk(chunk):
        if not changed:   # mid-take
            changed.append(1)
            window.backend.threads.setValue(after)
            window.backend.set_placement(ALL_SCHED)
    watch = JobProgress(window.controller, "take", on_chunk)
    with qtbot.waitSignal(window.presenter.core.take_finished, timeout=TIMEOUT_MS):
        window.presenter.core.generate()
    window.controller.submitted.disconnect(watch._submitted)
    first = window.store.takes[-1]
    assert first.threads == before and first.placement == ALL_CPU
    generate(qtbot, window, frames=4, timeout_ms=ACCEL_TIMEOUT_MS)
    second = window.store.takes[-1]
    assert second.threads == after and second.placement == ALL_SCHED
    assert window.controller.engine.threads == after and window.presenter.core.applied.threads == after


@pytest.mark.slow
def test_window_fits_a_1280_screen_after_ten_takes(qtbot, window):
    screen = QApplication.primaryScreen().availableGeometry()
    for i in range(10):
        generate(qtbot, window, frames=2, seed=i, text=f"Take number {i} with a rather long text " * 3)
        window.takes.select(window.store.takes[-1])
    assert window.minimumSizeHint().width() <= 1280
    assert window.width() <= 1280
    if QApplication.platformName() == "xcb":   # a real window system: the screen is 1280x800
        assert window.frameGeometry().width() <= screen.width()
    window.resize(1366, 768)   # a tablet's landscape
    qtbot.wait(50)
    assert window.minimumSizeHint().height() <= 768 and window.height() <= 800


def test_settings_are_saved_when_changed(qtbot, window, workdir):
    window.sampling.seed.setValue(1234)
    window.backend.set_placement({"decoder": "accel-sched"})
    window.takes.export_pattern.setText("{seed}_{name}")
    fresh = QSettings(str(workdir / "settings.ini"), QSettings.IniFormat)   # without closing the window
    assert int(fresh.value("sampling/seed")) == 1234 and fresh.value("backend/decoder") == "accel-sched"
    assert fresh.value("takes/export_pattern") == "{seed}_{name}"


def test_opens_a_checkpoint_folder_with_conversion_progress(qtbot, workdir):
    from support.goldens import checkpoint_dir
    w = make_window(qtbot, workdir)
    progress = []
    watch = JobProgress(w.controller, "load", progress.append)  # noqa: F841
    with qtbot.waitSignal(w.presenter.core.model_loaded, timeout=TIMEOUT_MS):
        w.presenter.core.load_model(str(checkpoint_dir("voice_design")))   # the dialog's default type
    assert w.info.variant == "voice_design" and w.voice.instruct.isEnabled() and not w.voice.speaker.isEnabled()
    assert progress and progress[-1][0] == progress[-1][1]
    assert (workdir / "data" / "models" / "tiny-voice_design-q8_0.gguf").exists()
    w.voice.instruct.setText("A calm voice.")
    assert generate(qtbot, w, frames=3).stop_reason == "limit"
    w.controller.shutdown()


def test_ctrl_c_closes_the_workbench_cleanly(tmp_path):
    env = {**os.environ, "KAZEIA_DATA_DIR": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    proc = subprocess.Popen([sys.executable, "-m", "kazeia.app"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    log = tmp_path / "data" / "workbench.log"
    deadline = time.time() + 120
    while time.time() < deadline and not (log.exists() and "loaded" in log.read_text()):
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    assert "loaded" in log.read_text()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    assert list((tmp_path / "config").rglob("*.conf")), "settings were not saved on close"


@pytest.mark.accel
def test_placement_takes_say_where_each_stage_ran(qtbot, accel_window):
    window = accel_window
    """Backend A/B: a take made under accel-sched and one under cpu each say where every stage ran.
    In the Vulkan pass of scripts/test.sh accel-sched runs on lavapipe's Vulkan0, every op of every
    stage on it; on the CPU-only pass the scheduler runs over the CPU alone."""
    from kazeia.engine.synthesis.placement import sched_device
    accel = sched_device()
    window.backend.set_placement(ALL_SCHED)
    sched = generate(qtbot, window, frames=6, seed=3, timeout_ms=ACCEL_TIMEOUT_MS)
    assert window.store.takes[-1].placement == ALL_SCHED
    where = window.store.takes[-1].where
    assert set(where) == {"talker", "code_predictor", "decoder"}
    device = accel["name"] if accel else "CPU"
    for stage, line in where.items():
        assert line.startswith(f"accel-sched: {device} ") and "fall" not in line, line
        assert f"{stage.replace('_', ' ')} on accel-sched: {device}" in window.latency.where.text()
    assert "NOT ALL" not in window.latency.where.text()
    window.backend.set_placement(ALL_CPU)
    cpu = generate(qtbot, window, frames=6, seed=3)
    assert all(line.startswith("cpu: CPU ") for line in window.store.takes[-1].where.values())
    if accel is None:   # the same arithmetic: the same take
        assert np.array_equal(cpu.codes, sched.codes)
    assert len(sched.codes) == len(cpu.codes) == 6
    window.takes.select(window.store.takes[0])   # selecting the earlier take shows where it ran
    assert f"on accel-sched: {device}" in window.latency.where.text()


def test_demo_by_name_opens_the_demo_model(qtbot, workdir):
    """`kazeia-workbench demo`, as the command line's `--model demo`."""
    from kazeia.engine import demo_model_path
    w = make_window(qtbot, workdir, model="demo")
    assert w.info.path == demo_model_path() and not w.banner.isVisible()
    assert w.generate_button.isEnabled()
    w.controller.shutdown()
