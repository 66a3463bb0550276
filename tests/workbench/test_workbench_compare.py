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
    from kazeia.engine.synthesis.placement import sched_device
    for side, placement in (("A", ALL_CPU), ("B", ALL_SCHED)):
        for stage, combo in window.compare.sides[side].items():
            combo.setCurrentText(placement[stage])
    window.sampling.max_frames.setValue(6)
    window.sampling.seed.setValue(5)
    before = len(window.store.takes)
    window.presenter.takes.compare_current()
    qtbot.waitUntil(lambda: window.session.ab_pair is not None, timeout=ACCEL_TIMEOUT_MS)
    a, b = window.session.ab_pair
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
    assert table.item(1, 0).text() == "cpu" and table.item(1, 1).text() == "accel-sched"
    assert window.compare.listen_button.isEnabled() and "B against A" in window.compare.difference.text()
    screenshot(window, "workbench_compare")


def test_compare_two_weight_types_then_test_them_blind(qtbot, workdir, converted):
    """B on another model file of the same variant (q8_0 against the loaded f32): two takes of one
    request, their difference, then the blind test of the pair from the Compare page."""
    from pathlib import Path

    from kazeia.app.panels.blind_test import BlindTestDialog
    from support.workbench import TIMEOUT_MS, make_window
    f32, q8 = converted("custom_voice", "f32"), converted("custom_voice", "q8_0")
    w = make_window(qtbot, workdir, model=str(f32))
    try:
        w.compare.set_b_model(str(q8))
        for side in ("A", "B"):   # (the weight type alone differs)
            for combo in w.compare.sides[side].values():
                combo.setCurrentText("cpu")
        w.sampling.max_frames.setValue(8)
        w.sampling.seed.setValue(5)
        w.presenter.takes.compare_current()
        qtbot.waitUntil(lambda: w.session.ab_pair is not None, timeout=TIMEOUT_MS)
        a, b = w.session.ab_pair
        assert Path(a.model).name == f32.name and Path(b.model).name == q8.name
        assert a.sampling["seed"] == b.sampling["seed"] == 5 and a.placement == b.placement
        assert w.compare.table.item(0, 0).text() == f32.name and w.compare.table.item(0, 1).text() == q8.name
        d = b.comparison["difference"]
        assert d["max_abs_diff"] > 0 or not d["codes_identical"] or d["snr_db"] < float("inf")   # (q8_0 is not f32)
        assert "B against A" in w.compare.difference.text() and w.compare.blind_button.isEnabled()
        w.compare.blind_button.click()
        dialog = next(d for d in w.findChildren(BlindTestDialog) if d.isVisible())
        assert {t.id for t in dialog.takes} == {a.id, b.id}
        test = dialog.start(seed=2)
        assert {test.a["model"], test.b["model"]} == {str(f32), str(q8)}
        dialog.close()
        bad = converted("voice_design", "f32")   # (another variant: refused with a message)
        w.compare.set_b_model(str(bad))
        with qtbot.waitSignal(w.error_shown, timeout=TIMEOUT_MS):
            w.presenter.takes.compare_current()
        assert "compare models of one variant" in w.banner_text.text()
    finally:
        w.controller.cancel()
        w.controller.shutdown()
