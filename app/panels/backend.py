"""Backend bar: the model, the ggml build and CPU level in use, compute threads, where each stage runs (with what each mode means and
why one is unavailable), and the audio output: device, master volume, level meter."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QSizePolicy, QSlider,
                               QSpinBox, QToolButton, QVBoxLayout, QWidget)

from kazeia.engine.synthesis.placement import MEANINGS, MODES, STAGES, TABLET_NAMES, mode_status
from kazeia.engine.platform_info import cpu_level, describe_cpu_level, ggml_build
from kazeia.engine.synthesis.threads import available_cores

from ..elided_label import ElidedLabel
from ..flow_layout import FlowLayout
from ..audio_levels import FLOOR_DB
from .base import Panel, watch


def workbench_threads() -> int:
    """The default: one core left to the window. ggml's workers spin at every op barrier, and on a
    2-core machine the GUI thread's redraws stalled 2 engine threads (talker 2.7-4x slower per
    frame than the engine alone) while 1 thread ran within 4-13% of it."""
    return max(1, available_cores() - 1)


def build_summary() -> str:
    """The ggml build and the CPU level of Kazeia's kernels, in a few words (every figure the
    window shows was made by them)."""
    return f"ggml {ggml_build().flavor} \u00b7 CPU kernels {cpu_level()['level']}"


def build_details() -> str:
    return "\n".join([ggml_build().describe(), *describe_cpu_level()])


def modes_help() -> str:
    """What the modes mean, for the Help menu and the "?" button."""
    status = mode_status()
    lines = ["Each stage (talker, code predictor, decoder) runs in one of three modes:", ""]
    for mode in MODES:
        s = status[mode]
        lines.append(f"{mode} ({TABLET_NAMES[mode]}): {MEANINGS[mode]}.")
        lines.append(f"    here: {s.reason if s.available else 'unavailable: ' + s.reason}")
    lines += ["", build_details(), "", "A change applies to the next take; a take records the placement it ran with, and the "
              "latency view says on which device each stage ran."]
    return "\n".join(lines)


def group(*widgets) -> QWidget:
    """Widgets kept together on one row of the flow (a label with its field)."""
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    for w in widgets:
        if isinstance(w, QLabel):   # the field, not its label, takes any room to spare
            w.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Preferred)
        row.addWidget(w)
    return box


class LevelMeter(QProgressBar):
    """Peak level of what the output plays now, -60..0 dBFS; red while the limiter works."""

    def __init__(self):
        super().__init__()
        self.setRange(-60, 0)
        self.setTextVisible(True)
        self.setFixedWidth(150)
        self.show_level(FLOOR_DB, 0.0)

    def show_level(self, peak_db: float, limited_db: float) -> None:
        self.setValue(int(max(-60, min(0, peak_db))))
        self.setFormat(f"{peak_db:.0f} dBFS" + (f"  limit -{limited_db:.1f} dB" if limited_db > 0.05 else "")
                       if peak_db > -60 else "silence")
        self.setStyleSheet("QProgressBar::chunk { background: #c0392b; }" if limited_db > 0.05 else "")


class BackendPanel(Panel):
    panel_id = "backend"
    open_requested = Signal()
    placement_changed = Signal(object)   # {stage: mode}
    threads_changed = Signal(int)
    device_changed = Signal(object)      # output device index
    volume_changed = Signal(float)

    def __init__(self, settings, audio_devices: list[tuple[int, str]], audio_reason: str):
        super().__init__(settings)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 2, 4, 2)
        outer.setSpacing(2)
        self.open_button = QPushButton("Open model...")
        self.model_label = ElidedLabel("no model")
        self.model_label.setObjectName("model_label")
        self.conversion = QProgressBar()
        self.conversion.setFormat("converting %p%")
        self.conversion.hide()
        row = QHBoxLayout()
        row.addWidget(self.open_button)
        row.addWidget(self.model_label, 3)
        row.addWidget(self.conversion)
        self.build_label = ElidedLabel(build_summary(), Qt.ElideRight)
        self.build_label.setObjectName("build_label")
        self.build_label.setToolTip(build_details())
        self.build_label.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        row.addWidget(self.build_label, 2)
        outer.addLayout(row)

        # the rest flows: one row on a desktop, two or three on a portrait tablet
        flow = FlowLayout()
        flow.setContentsMargins(0, 0, 0, 0)
        outer.addLayout(flow)
        self.threads = QSpinBox()
        self.threads.setRange(1, max(1, available_cores()))
        self.threads.setValue(workbench_threads())
        self.threads.setToolTip(f"compute threads (at most the {available_cores()} core(s) this process may use)")
        flow.add(group(QLabel("threads"), self.threads))
        status = mode_status()
        self.placement: dict[str, QComboBox] = {}
        parts = []
        for stage in STAGES:
            box = QComboBox()
            for mode in MODES:
                box.addItem(mode)
                item = box.model().item(box.count() - 1)
                why = status[mode].reason
                item.setToolTip(f"{TABLET_NAMES[mode]}: {MEANINGS[mode]}\n"
                                f"{why if status[mode].available else 'unavailable: ' + why}")
                item.setEnabled(status[mode].available)
            box.setToolTip(f"where the {stage.replace('_', ' ')} runs (applies to the next take)")
            self.placement[stage] = box
            parts += [QLabel(stage.replace("_", " ")), box]
        self.modes_button = QToolButton()
        self.modes_button.setText("?")
        self.modes_button.setToolTip("what the placement modes mean, and why one is unavailable")
        flow.add(group(*parts, self.modes_button))
        self.device_box = QComboBox()
        self.device_box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.device_box.setMinimumContentsLength(16)
        output = group(QLabel("output"), self.device_box)
        output.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Preferred)
        flow.add(output)
        self.volume = QSlider(Qt.Horizontal)
        self.volume.setRange(0, 100)
        self.volume.setValue(70)
        self.volume.setFixedWidth(90)
        self.volume.setToolTip("master volume (a limiter keeps every sample below 0 dBFS)")
        self.meter = LevelMeter()
        flow.add(group(QLabel("volume"), self.volume, self.meter))
        self._fill_devices(audio_devices, audio_reason)

        self.open_button.clicked.connect(self.open_requested)
        for box in self.placement.values():
            box.currentTextChanged.connect(lambda _: self._emit(self.placement_changed, self.current_placement()))
        self.threads.valueChanged.connect(lambda n: self._emit(self.threads_changed, n))
        self.device_box.currentIndexChanged.connect(lambda _: self._emit(self.device_changed,
                                                                         self.device_box.currentData()))
        self.volume.valueChanged.connect(lambda v: self._emit(self.volume_changed, v / 100))
        watch([self.threads, self.device_box, self.volume, *self.placement.values()], self.changed)

    def show_conversion(self, progress: tuple) -> None:
        """A checkpoint's conversion to GGUF: (done, total) in thousands of tensors' bytes."""
        done, total = progress
        self.conversion.setVisible(done < total)
        self.conversion.setRange(0, max(total, 1))
        self.conversion.setValue(done)

    def _emit(self, signal, value) -> None:
        if not self._restoring:
            signal.emit(value)

    def _fill_devices(self, devices, reason: str) -> None:
        if not devices:
            self.device_box.addItem("no audio output")
            self.device_box.setEnabled(False)
            self.device_box.setToolTip(reason or "no output device")
            return
        for index, name in devices:
            self.device_box.addItem(name, index)

    @property
    def has_output(self) -> bool:
        return self.device_box.isEnabled()

    def current_placement(self) -> dict:
        return {stage: box.currentText() for stage, box in self.placement.items()}

    def set_placement(self, placement: dict) -> None:
        for stage, mode in placement.items():
            box = self.placement.get(stage)
            index = box.findText(mode) if box is not None else -1
            if index >= 0 and box.model().item(index).isEnabled():
                box.setCurrentIndex(index)

    def set_model(self, info) -> None:
        label = f"{info.path.name}: {info.variant}, {info.size_label}, {info.file_type}"
        if info.random_weights:
            label += "   [RANDOM WEIGHTS: produces noise]"
        self.model_label.setText(label)
        self.model_label.setToolTip(str(info.path))

    def restore_settings(self) -> None:
        self.threads.setValue(min(int(self.value("threads", self.threads.value())), self.threads.maximum()))
        self.set_placement({stage: self.value(stage, "cpu") for stage in STAGES})
        saved = self.value("audio_device")
        if saved and self.has_output:
            index = self.device_box.findText(saved)
            if index >= 0:
                self.device_box.setCurrentIndex(index)
        self.volume.setValue(int(self.value("volume", 70)))

    def save_settings(self) -> None:
        self.set_value("threads", self.threads.value())
        for stage, box in self.placement.items():
            self.set_value(stage, box.currentText())
        if self.has_output:
            self.set_value("audio_device", self.device_box.currentText())
        self.set_value("volume", self.volume.value())
