"""Compare placements: the same request on A then B, two takes with how they differ, then A/B."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
from support.workbench import ACCEL_TIMEOUT_MS, ALL_CPU, ALL_SCHED, screenshot  # noqa: E402
from support.workbench import accel_window, window, workdir  # noqa: E402,F401 (fixtures)


@pytest.mark.accel
def test_compare_placements_makes_two_takes_with_their_difference(qtbot, accel_window):
    window = accel_window
    """cpu against accel-sched: on the CPU-only pass the scheduler runs the same arithmetic (identical
    codes and audio); on the Vulkan pass accel-sched runs on lavapipe and the difference is shown."""
    from kazeia.engine.placement import sched_device
    for side, placement in (("A", ALL_CPU), ("B", ALL_SCHED)):
        for stage, combo in window.compare.sides[side].items():
            combo.setCurrentText(placement[stage])
    window.sampling.max_frames.setValue(6)
    window.sampling.seed.setValue(5)
    before = len(window.store.takes)
    window.presenter.compare_current()
    qtbot.waitUntil(lambda: window.playback.ab_pair is not None, timeout=ACCEL_TIMEOUT_MS)
    a, b = window.playback.ab_pair
    assert len(window.store.takes) == before + 2
    assert a.placement == ALL_CPU and b.placement == ALL_SCHED and a.sampling["seed"] == b.sampling["seed"] == 5
    d = b.comparison["difference"]
    assert a.comparison["other"] == b.id and b.comparison["other"] == a.id
    if sched_device() is None:
        assert d["codes_identical"] and d["max_abs_diff"] == 0.0 and d["snr_db"] == float("inf")
    else:
        assert d["max_abs_diff"] >= 0 and ("codes part" in window.compare.difference.text()
                                           or d["codes_identical"])
    table = window.compare.table
    assert table.item(0, 0).text() == "cpu" and table.item(0, 1).text() == "accel-sched"
    assert window.compare.listen_button.isEnabled() and "B against A" in window.compare.difference.text()
    screenshot(window, "workbench_compare")
