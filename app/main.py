"""`kazeia-workbench [MODEL]` / `python -m kazeia.app`: opens MODEL, else the last model, else the
bundled demo model. Errors go to the status bar and a log file; the window stays up."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from .takes import data_dir


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
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    install_excepthook()
    from PySide6.QtWidgets import QApplication

    from .main_window import MainWindow
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Kazeia workbench")
    window = MainWindow(args.model)
    window.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
