"""The script panel: a script rendered through the render core, resumed, one line rendered again
with a new seed, takes refused while it renders, stopped cleanly."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

pytest.importorskip("PySide6")

from support.workbench import TIMEOUT_MS, generate, screenshot  # noqa: E402
from support.workbench import window, workdir  # noqa: E402,F401 (fixtures)


def test_script_panel_renders_resumes_and_refuses_takes_meanwhile(qtbot, window, workdir):
    """A small script rendered headless through the render core: statuses, durations and RTF per
    line; a take asked for meanwhile is refused with a message; a new seed re-renders one line; the
    manifest is the panel's state when the script is opened again."""
    script = workdir / "lines.csv"
    script.write_text("id,text,speaker,max_frames\n" + "".join(f"l{i},Script line {i}.,vivian,{6 + i}\n" for i in range(5))
                      + "bad,,vivian,5\n")
    panel = window.script
    window.workspace.show_page(panel)
    assert panel.open_script(str(script))
    assert panel.table.rowCount() == 6 and panel.table.item(5, 3).text().startswith("invalid: empty text")
    out = Path(panel.out_dir.text())
    assert out == workdir / "lines-render"
    with qtbot.waitSignal(window.presenter.render.script_finished, timeout=TIMEOUT_MS) as done:
        panel.render_all_button.click()
        assert window.controller.rendering and not panel.render_all_button.isEnabled()
        assert not window.presenter.core.generate() and "script is rendering" in window.statusBar().currentMessage()
    summary = done.args[0]
    assert summary.done == 5 and summary.skipped == 1 and summary.failed == 0
    qtbot.wait(20)
    for r in range(5):
        assert panel.table.item(r, 3).text().startswith("done")
        assert float(panel.table.item(r, 4).text()) == pytest.approx((6 + r) * 0.08, abs=0.01)
        assert float(panel.table.item(r, 5).text()) > 0
    first = soundfile.read(out / "l2.wav", dtype="float32")[0]
    panel.table.selectRow(2)
    with qtbot.waitSignal(window.presenter.render.script_finished, timeout=TIMEOUT_MS) as done:
        panel.new_seed_button.click()
    assert done.args[0].done == 1   # only the selected line
    again = soundfile.read(out / "l2.wav", dtype="float32")[0]
    qtbot.wait(20)
    # another seed may also sample the end of speech earlier, so the length can change too
    assert 0 < len(again) <= 8 * 1920 and len(again) % 1920 == 0
    assert len(again) != len(first) or not np.array_equal(again, first)
    assert float(panel.table.item(2, 4).text()) == pytest.approx(len(again) / 24000, abs=0.01)
    assert "l2" in json.loads((out / "overrides.json").read_text())
    screenshot(window, "workbench-script")
    # reopened, the panel shows what the manifest says; render all keeps every line (new seed included)
    panel.table.setRowCount(0)
    assert panel.open_script(str(script))
    assert all(panel.table.item(r, 3).text().startswith("done") for r in range(5))
    with qtbot.waitSignal(window.presenter.render.script_finished, timeout=TIMEOUT_MS) as done:
        panel.render_all_button.click()
    assert done.args[0].done == 0 and done.args[0].kept == 5
    # Esc stops a render: the lines in flight are cancelled, nothing half-written stays
    script.write_text("id,text,speaker,max_frames\n" + "".join(f"s{i},Stop line {i}.,vivian,300\n" for i in range(8)))
    assert panel.open_script(str(script))
    with qtbot.waitSignal(window.presenter.render.script_finished, timeout=TIMEOUT_MS) as done:
        panel.render_all_button.click()
        qtbot.wait(200)
        window.presenter.core.stop()
    assert done.args[0].done < 8 and not window.controller.rendering
    qtbot.wait(20)
    assert all(panel.table.item(r, 3).text() in ("", "done") for r in range(8))
    assert not list(out.glob(".*partial*")) and len(list(out.glob("s*.wav"))) == done.args[0].done
    assert generate(qtbot, window, frames=4) is not None   # takes work again once the script is done
