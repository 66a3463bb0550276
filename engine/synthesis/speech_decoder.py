"""Speech decoder: codes [frames, 16] -> 24 kHz audio, offline or streamed frame by frame."""
from __future__ import annotations

import numpy as np

from kazeia import _native

from ..model_files.model_file import ModelFile
from .threads import default_threads


def _as_codes(codes, n_quantizers: int, codebook_size: int) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.shape[1] != n_quantizers:
        raise ValueError(f"codes must have shape [frames, {n_quantizers}], got {list(arr.shape)}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"codes must be integers, got {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= codebook_size):
        bad = np.argwhere((arr < 0) | (arr >= codebook_size))[0]
        raise ValueError(f"code {int(arr[tuple(bad)])} at frame {bad[0]}, codebook {bad[1]} is outside "
                         f"[0, {codebook_size})")
    return np.ascontiguousarray(arr, dtype=np.int32)


class DecoderSession:
    """One utterance's decoding: feed frames as they are generated; get the audio they determine.
    The concatenated output equals `SpeechDecoder.decode` of all frames, whatever the feeding
    pattern. `share_compute`: on the decoder's shared runner (one compute buffer for all such
    sessions; they take turns), else on a runner of its own."""

    def __init__(self, decoder: "SpeechDecoder", max_graph_frames: int = 8, profile: bool = False,
                 share_compute: bool = False):
        hp = decoder.model.info.hparams["decoder"]
        self._n_q, self._cb = hp["num_quantizers"], hp["codebook_size"]
        self.sample_rate = decoder.model.info.sample_rate
        if share_compute:
            self._native = _native.SpeechDecoderSession(decoder.shared_runner(),
                                                        reference_chunking=decoder.reference_chunking,
                                                        max_graph_frames=max_graph_frames, profile=profile)
        else:
            self._native = _native.SpeechDecoderSession(decoder._native, decoder.pool,
                                                        reference_chunking=decoder.reference_chunking,
                                                        scheduled=decoder.scheduled,
                                                        max_graph_frames=max_graph_frames, profile=profile)
        self._decoder = decoder   # keeps the weights alive while the session lives
        self._reusable = share_compute and max_graph_frames == 8 and not profile

    @property
    def samples_per_frame(self) -> int:
        return self._native.samples_per_frame

    @property
    def frames_decoded(self) -> int:
        return self._native.frames_decoded

    def push(self, codes) -> np.ndarray:
        self._decoder._last_session = self
        return self._native.push(_as_codes(codes, self._n_q, self._cb))

    def reset(self) -> None:
        self._native.reset()

    def release(self) -> None:
        """No more pushes: its decoder may hand it out again (SpeechDecoder.release)."""
        self._decoder.release(self)

    def placement_report(self) -> dict:
        """Where the last launch ran (see Engine.placement_report)."""
        return self._native.placement_report()

    def profile(self) -> dict[str, tuple[float, float]]:
        """With profile=True (every node launched alone: slow): "<stage it follows>/<op>" ->
        (seconds, matrix-product flops) since the session was made."""
        flops = self._native.profile_flops()
        return {k: (s, flops.get(k, 0.0)) for k, s in self._native.profile().items()}


class SpeechDecoder:
    """Offline decoding. `reference_chunking` (default) decodes in 300-frame chunks restarted with
    25 frames of left context, exactly as the reference does; False decodes in one pass."""

    def __init__(self, model: ModelFile, threads: int | None = None, reference_chunking: bool = True,
                 pool: "_native.ThreadPool | None" = None, scheduled: bool = False, weights_buffer: str = "",
                 device: str = "", weights: "_native.SpeechDecoder | None" = None):
        self.model = model
        self.pool = pool or _native.ThreadPool(threads or default_threads())   # shared by all sessions
        self.threads = self.pool.n_threads
        self.scheduled = scheduled   # compute through ggml_backend_sched (placement accel-sched)
        self.reference_chunking = reference_chunking
        # weights prepared once, shared by sessions; weights_buffer: a host-visible buffer type to keep
        # them in (placement accel-weights); device: the accelerator whose memory holds them, on which
        # scheduled sessions run (accel-sched); weights: another decoder's, shared (SpeechDecoder.beside)
        self._native = weights or _native.SpeechDecoder(model.native, weights_buffer=weights_buffer, device=device)
        self._runner: _native.SpeechDecoderRunner | None = None
        self._offline: DecoderSession | None = None
        self._last_session: DecoderSession | None = None
        # finished shared-compute sessions, handed out again after a reset: a new session allocates
        # its graphs and buffers and touches them on its first push (5-40 ms of a first frame's
        # time to audio here)
        self._idle: list[DecoderSession] = []

    def beside(self, pool: "_native.ThreadPool") -> "SpeechDecoder":
        """The same weights decoded on another thread pool (a decoder running beside generation)."""
        return SpeechDecoder(self.model, reference_chunking=self.reference_chunking, pool=pool,
                             scheduled=self.scheduled, weights=self._native)

    def placement_report(self) -> dict | None:
        """Where the last decoding launch of any of its sessions ran (None before the first)."""
        session = self._last_session
        report = session.placement_report() if session is not None else None
        return report if report and report["nodes"] else None

    def shared_runner(self) -> "_native.SpeechDecoderRunner":
        """The compute its share_compute sessions take turns on (made on first use)."""
        if self._runner is None:
            self._runner = _native.SpeechDecoderRunner(self._native, self.pool, scheduled=self.scheduled)
        return self._runner

    def session(self, share_compute: bool = False) -> DecoderSession:
        """`share_compute`: one compute buffer with the decoder's other such sessions (they take
        turns: for callers that mostly push to one at a time, as the engine does); such a session
        may be one released earlier, reset."""
        if share_compute:
            try:
                reused = self._idle.pop()
            except IndexError:
                pass
            else:
                reused.reset()
                return reused
        return DecoderSession(self, share_compute=share_compute)

    def release(self, session: DecoderSession) -> None:
        """`session` will not be pushed again by its caller: a later session(share_compute=True) may
        reuse it (a few are kept; others are left to the garbage collector)."""
        if session._reusable and session._decoder is self and session not in self._idle and len(self._idle) < 2:
            self._idle.append(session)

    def decode(self, codes) -> np.ndarray:
        """All frames of one utterance (the offline session is reused: no per-call setup)."""
        if self._offline is None:
            self._offline = self.session()
        self._offline.reset()
        return self._offline.push(codes)

    def stages(self, codes) -> dict[str, np.ndarray]:
        """Every stage's output [time, channels] (for parity checks), decoded in one pass."""
        s = self.session()
        return s._native.decode_stages(_as_codes(codes, s._n_q, s._cb))
