"""The Python API: load a model, synthesize text to audio, or stream audio while frames are made."""
from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Iterator

import numpy as np

from kazeia import _native

from . import placement as placements
from .model_file import ModelFile, ModelInfo
from .prompt import PromptBuilder, PromptPlan, Voice
from .speech_decoder import SpeechDecoder
from .threads import ThreadPolicy, check_threads, default_threads

FRAMES_PER_TOKEN = 16      # slow, emotional speech stays far below this (normal speech: ~4)
HEADROOM_FRAMES = 100      # 8 s on top, for short texts
DECODE_EVERY = 4           # frames per streaming decoder launch after the first (320 ms of audio)
MAX_TEXT_TOKENS = 2048     # one request: several minutes of speech; longer texts go in parts


@dataclass
class SamplingParams:
    """Token choice for the talker (code 0 of each frame) and the code predictor (codes 1..15).
    `from_model` takes the defaults stored in the model file."""
    do_sample: bool = True
    temperature: float = 0.9
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.05
    cp_do_sample: bool = True
    cp_temperature: float = 0.9
    cp_top_k: int = 50
    cp_top_p: float = 1.0
    seed: int = 0
    max_frames: int | None = None   # None: derived from the text length (runaway guard)

    @classmethod
    def from_model(cls, info: ModelInfo, **overrides) -> "SamplingParams":
        d = info.sampling_defaults
        base = cls(do_sample=d.get("do_sample", True), temperature=d.get("temperature", 0.9), top_k=d.get("top_k", 50),
                   top_p=d.get("top_p", 1.0), repetition_penalty=d.get("repetition_penalty", 1.05),
                   cp_do_sample=d.get("subtalker_do_sample", True), cp_temperature=d.get("subtalker_temperature", 0.9),
                   cp_top_k=d.get("subtalker_top_k", 50), cp_top_p=d.get("subtalker_top_p", 1.0))
        return replace(base, **overrides)

    def greedy(self) -> "SamplingParams":
        return replace(self, do_sample=False, cp_do_sample=False)

    def validate(self) -> None:
        for name in ("temperature", "cp_temperature"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        for name in ("top_p", "cp_top_p"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1]")
        for name in ("top_k", "cp_top_k"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = off)")
        if self.repetition_penalty <= 0:
            raise ValueError("repetition_penalty must be positive")
        if self.max_frames is not None and self.max_frames < 1:
            raise ValueError("max_frames must be at least 1")
        if not 0 <= self.seed < 2 ** 64:
            raise ValueError("seed must be in [0, 2**64)")


@dataclass
class Timings:
    """Per-stage timings of one synthesis; CLI, bench and GUI all print from this."""
    tokenize_ms: float = 0.0
    prefill_ms: float = 0.0
    talker_ms: list[float] = field(default_factory=list)           # per frame
    code_predictor_ms: list[float] = field(default_factory=list)   # per frame
    decoder_ms: list[float] = field(default_factory=list)          # per frame (streaming) or spread evenly
    ttfa_ms: float = 0.0        # call start -> first audio available
    total_ms: float = 0.0
    frames: int = 0
    frame_seconds: float = 0.08

    @property
    def audio_seconds(self) -> float:
        return self.frames * self.frame_seconds

    @property
    def rtf(self) -> float:
        """compute time / audio time (below 1: faster than real time)"""
        return (self.total_ms / 1000) / self.audio_seconds if self.frames else float("nan")

    def mean_ms(self, stage: str) -> float:
        values = getattr(self, f"{stage}_ms")
        return float(np.mean(values)) if values else 0.0

    def summary(self) -> str:
        return (f"tokenize {self.tokenize_ms:.1f} ms, prefill {self.prefill_ms:.1f} ms; per frame: talker "
                f"{self.mean_ms('talker'):.1f} ms, code predictor {self.mean_ms('code_predictor'):.1f} ms, decoder "
                f"{self.mean_ms('decoder'):.1f} ms; {self.frames} frames ({self.audio_seconds:.2f} s), TTFA "
                f"{self.ttfa_ms:.0f} ms, RTF {self.rtf:.2f}")


@dataclass
class Result:
    audio: np.ndarray          # float32, mono
    sample_rate: int
    codes: np.ndarray          # [frames, 16]
    timings: Timings
    stop_reason: str           # eos | limit | cancelled
    placement_report: list = field(default_factory=list)   # where each launch ran (Engine.placement_report)


@dataclass
class Request:
    """One utterance for Engine.synthesize_many (the arguments of synthesize)."""
    text: str
    speaker: str | None = None
    language: str | None = "auto"
    instruct: str | None = None
    voice: Voice | None = None
    sampling: SamplingParams | None = None
    streaming_text: bool | None = None


@dataclass
class Chunk:
    audio: np.ndarray          # the samples of `frames` new frames
    first_frame: int
    frames: int
    timings: Timings           # running totals so far


class Engine:
    """A loaded model ready to speak. One synthesis runs at a time per engine."""

    def __init__(self, model: ModelFile, threads: int | None = None, placement: str | dict | None = None,
                 max_batch: int = 1):
        """`max_batch` > 1: streams started from any thread run together, up to that many in one
        batch (one talker and one code-predictor launch per frame for all of them); 1: one at a time."""
        from .platform_info import check_cpu_level
        check_cpu_level()   # a bad KAZEIA_CPU: ValueError naming it, before any kernel is chosen
        self.model = model
        from .batch import Batcher
        self._batcher = Batcher(self, max_batch)
        self.threads = check_threads(default_threads() if threads is None else threads)
        self._pool = _native.ThreadPool(self.threads)   # one persistent pool for every stage
        self.thread_policy = ThreadPolicy(self._pool)   # how many of them each launch uses
        self._prompts = PromptBuilder(model)
        self._lock = threading.Lock()
        self.cp_single_launch = True   # the code predictor's 15 sub-steps in one graph launch
        self.talker_persistent = True   # the talker step graph built once, then only fed
        self.set_placement(placement)

    @classmethod
    def load(cls, path: str | os.PathLike, threads: int | None = None, placement: str | dict | None = None,
             max_batch: int = 1) -> "Engine":
        """`path`: a GGUF file, or "demo" for the bundled demo model (as on the command line)."""
        from .demo import resolve_model
        return cls(ModelFile(resolve_model(path)), threads=threads, placement=placement, max_batch=max_batch)

    @property
    def max_batch(self) -> int:
        return self._batcher.max_batch

    def set_placement(self, placement: str | dict | None) -> None:
        """cpu | accel-weights | accel-sched, for all stages or per stage ({"talker": ...}).
        Takes effect on the next synthesis; the model file is not read again."""
        chosen = placements.resolve(placement)
        plans = placements.stage_plans(chosen)
        talker, cp, decoder = plans["talker"], plans["code_predictor"], plans["decoder"]
        with self._lock:
            self._native = _native.TtsEngine(self.model.native, self._pool,
                                             talker_scheduled=talker.scheduled, code_predictor_scheduled=cp.scheduled,
                                             talker_weights_buffer=talker.weights_buffer,
                                             code_predictor_weights_buffer=cp.weights_buffer,
                                             talker_device=talker.device, code_predictor_device=cp.device)
            self._decoder = SpeechDecoder(self.model, pool=self._pool, scheduled=decoder.scheduled,
                                          weights_buffer=decoder.weights_buffer, device=decoder.device)
            self.placement = chosen

    def set_threads(self, threads: int) -> None:
        """Compute threads from the next synthesis on (a new pool; the model file is not read again)."""
        threads = check_threads(threads)
        if threads == self.threads:
            return
        with self._lock:
            self._pool = _native.ThreadPool(threads)
            self.thread_policy = ThreadPolicy(self._pool, adaptive=self.thread_policy.adaptive)
            self.threads = threads
        self.set_placement(self.placement)   # rebinds every stage to the new pool

    def placement_report(self) -> list[dict]:
        """Where each launch kind of the last synthesis ran, stage by stage: splits, ops per device,
        bytes copied between devices and the ops a scheduled stage left on the CPU, with why
        (kazeia.engine.placement.where_it_ran formats one)."""
        with self._lock:
            return self._report()

    def _report(self) -> list[dict]:   # (the caller holds the lock)
        reports = [dict(r, mode=self.placement[r["stage"]]) for r in self._native.placement_report()]
        decoder = self._decoder.placement_report()
        if decoder is not None:
            reports.append(dict(decoder, stage="decoder", launch="chunk", mode=self.placement["decoder"]))
        return reports

    @property
    def info(self) -> ModelInfo:
        return self.model.info

    @staticmethod
    def devices() -> list[dict]:
        return _native.devices()

    # -- requests ----------------------------------------------------------------------------
    def _prepare(self, text, speaker, language, instruct, voice, sampling, streaming_text):
        start = time.perf_counter()
        sampling = sampling or SamplingParams.from_model(self.info)
        sampling.validate()
        plan = self._prompts.build(text, speaker=speaker, language=language, instruct=instruct, voice=voice,
                                   streaming_text=streaming_text)
        if plan.body_tokens > MAX_TEXT_TOKENS:
            raise ValueError(f"text too long: {plan.body_tokens} tokens in one request (at most {MAX_TEXT_TOKENS}, "
                             "several minutes of speech); split it into paragraphs")
        positions = len(plan) + self.max_frames_for(plan, sampling) + 1
        if positions > self.info.hparams["talker"]["max_position_embeddings"]:
            raise ValueError(f"prompt and frame limit need {positions} positions; the model handles "
                             f"{self.info.hparams['talker']['max_position_embeddings']}: shorten the text or max_frames")
        timings = Timings(tokenize_ms=1000 * (time.perf_counter() - start),
                          frame_seconds=1 / self.info.frame_rate)
        return plan, sampling, timings, start

    def max_frames_for(self, plan: PromptPlan, sampling: SamplingParams) -> int:
        """Runaway guard: generous for slow speech, bounded by the model's own limit."""
        limit = int(self.info.sampling_defaults.get("max_new_tokens", 8192)) - 1
        if sampling.max_frames is not None:
            return min(sampling.max_frames, limit)
        return min(HEADROOM_FRAMES + FRAMES_PER_TOKEN * plan.body_tokens, limit)

    def _request(self, plan: PromptPlan, sampling: SamplingParams) -> "_native.GenerationRequest":
        """The native form of one request."""
        def stage(do, t, k, p):
            return _native.SamplingConfig(do_sample=bool(do), temperature=float(t), top_k=int(k), top_p=float(p))
        return _native.GenerationRequest(
            trailing_text_ids=np.asarray(plan.trailing_text_ids, np.int32),
            talker=stage(sampling.do_sample, sampling.temperature, sampling.top_k, sampling.top_p),
            code_predictor=stage(sampling.cp_do_sample, sampling.cp_temperature, sampling.cp_top_k, sampling.cp_top_p),
            repetition_penalty=float(sampling.repetition_penalty), min_new_tokens=2,
            max_frames=self.max_frames_for(plan, sampling), seed=int(sampling.seed),
            cp_single_launch=self.cp_single_launch, talker_persistent=self.talker_persistent,
            **plan.arrays(self._prompts.hidden))

    def _generate(self, plan: PromptPlan, sampling: SamplingParams, on_frame) -> dict:
        return self._native.generate(self._request(plan, sampling), on_frame)

    def _open(self, plan: PromptPlan, sampling: SamplingParams):
        """A native session (prefilled) for the batch worker."""
        return self._native.open(self._request(plan, sampling))

    def synthesize(self, text: str, *, speaker: str | None = None, language: str | None = "auto",
                   instruct: str | None = None, voice: Voice | None = None, sampling: SamplingParams | None = None,
                   streaming_text: bool | None = None) -> Result:
        """Generate all frames, then decode them (exactly as the reference decodes)."""
        with self._lock:
            plan, sampling, timings, start = self._prepare(text, speaker, language, instruct, voice, sampling,
                                                           streaming_text)
            policy = self.thread_policy
            policy.restart()
            out = self._generate(plan, sampling,
                                 lambda index, codes, talker_ms, cp_ms, prefill_ms: policy.observe(talker_ms + cp_ms) or True)
            codes = out["codes"]
            t_dec = time.perf_counter()
            audio = self._decode(codes, voice)
            dec_ms = 1000 * (time.perf_counter() - t_dec)
            self._fill(timings, out, [dec_ms / max(len(codes), 1)] * len(codes), start)
            timings.ttfa_ms = timings.total_ms
            return Result(audio, self.info.sample_rate, codes, timings, out["stop_reason"], self._report())

    def stream(self, text: str, *, speaker: str | None = None, language: str | None = "auto",
               instruct: str | None = None, voice: Voice | None = None, sampling: SamplingParams | None = None,
               streaming_text: bool | None = None, decode_every: int = DECODE_EVERY) -> "AudioStream":
        """Audio chunks as frames are produced (through the streaming decoder). Iterate it; call
        cancel() to stop within one frame; `result` holds the totals once it has finished.
        The first frame is decoded alone (time to first audio); later ones `decode_every` at a
        time: each decoder launch streams all its weights, so one frame per launch costs ~1.5x."""
        if not isinstance(decode_every, int) or decode_every < 1:
            raise ValueError(f"decode_every must be a positive integer, got {decode_every!r}")
        plan, sampling, timings, start = self._prepare(text, speaker, language, instruct, voice, sampling,
                                                       streaming_text)
        return AudioStream(self, plan, sampling, timings, start, icl_codes(voice), decode_every,
                           batcher=self._batcher if self.max_batch > 1 else None)

    def warm_up(self) -> None:
        """One short stream, its audio dropped: a request's one-time costs (the streaming decoder's
        graphs and state, the prompt's buffers) are paid now, so the first real request's latencies
        are those of the ones after it. Any variant (a Base model hears a silent x-vector)."""
        request: dict = {}
        if self.info.variant == "custom_voice":
            request["speaker"] = self.info.speakers[0].name
        elif self.info.variant == "voice_design":
            request["instruct"] = "A calm voice."
        else:
            request["voice"] = Voice(np.zeros(self._prompts.hidden, np.float32))
        for _ in self.stream("Warm up.", sampling=SamplingParams.from_model(self.info, max_frames=6), **request):
            pass

    def batcher(self, max_batch: int) -> "Batcher":
        """A batch worker of its own for this engine (streams given it run together, up to max_batch)."""
        from .batch import Batcher
        return Batcher(self, max_batch)

    def submit(self, request: "Request", batcher: "Batcher", decode_every: int = DECODE_EVERY) -> "AudioStream":
        """`request` as a stream run by `batcher` (Engine.batcher)."""
        plan, sampling, timings, start = self._prepare(request.text, request.speaker, request.language,
                                                       request.instruct, request.voice, request.sampling,
                                                       request.streaming_text)
        return AudioStream(self, plan, sampling, timings, start, icl_codes(request.voice), decode_every,
                           batcher=batcher)

    def synthesize_many(self, requests, max_batch: int | None = None) -> list[Result]:
        """Several utterances at once, `max_batch` (default: the engine's, at least 2) in one batch:
        `requests` are Request objects or dicts of synthesize()'s arguments. Results come back in
        order; each equals what synthesize() gives for the same request and seed (audio decoded as a
        stream, which equals offline decoding bit for bit). A request that fails raises after all
        have ended."""
        from .batch import Batcher
        batcher = Batcher(self, max_batch or max(self.max_batch, 2))
        requests = [r if isinstance(r, Request) else Request(**r) for r in requests]
        prepared = [(self._prepare(r.text, r.speaker, r.language, r.instruct, r.voice, r.sampling, r.streaming_text),
                     icl_codes(r.voice)) for r in requests]   # every request checked before any starts
        streams = [AudioStream(self, *p, prime, DECODE_EVERY, batcher=batcher) for p, prime in prepared]
        for s in streams:
            s._ended.wait()
        for s in streams:
            if s.error is not None:
                raise s.error
        return [s.result for s in streams]

    # -- what measurements read (teacher forcing, the decoder) --------------------------------
    @property
    def decoder(self) -> SpeechDecoder:
        """The speech decoder under the engine's placement."""
        return self._decoder

    def decode(self, codes) -> np.ndarray:
        """Codes [frames, 16] -> audio, offline, under the engine's placement."""
        with self._lock:
            return self._decoder.decode(codes) if len(codes) else np.zeros(0, np.float32)

    def teacher_forced(self, text: str, codes, **request) -> tuple[np.ndarray, np.ndarray]:
        """The talker fed `text` (synthesize()'s request arguments) and then the given frames
        [n, 16]: its logits [n + 1, vocab] and final hidden states [n + 1, hidden] before each frame
        and after the last (for divergence measurements)."""
        plan = self._prompts.build(text, **request)
        with self._lock:
            return self._native.teacher_forced(
                **plan.arrays(self._prompts.hidden), trailing_text_ids=np.asarray(plan.trailing_text_ids, np.int32),
                codes=np.ascontiguousarray(codes, np.int32))

    def code_predictor_logits(self, hidden, frame) -> np.ndarray:
        """The code predictor's logits [15, vocab] for a talker hidden state, fed the frame's codes."""
        with self._lock:
            return self._native.code_predictor_logits(np.asarray(hidden, np.float32), np.asarray(frame, np.int32))

    def _decode(self, codes: np.ndarray, voice: Voice | None) -> np.ndarray:
        """In-context cloning decodes the reference codes first and cuts their share of the
        waveform, with the reference's own rounding (int(ref / total * samples))."""
        ref = icl_codes(voice)
        if ref is None:
            return self._decoder.decode(codes) if len(codes) else np.zeros(0, np.float32)
        full = self._decoder.decode(np.concatenate([ref, codes]))
        cut = int(len(ref) / max(len(ref) + len(codes), 1) * len(full))
        return full[cut:]

    @staticmethod
    def _fill(timings: Timings, out: dict, decoder_ms: list[float], start: float) -> None:
        timings.prefill_ms = float(out["prefill_ms"])
        t = out["timings_ms"]
        timings.talker_ms = [float(x) for x in t[:, 0]]
        timings.code_predictor_ms = [float(x) for x in t[:, 1]]
        timings.decoder_ms = decoder_ms
        timings.frames = len(out["codes"])
        timings.total_ms = 1000 * (time.perf_counter() - start)


def icl_codes(voice: Voice | None) -> np.ndarray | None:
    if voice is None or voice.ref_codes is None:
        return None
    return np.asarray(voice.ref_codes, np.int32)


_DONE = object()


if TYPE_CHECKING:
    from .batch import Batcher


class AudioStream:
    """Iterator of Chunk. Generation runs on a worker thread with the GIL released: its own, or the
    engine's batch worker (Engine(max_batch=N): several streams advance together)."""

    def __init__(self, engine: Engine, plan: PromptPlan, sampling: SamplingParams, timings: Timings, start: float,
                 prime_codes: np.ndarray | None = None, decode_every: int = 1, batcher: "Batcher | None" = None):
        self._engine = engine
        self._plan, self._sampling = plan, sampling
        self._queue: queue.Queue = queue.Queue()
        self._cancel = threading.Event()
        self._ended = threading.Event()
        self._timings = timings
        self._start = start
        self._codes: list[np.ndarray] = []
        self._pending: list[np.ndarray] = []   # generated, not yet decoded
        self._decode_every = decode_every
        self._audio: list[np.ndarray] = []
        self.result: Result | None = None
        self.error: BaseException | None = None
        self._decoder = engine._decoder.stream(share_compute=True)   # pushed under the engine's lock
        # in-context cloning: the decoder hears the reference codes first (their audio is dropped;
        # the reference cuts int(ref / total * samples), which can keep one more sample: see README)
        self._prime_codes = prime_codes
        self._thread: threading.Thread | None = None
        if batcher is not None:
            batcher.submit(self)
        else:
            self._thread = threading.Thread(target=self._run, daemon=True, name="kazeia-synthesis")
            self._thread.start()

    def _begin(self) -> None:   # (the caller holds the engine's lock)
        self._engine.thread_policy.restart()
        if self._prime_codes is not None:
            self._decoder.push(self._prime_codes)

    def _open_session(self):
        """A native session for this request, prefilled (called by the batch worker)."""
        self._begin()
        return self._engine._open(self._plan, self._sampling)

    def _cancelled(self) -> bool:
        return self._cancel.is_set()

    def _frames_seen(self) -> int:
        return len(self._codes)

    def _on_frame(self, index: int, codes: np.ndarray, talker_ms: float, cp_ms: float,
                  prefill_ms: float | None) -> bool:
        if self._cancel.is_set():
            return False
        t = self._timings
        if prefill_ms is not None:
            t.prefill_ms = prefill_ms
        self._engine.thread_policy.observe(talker_ms + cp_ms)
        t.talker_ms.append(talker_ms)
        t.code_predictor_ms.append(cp_ms)
        t.frames = index + 1
        self._codes.append(codes.copy())
        self._pending.append(self._codes[-1])
        if index == 0 or len(self._pending) >= self._decode_every:
            self._decode_pending()
        return True

    def _decode_pending(self) -> None:
        if not self._pending:
            return
        n, first = len(self._pending), len(self._codes) - len(self._pending)
        t0 = time.perf_counter()
        audio = self._decoder.push(np.stack(self._pending))
        t = self._timings
        t.decoder_ms.extend([1000 * (time.perf_counter() - t0) / n] * n)   # the launch's cost, shared
        if first == 0:
            t.ttfa_ms = 1000 * (time.perf_counter() - self._start)
        t.total_ms = 1000 * (time.perf_counter() - self._start)
        self._pending.clear()
        self._audio.append(audio)
        self._queue.put(Chunk(audio, first, n, replace(t, talker_ms=list(t.talker_ms),
                                                       code_predictor_ms=list(t.code_predictor_ms),
                                                       decoder_ms=list(t.decoder_ms))))

    def _finish(self, out: dict, cancelled: bool = False) -> None:
        """Generation has ended (the caller holds the engine's lock)."""
        try:
            codes = out["codes"]
            reason = "cancelled" if cancelled else out["stop_reason"]
            if reason == "cancelled":   # stop now: frames not yet heard are dropped
                codes = codes[:len(self._codes) - len(self._pending)]
                self._pending.clear()
            else:
                self._decode_pending()
            self._release_decoder()
            t = self._timings
            t.prefill_ms = float(out["prefill_ms"])
            t.frames = len(codes)
            del t.talker_ms[len(codes):], t.code_predictor_ms[len(codes):]
            t.total_ms = 1000 * (time.perf_counter() - self._start)
            audio = np.concatenate(self._audio) if self._audio else np.zeros(0, np.float32)
            self.result = Result(audio, self._engine.info.sample_rate, codes, t, reason, self._engine._report())
        except BaseException as e:
            self.error = e
        self._end()

    def _fail(self, error: BaseException) -> None:
        self.error = error   # the decoder stream is not reused: a push may have failed half-way
        self._end()

    def _release_decoder(self) -> None:
        """Every push of this stream is done: the engine's next stream may reuse its decoder stream."""
        decoder, self._decoder = self._decoder, None
        if decoder is not None:
            decoder._decoder.release(decoder)

    def _end(self) -> None:
        self._ended.set()
        self._queue.put(_DONE)

    def _run(self) -> None:
        try:
            with self._engine._lock:
                self._begin()
                out = self._engine._generate(self._plan, self._sampling, self._on_frame)
                self._finish(out)
        except BaseException as e:   # surfaced to the consumer by __next__
            self._fail(e)

    def __iter__(self) -> Iterator[Chunk]:
        return self

    def __next__(self) -> Chunk:
        item = self._queue.get()
        if item is _DONE:
            self._queue.put(_DONE)
            if self.error is not None:
                raise self.error
            raise StopIteration
        return item

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def ended(self) -> bool:
        """Generation has ended (result or error is set)."""
        return self._ended.is_set()

    def wait(self, timeout: float | None = None) -> Result | None:
        """Blocks until generation has ended (drains nothing); returns the result."""
        self._ended.wait(timeout)
        if self.error is not None:
            raise self.error
        return self.result

    def __enter__(self) -> "AudioStream":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()
        self._ended.wait()
