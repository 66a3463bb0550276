"""What each feature's presenter starts from: the window whose panels it reads and fills, the session it
asks (app/session.py, no Qt), the controller its jobs run on and the playback it plays through."""
from __future__ import annotations

from PySide6.QtCore import QObject


class FeaturePresenter(QObject):
    """(Job signals come from the controller's threads: they connect to methods of QObjects of the
    GUI thread, never to lambdas, so their slots run on the GUI thread.)"""

    def __init__(self, view, session, controller, playback):
        super().__init__(view)
        self.view, self.session, self.controller, self.playback = view, session, controller, playback

    def _run(self, job, finished, failed=None):
        """Submits `job`, its outcome going to `finished` and its failure to `failed` (by default the
        error banner); returns it."""
        job.finished.connect(finished)
        job.failed.connect(failed or self.view.show_error)
        return self.controller.submit(job)
