"""Between the window and the engine: what each of the operator's actions does, a presenter per
feature. Each reads its panels, asks the session (app/session.py, no Qt) what may start, makes the
controller's jobs and shows their outcomes in the panels; the window only lays out, and the engine
runs on the controller's threads.

    core      the model (opened, placement, threads) and the take spoken from the compose panels
    takes     the takes kept: shown, played, restored, a chunk made again; A/B, blind tests,
              placement comparisons
    voices    the voice library: profiles from recordings, previews, a take's voice kept
    render    scripts and books
    services  model downloads and the server (on the controller's service thread)"""
from __future__ import annotations

from ..controller import EngineController
from ..playback import Playback
from .core import CorePresenter
from .render import RenderPresenter
from .services import ServicesPresenter
from .takes import TakesPresenter
from .voices import VoicesPresenter


class Presenters:
    """The window's presenters on one controller and one playback, and what passes between them: a
    finished take goes on to the comparison it belongs to; a new model stops the server."""

    def __init__(self, view, session, audio):
        self.controller = EngineController(view)
        self.playback = Playback(audio, session, lambda: view.backend.has_output)
        self.playback.status.connect(lambda message: view.show_status(message, 5000))
        self.playback.error.connect(view.show_error)
        shared = (view, session, self.controller, self.playback)
        self.core = CorePresenter(*shared, audio)
        self.takes = TakesPresenter(*shared, self.core)
        self.voices = VoicesPresenter(*shared)
        self.render = RenderPresenter(*shared)
        self.services = ServicesPresenter(*shared)
        self.core.take_recorded.connect(self.takes.follow_comparison)
        self.core.model_loaded.connect(self.services.model_replaced)

