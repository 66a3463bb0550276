"""Light and dark: readable contrast in both palettes, the window and its plots switching together,
"auto" following the system's scheme, and a bad setting falling back instead of failing."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
from PySide6.QtGui import QPalette  # noqa: E402

from kazeia.app import theme  # noqa: E402
from support.workbench import make_window, screenshot  # noqa: E402
from support.workbench import window, workdir  # noqa: E402,F401 (fixtures)


@pytest.mark.parametrize("colors", [theme.LIGHT, theme.DARK], ids=["light", "dark"])
def test_both_palettes_have_readable_contrast(colors):
    for background in (colors.window, colors.base, colors.button, colors.alternate):
        assert theme.contrast(colors.text, background) >= 7.0   # WCAG AAA for body text
    assert theme.contrast(colors.highlighted_text, colors.highlight) >= 4.5
    assert theme.contrast(colors.error, colors.error_background) >= 4.5
    assert theme.contrast(colors.error, colors.base) >= 4.5
    assert theme.contrast(colors.muted, colors.base) >= 3.0   # disabled text: visible, not loud
    assert theme.contrast(colors.wave, colors.base) >= 7.0


@pytest.mark.parametrize("touch", ["off", "on"])
def test_the_window_and_its_plots_switch_together(qtbot, window, touch):
    window.set_touch(touch)   # (touch mode's style sheet must not keep the old palette)
    for colors in (theme.DARK, theme.LIGHT):
        window.set_theme(colors.name)
        qtbot.waitUntil(lambda: window.palette().color(QPalette.Window).name() == colors.window and
                        window.text.palette().color(QPalette.Base).name() == colors.base, timeout=2000)
        for plot in (window.latency.chart, window.latency.startup, window.take_view.wave, window.take_view.spec):
            assert plot.backgroundBrush().color().name() == colors.base
        assert colors.error in window.banner.styleSheet()
        assert window.settings.value("view/theme") == colors.name
        screenshot(window, f"workbench-theme-{colors.name}-touch-{touch}")


def test_auto_follows_the_system_scheme(qtbot, window, monkeypatch):
    window.set_theme("auto")
    monkeypatch.setattr(theme, "system_is_dark", lambda: True)
    window.theme.apply()   # what the system's colorSchemeChanged calls
    qtbot.waitUntil(lambda: window.palette().color(QPalette.Window).name() == theme.DARK.window, timeout=2000)
    monkeypatch.setattr(theme, "system_is_dark", lambda: False)
    window.theme.apply()
    qtbot.waitUntil(lambda: window.palette().color(QPalette.Window).name() == theme.LIGHT.window, timeout=2000)


def test_a_bad_setting_falls_back_to_auto(qtbot, workdir):
    from PySide6.QtCore import QSettings
    settings = QSettings(str(workdir / "settings.ini"), QSettings.IniFormat)
    settings.setValue("view/theme", "purple")
    settings.setValue("view/touch", "sometimes")
    settings.sync()
    w = make_window(qtbot, workdir)
    assert w.theme.choice == "auto" and w.settings.value("view/touch") == "auto"
    assert any("touch setting 'sometimes'" in m for m in w.session.messages)
    with pytest.raises(ValueError, match="purple"):
        w.theme.set_choice("purple")
    assert w.theme.choice == "auto"
    w.controller.shutdown()
