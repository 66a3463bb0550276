"""The takes kept and listening to them: the selected take shown, played and sought, its settings
restored, a long take's chunk made again; A/B of two takes (the session's one pair), the Blind test
dialog, and the placement comparison (one request on placement A, then B, then A/B on the pair).
New takes are the core presenter's: a chunk made again and a comparison's A and B are asked of it."""
from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt

from ..takes import Take
from .base import FeaturePresenter


class TakesPresenter(FeaturePresenter):
    def __init__(self, view, session, controller, playback, core):
        super().__init__(view, session, controller, playback)
        self.core = core   # (CorePresenter) where takes are made
        tr, t, c = view.transport, view.takes, view.compare
        tr.play_button.clicked.connect(self.toggle_play)
        tr.ab_button.clicked.connect(self.ab_or_switch)
        view.take_view.seek_requested.connect(self.seek)
        t.selection_changed.connect(self._show_selected)
        t.play_requested.connect(playback.play_take)
        t.ab_requested.connect(self.start_ab)
        t.blind_requested.connect(self.start_blind_test)
        t.restore_requested.connect(self.restore_take)
        t.redo_chunk_requested.connect(self.redo_chunk)
        t.removing.connect(lambda take: playback.playing is take and playback.stop())
        c.compare_requested.connect(self.compare_placements)
        c.listen_requested.connect(self.listen_comparison)
        c.blind_requested.connect(self.blind_test_comparison)

    # ---- the selected take -------------------------------------------------------------------
    def _show_selected(self, take) -> None:
        v = self.view
        v.takes.show_details(take)
        if take is None or self.core.live.running:   # a running take keeps the live view
            return
        if v.take_view.shown != take.id:
            v.take_view.show_audio(self.session.store.audio(take), take.sample_rate)
            v.take_view.shown = take.id
        v.latency.show_take(take)

    def restore_take(self, take: Take | None) -> None:
        if take is None:
            return
        v, r = self.view, self.session.restored(take)
        v.text.setPlainText(r.text)
        v.voice.restore_request(r.request)
        v.sampling.streaming_text.setChecked(r.streaming_text)
        v.sampling.restore_params(r.sampling)
        v.backend.set_placement(r.placement)
        v.show_status(f"settings restored from {take.label}", 4000)

    def redo_chunk(self, take: Take, index: int, seed: int | None = None):
        """A long take again with chunk `index` given a new seed, its settings back in the panels; the
        two takes then A/B on that chunk alone."""
        try:
            seeds = self.session.redo_seeds(take, index, seed)
            self.restore_take(take)
            job = self.core.job()
        except ValueError as e:
            self.view.show_error(str(e))
            return None
        return self.core.generate(replace(job, chunk_seeds=seeds))

    # ---- playback and A/B --------------------------------------------------------------------
    def toggle_play(self) -> None:
        self.playback.toggle(self.view.takes.current())

    def seek(self, seconds: float) -> None:
        """Click on the waveform: play the shown take from there."""
        take = self.view.takes.current()
        if take is not None:
            self.playback.play_take(take, start=int(seconds * take.sample_rate))

    def start_ab(self) -> None:
        takes = self.view.takes.selected()
        if len(takes) != 2:
            self.view.show_status("select exactly two takes for A/B", 4000)
            return
        self._play_ab(*takes)

    def _play_ab(self, a: Take, b: Take) -> None:
        self.playback.match_loudness = self.view.takes.match_loudness.isChecked()
        self.view.takes.ab_label.setText(self.playback.start_ab(a, b))

    def start_blind_test(self, takes=None):
        """The Blind test dialog on two takes (the two selected by default); returns it, or None."""
        takes = list(takes) if takes is not None else self.view.takes.selected()
        if len(takes) != 2:
            self.view.show_status("select exactly two takes for a blind test", 4000)
            return None
        if takes[0].sample_rate != takes[1].sample_rate:
            self.view.show_error("a blind test needs two takes of one sample rate")
            return None
        from ..panels.blind_test import BlindTestDialog
        self.playback.stop()
        store = self.session.store
        dialog = BlindTestDialog(self.view, takes, [store.audio(t) for t in takes], takes[0].sample_rate,
                                 self.playback, store.folder, match_loudness=self.view.takes.match_loudness.isChecked())
        dialog.finished_test.connect(lambda t: self.view.show_status(f"blind test: {t.verdict}"))
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def ab_or_switch(self) -> None:
        """The A/B button: switches while an A/B pair plays, else starts one with the two selected."""
        if self.playback.pair_playing():
            self.playback.switch_ab()
        else:
            self.start_ab()

    # ---- placement comparison ----------------------------------------------------------------
    def compare_current(self) -> None:
        compare = self.view.compare
        self.compare_placements(compare.placement("A"), compare.placement("B"), compare.b_model())

    def compare_placements(self, a: dict, b: dict, b_model: str | None = None):
        """The current request on placement A, then on B (same text, voice and seed); `b_model`: B
        on another model file of the same variant (another weight type or decoder)."""
        if self.session.info is None or self.controller.busy:
            return None
        try:
            request = self.core.job()
        except ValueError as e:
            self.view.show_error(str(e))
            return None
        first = self.session.start_comparison(request, a, b, b_model)
        self.view.workspace.show_page(self.view.compare)
        self.view.compare.show_progress("rendering A ...")
        return self.core.generate(*first)

    def follow_comparison(self, take: Take, outcome) -> None:
        """A finished take: when it is a comparison's A, B follows; after B, the pair is shown."""
        step = self.session.comparison_step(take, outcome.result, outcome.ran.tag)
        if step is None:
            return
        if step.next_request is not None:
            self.view.compare.show_progress("rendering B ...")
            self.core.generate(step.next_request, tag=step.tag)
            return
        self.view.compare.show_pair(*step.pair)
        self.view.show_status(step.summary, 8000)

    def listen_comparison(self) -> None:
        if self.session.ab_pair is not None:
            self._play_ab(*self.session.ab_pair)

    def blind_test_comparison(self):
        """The Blind test dialog on the pair just compared; returns it, or None."""
        return self.start_blind_test(self.session.ab_pair) if self.session.ab_pair is not None else None
