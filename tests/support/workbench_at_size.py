"""One screen size, in its own process on its own X server (test_workbench_layout.py starts both):
opens the workbench full-screen on the demo model, makes a take with a long name, then shows
every page and lists what is cut (layout_check). Prints one JSON line; writes screenshots. With
--book, also the Book dialog with a small book rendered, at the screen's size; with --listening, the
Voices page with a library of described voices, and the Blind test dialog in a trial.

    python tests/support/workbench_at_size.py OUT_DIR NAME [--theme light|dark] [--touch on|off] [--book]
                                              [--listening]"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("name")
    parser.add_argument("--theme", default="light")
    parser.add_argument("--touch", default="off")
    parser.add_argument("--book", action="store_true")
    parser.add_argument("--listening", action="store_true")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="kazeia-size-"))
    os.environ["KAZEIA_DATA_DIR"] = str(data / "data")
    os.environ.setdefault("KAZEIA_CACHE_DIR", str(data / "cache"))
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from kazeia.app.audio_output import AudioOutput
    from kazeia.app.main_window import MainWindow
    from kazeia.app.takes import TakeStore
    app = QApplication([sys.argv[0]])
    settings = QSettings(str(data / "settings.ini"), QSettings.IniFormat)
    settings.setValue("view/theme", args.theme)
    settings.setValue("view/touch", args.touch)
    window = MainWindow(None, settings=settings, audio=AudioOutput(), store=TakeStore(data / "data"))
    screen = app.primaryScreen()
    window.setGeometry(screen.availableGeometry())
    window.show()
    try:
        return walk(app, window, screen, args)
    finally:
        window.controller.shutdown()   # (a running QThread must not be destroyed)


def walk(app, window, screen, args) -> int:
    from layout_check import clipped

    def wait(condition, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            if condition():
                return True
            time.sleep(0.01)
        return False

    if not wait(lambda: window.info is not None, 120):
        print(json.dumps({"error": "the demo model did not load"}))
        return 1
    window.sampling.play_live.setChecked(False)   # (the tests' ALSA capture device records other tests' audio)
    window.sampling.max_frames.setValue(12)
    window.text.setPlainText("A take for the layout test, with a sentence long enough to wrap in the text box.")
    done = []
    window.presenter.core.take_finished.connect(lambda *a: done.append(1))
    window.presenter.core.generate()
    if not wait(lambda: bool(done), 120):
        print(json.dumps({"error": "the take did not finish"}))
        return 1
    wait(lambda: False, 0.3)
    take = window.store.takes[-1]
    window.store.rename(take, "A take with the long name an operator gave it to find it again later")
    window.takes.refresh(select=take)
    window.voice.instruct.setText("")

    problems: dict[str, list[str]] = {}
    shots = []
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ws = window.workspace
    tabs = ws.side_tabs if ws.arrangement == "wide" else ws.pages
    for i in range(tabs.count()):
        tabs.setCurrentIndex(i)
        wait(lambda: False, 0.15)
        page = tabs.tabText(i)
        found = clipped(window)
        if found:
            problems[page] = found
        if i == 0 or ws.arrangement == "narrow" and page == "Live":
            shot = out / f"{args.name}{'' if i == 0 else '-' + page.lower()}.png"
            window.grab().save(str(shot))
            shots.append(str(shot))
    if args.book:
        found, shot = book_dialog(window, screen, wait, out / f"{args.name}-book.png",
                                  Path(tempfile.mkdtemp(prefix="kazeia-book-")))
        if found:
            problems["Book"] = found
        if shot:
            shots.append(str(shot))
    if args.listening:
        for page, (found, shot) in listening(window, wait, out, args.name).items():
            if found:
                problems[page] = found
            shots.append(str(shot))
    print(json.dumps({"arrangement": ws.arrangement, "window": [window.width(), window.height()],
                      "screen": [screen.availableGeometry().width(), screen.availableGeometry().height()],
                      "dpr": screen.devicePixelRatio(), "minimum": [window.minimumSizeHint().width(),
                                                                     window.minimumSizeHint().height()],
                      "problems": problems, "screenshots": shots}))
    return 0


def book_dialog(window, screen, wait, shot: Path, data: Path):
    """The Book dialog fitted to the screen, a small book rendered in it, a chapter and a chunk
    selected: what is cut, and its screenshot (None when the render did not end)."""
    from books import make_epub
    from layout_check import clipped
    window.sampling.max_frames.setValue(6)
    dialog, panel = window.book_dialog, window.book
    area = screen.availableGeometry()
    dialog.resize(min(760, area.width() - 40), min(640, area.height() - 80))
    dialog.show()
    panel.open_book(str(make_epub(data / "book.epub")))
    done = []
    window.presenter.render.book_finished.connect(lambda *a: done.append(1))
    panel.render_button.click()
    if not wait(lambda: bool(done), 120):
        return ["the book's render did not end"], None
    wait(lambda: False, 0.2)
    row = next(r for r in range(panel.chapters.rowCount()) if panel.chapters.item(r, 0).text() == "1")
    panel.chapters.selectRow(row)
    panel.chunks.selectRow(1)
    wait(lambda: False, 0.2)
    found = clipped(dialog)
    dialog.grab().save(str(shot))
    return found, shot


def listening(window, wait, out: Path, name: str) -> dict:
    """The Voices page with three described voices (profiles written as the library writes them), and
    the Blind test dialog in its first trial on two takes: what is cut, and their screenshots."""
    import numpy as np

    from kazeia.engine.voices.voice import write_profile
    from layout_check import clipped
    described = [("Narrator", "recording", "english", ["warm", "book"], "for the long novels; slow and even"),
                 ("Calm designed", "designed", "english", ["calm"], "kept from a VoiceDesign take"),
                 ("Announcer", "imported", "german", ["bright", "radio"], "")]
    for voice, source, language, tags, notes in described:
        meta = {"format": "kazeia-voice", "version": 1, "ref_text": None,
                "model": {"name": "Qwen3-TTS-12Hz-0.6B-Base", "variant": "base", "size": "0.6B", "hidden_size": 1024},
                "about": {"source": source, "language": language, "tags": tags, "notes": notes}}
        write_profile(window.voices.path(voice), meta, {"x_vector": np.zeros(1024, np.float32)})
    ws = window.workspace
    ws.show_page(window.library)
    wait(lambda: False, 0.2)
    found = {}
    shot = out / f"{name}-voices.png"
    window.grab().save(str(shot))
    found["Voices"] = (clipped(window), shot)
    ws.show_page(window.takes)
    window.presenter.core.generate()
    wait(lambda: len(window.store.takes) >= 2 and not window.controller.busy, 120)
    window.takes.table.selectAll()
    dialog = window.presenter.takes.start_blind_test()
    area = window.screen().availableGeometry()
    dialog.resize(min(720, area.width() - 40), min(520, area.height() - 80))
    dialog.start(seed=7)
    wait(lambda: False, 0.2)
    shot = out / f"{name}-blind-test.png"
    dialog.grab().save(str(shot))
    found["Blind test"] = (clipped(dialog), shot)
    dialog.close()
    return found


if __name__ == "__main__":
    sys.exit(main())
