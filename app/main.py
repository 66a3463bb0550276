"""`kazeia-workbench [MODEL]` / `python -m kazeia.app`: opens MODEL, else the last model, else the
bundled demo model. Errors go to the window's banner and a log file; the window stays up. Ctrl+C
in the terminal closes it cleanly (settings saved, the engine stopped)."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback

from kazeia.engine.user_dirs import data_dir


def install_excepthook() -> None:
    log = data_dir() / "workbench.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=log, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    def hook(kind, value, tb):
        logging.error("unhandled: %s", "".join(traceback.format_exception(kind, value, tb)))
        sys.__excepthook__(kind, value, tb)
    sys.excepthook = hook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kazeia-workbench", description="Kazeia speech workbench")
    parser.add_argument("model", nargs="?", help="a GGUF model or a Hugging Face checkpoint folder")
    args = parser.parse_args(argv)
    from kazeia.engine.platform_info import check_cpu_level
    try:
        check_cpu_level()
    except ValueError as e:   # a bad KAZEIA_CPU: a message, not a window that cannot load a model
        print(f"kazeia-workbench: error: {e}", file=sys.stderr)
        return 2
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    install_excepthook()
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from kazeia.resources import icon_path

    from .main_window import MainWindow
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Kazeia workbench")
    app.setWindowIcon(QIcon(str(icon_path())))
    window = MainWindow(args.model)
    window.show()
    close_on_sigint(window)
    return app.exec()


def close_on_sigint(window) -> None:
    """Ctrl+C closes the window as its close button would. Qt's loop runs C++ only, so a timer
    lets Python look at its signal flag a few times a second."""
    from PySide6.QtCore import QTimer
    signal.signal(signal.SIGINT, lambda *_: window.close())
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)
    timer.start(200)


if __name__ == "__main__":
    sys.exit(main())
