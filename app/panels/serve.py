"""Serve: the loaded model as a speech service for other programs (kazeia serve's app: OpenAI's
/v1/audio/speech, and Wyoming for Home Assistant when asked), asked for here and started and stopped
by the engine's controller, on the same engine as the operator's takes (they share its lock and its
batches). The panel shows the address and
key to give a client, the voices it offers, and each request as it ends with its per-stage latency.
Loopback by default; another address needs a key (as on the command line)."""
from __future__ import annotations

import secrets
import time
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QFormLayout, QHBoxLayout, QHeaderView, QLineEdit, QPushButton, QSpinBox, QTableWidget, QTableWidgetItem,
                               QVBoxLayout)

from kazeia.engine.serve.run import check_listeners, parse_networks

from .base import Panel, as_bool, watch, wrapping_label

COLUMNS = ("time", "request", "voice", "chars", "frames", "TTFA ms", "RTF", "talker / cp / decoder ms", "outcome")
KEPT_ROWS = 200


class ServePanel(Panel):
    panel_id = "serve"
    request_done = Signal(dict)   # emitted on the server's thread; the table is filled on the GUI thread
    state_changed = Signal(bool)  # serving or not
    start_requested = Signal(object)   # a tasks.ServeRequest
    stop_requested = Signal()
    error = Signal(str)

    def __init__(self, settings, voices_folder: Path):
        super().__init__(settings)
        self.voices_folder = Path(voices_folder)
        self.info = None     # the loaded model's
        self.url = ""        # the server's address while serving
        layout = QVBoxLayout(self)
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.WrapLongRows)
        self.host = QLineEdit("127.0.0.1")
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(8000)
        self.api_key = QLineEdit()
        self.api_key.setPlaceholderText("none (loopback only)")
        self.new_key = QPushButton("New key")
        key_row = QHBoxLayout()
        key_row.addWidget(self.api_key, 1)
        key_row.addWidget(self.new_key)
        self.wyoming = QCheckBox("Wyoming (Home Assistant) on port")
        self.wyoming_port = QSpinBox()
        self.wyoming_port.setRange(1, 65535)
        self.wyoming_port.setValue(10200)
        wyoming_row = QHBoxLayout()
        wyoming_row.addWidget(self.wyoming)
        wyoming_row.addWidget(self.wyoming_port)
        wyoming_row.addStretch(1)
        # (Wyoming carries no key: beyond loopback its clients are named by address)
        self.wyoming_allow = QLineEdit()
        self.wyoming_allow.setPlaceholderText("Home Assistant's address or network (needed beyond loopback)")
        form.addRow("Address", self.host)
        form.addRow("Port", self.port)
        form.addRow("API key", key_row)
        form.addRow("", wyoming_row)
        form.addRow("Wyoming clients", self.wyoming_allow)
        layout.addLayout(form)
        row = QHBoxLayout()
        self.start_button = QPushButton("Start")
        self.status = wrapping_label("stopped")
        self.status.setTextInteractionFlags(self.status.textInteractionFlags() | self.status.textInteractionFlags().TextSelectableByMouse)
        row.addWidget(self.start_button)
        row.addWidget(self.status, 1)
        layout.addLayout(row)
        self.voice_list = wrapping_label()
        layout.addWidget(self.voice_list)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)
        self.start_button.clicked.connect(self.toggle)
        self.new_key.clicked.connect(lambda: self.api_key.setText(secrets.token_urlsafe(24)))
        self.request_done.connect(self._add_row)   # (queued: the signal comes from the server's thread)
        watch((self.host, self.port, self.api_key, self.wyoming, self.wyoming_port, self.wyoming_allow), self.changed)
        self._show_state()

    # -- what the window tells it ---------------------------------------------------------------
    def set_model(self, info) -> None:
        self.info = info
        self._show_state()

    def show_serving(self, url: str, voices: list[str]) -> None:
        self.url = url
        self.voice_list.setText("Voices offered: " + (", ".join(voices) or "none (a Base model offers the voice "
                                                      "library's profiles: make one first)"))
        self._show_state()
        self.state_changed.emit(True)

    def show_stopped(self, why: str = "stopped") -> None:
        was, self.url = self.serving, ""
        self._show_state(why)
        if was:
            self.state_changed.emit(False)

    def show_failed(self, message: str) -> None:
        self.url = ""
        self._show_state(f"not started: {message}", error=True)

    # -- what it asks for -----------------------------------------------------------------------
    @property
    def serving(self) -> bool:
        return bool(self.url)

    @property
    def address(self) -> str:
        return self.url

    def toggle(self) -> None:
        if self.serving:
            self.stop_requested.emit()
        else:
            self.start()

    def start(self) -> bool:
        """Asks for the server (start_requested) when the settings allow it; False, saying why, if not."""
        from kazeia.app.tasks import ServeRequest
        if self.info is None:
            return self._fail("load a model first")
        host, key = self.host.text().strip() or "127.0.0.1", self.api_key.text().strip() or None
        wyoming = (host, self.wyoming_port.value()) if self.wyoming.isChecked() else None
        try:   # (kazeia serve's rule: beyond loopback, HTTP needs a key and Wyoming its clients named)
            allow = parse_networks([self.wyoming_allow.text()]) if wyoming else ()
            check_listeners(host, key, wyoming, allow)
        except ValueError as e:
            return self._fail(_in_panel_words(str(e)))
        self.status.setText("starting ...")
        self.start_requested.emit(ServeRequest(host, self.port.value(), key, wyoming and wyoming[1],
                                               self.voices_folder, observer=self.request_done.emit,
                                               wyoming_allow=allow))
        return True

    # -- inside ---------------------------------------------------------------------------------
    def _fail(self, message: str) -> bool:
        self._show_state(f"not started: {message}", error=True)
        self.error.emit(message)
        return False

    def _show_state(self, why: str = "stopped", error: bool = False) -> None:
        editable = not self.serving
        for w in (self.host, self.port, self.api_key, self.new_key, self.wyoming, self.wyoming_port, self.wyoming_allow):
            w.setEnabled(editable)
        self.start_button.setText("Stop" if self.serving else "Start")
        self.start_button.setEnabled(self.info is not None or self.serving)
        if self.serving:
            key = self.api_key.text().strip()
            wyoming = f"; Wyoming on tcp://{self.host.text().strip()}:{self.wyoming_port.value()}" \
                if self.wyoming.isChecked() else ""
            live = self.url.replace("http://", "ws://", 1)
            text = (f"serving {self.info.path.stem} on {self.url}/v1 "
                    f"({'key ' + key if key else 'no key'}){wyoming}; live text in: {live}/v1/audio/speech/live, "
                    f"Deepgram's shape: {live}/v1/speak")
        else:
            text = why if self.info is not None or error else "load a model to serve it"
        self.status.setText(text)
        self.status.setStyleSheet("color: #b00020;" if error else "")

    def _add_row(self, record: dict) -> None:
        stages = record.get("stage_ms") or {}
        values = [time.strftime("%H:%M:%S"), record["id"], record["voice"], str(record["chars"]), str(record["frames"]),
                  f"{record['ttfa_ms']:.0f}" if record.get("ttfa_ms") is not None else "-",
                  f"{record['rtf']:.2f}" if record.get("rtf") is not None else "-",
                  " / ".join(f"{stages[s]:.1f}" for s in ("talker", "code_predictor", "decoder")) if len(stages) == 3
                  else "-", record["outcome"]]
        self.table.insertRow(0)
        for column, value in enumerate(values):
            self.table.setItem(0, column, QTableWidgetItem(value))
        while self.table.rowCount() > KEPT_ROWS:
            self.table.removeRow(self.table.rowCount() - 1)

    def restore_settings(self) -> None:
        self.host.setText(str(self.value("host", "127.0.0.1")))
        self.port.setValue(int(self.value("port", 8000)))
        self.api_key.setText(str(self.value("key", "")))
        self.wyoming.setChecked(as_bool(self.value("wyoming", False)))
        self.wyoming_port.setValue(int(self.value("wyoming_port", 10200)))
        self.wyoming_allow.setText(str(self.value("wyoming_allow", "")))

    def save_settings(self) -> None:
        for name, value in (("host", self.host.text()), ("port", self.port.value()), ("key", self.api_key.text()),
                            ("wyoming", self.wyoming.isChecked()), ("wyoming_port", self.wyoming_port.value()),
                            ("wyoming_allow", self.wyoming_allow.text())):
            self.set_value(name, value)


def _in_panel_words(message: str) -> str:
    """kazeia serve's refusal said with the panel's fields instead of the command's options."""
    for option, field in (("--api-key or $KAZEIA_API_KEY", "New key"), ("--wyoming tcp://", "Wyoming on "),
                          ("--host ", ""), ("with --wyoming-allow CIDR", "in Wyoming clients"),
                          ("--wyoming-allow", "Wyoming clients"), ("listen on tcp://127.0.0.1", "use 127.0.0.1"),
                          ("keep the default 127.0.0.1", "use 127.0.0.1")):
        message = message.replace(option, field)
    return message
