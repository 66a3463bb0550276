"""What runs on the controller's service thread, never behind a take: a model download (Get models)
and the loaded model served (Serve this model: OpenAI's API, Wyoming), stopped when another model is
loaded."""
from __future__ import annotations

from .base import FeaturePresenter


class ServicesPresenter(FeaturePresenter):
    def __init__(self, view, session, controller, playback):
        super().__init__(view, session, controller, playback)
        self._stopped_because = "stopped"   # what the Serve dialog says once the server has stopped
        view.models.pull_requested.connect(self.pull_model)
        view.models.cancel_requested.connect(controller.cancel_pull)
        view.serve.start_requested.connect(self.start_server)
        view.serve.stop_requested.connect(self.stop_server)

    def pull_model(self, source: str) -> None:
        panel = self.view.models
        job = self.controller.pull_model(source)
        if job is None:
            return
        panel.show_pull_started(source)
        job.progress.connect(panel.show_progress)
        job.status.connect(panel.status.setText)
        self._run(job, panel.show_pulled, panel.show_pull_failed)

    def start_server(self, request) -> None:
        panel = self.view.serve
        job = self.controller.start_server(request)
        if job is None:
            panel.show_failed("load a model first" if self.session.info is None else "already serving")
            return
        job.finished.connect(self._on_serving)
        job.failed.connect(panel.show_failed)
        job.failed.connect(self.view.show_error)   # (the banner too)
        self.controller.submit(job)

    def _on_serving(self, serving) -> None:
        self.view.serve.show_serving(serving.server.url, serving.voices)

    def stop_server(self, why: str = "stopped") -> None:
        job = self.controller.stop_server()
        if job is not None:
            self._stopped_because = why
            self._run(job, self._on_stopped_serving)

    def _on_stopped_serving(self, _=None) -> None:
        self.view.serve.show_stopped(self._stopped_because)

    def model_replaced(self, _info=None) -> None:
        """Another model was loaded: the server, on the one before, stops."""
        if self.controller.serving is not None:
            self.stop_server("stopped: another model was loaded")
