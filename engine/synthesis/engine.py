"""The Python API's engine: load a model, then speak a Request, the one way in for every front end:
Engine.plan (one prompt or chunks, every prompt checked), Engine.take (the whole take once it has
ended), Engine.open_take (the take as it is made: one prompt's stream, a chunked take, or a live take
whose text is still being written). The takes call back into it through synthesis.host.TakeHost;
the streams themselves: prompt_stream.py, chunked_take.py, live_take.py; several at once: batch.py."""
from __future__ import annotations

import os
import threading

import numpy as np

from kazeia import _native

from . import placement as placements
from .batch import Batcher
from .chunked_take import ChunkedTake, start_take, whole_take
from .live_take import LiveTake
from .long_text import LongResult, TakePlan, plan_take
from ..model_files.demo import resolve_model
from ..model_files.model_file import ModelFile, ModelInfo
from .overlap import DecoderWorker, default_overlap
from ..platform_info import check_cpu_level
from .prompt import PromptBuilder, PromptPlan, Voice
from .prompt_stream import DECODE_EVERY, PromptStream
from .requests import (FRAMES_PER_TOKEN, HEADROOM_FRAMES, MAX_TEXT_TOKENS, Request, Result,
                       SamplingParams)
from .speech_decoder import SpeechDecoder
from .threads import ThreadPolicy, check_threads, default_threads
from .whole_prompt import whole_prompt


class Engine:
    """A loaded model ready to speak. One synthesis runs at a time per engine."""

    def __init__(self, model: ModelFile, threads: int | None = None, placement: str | dict | None = None,
                 max_batch: int = 1, overlap: bool | None = None):
        """`max_batch` > 1: streams started from any thread run together, up to that many in one
        batch (one talker and one code-predictor launch per frame for all of them); 1: one at a time.
        `overlap`: the decoder works on the frames made so far while the next are generated, on
        part of the cores (engine/synthesis/overlap.py; the same audio); None: $KAZEIA_OVERLAP, else off."""
        check_cpu_level()   # a bad KAZEIA_CPU: ValueError naming it, before any kernel is chosen
        self.model = model
        self._batcher = Batcher(self, max_batch)
        self.threads = check_threads(default_threads() if threads is None else threads)
        self._pool = _native.ThreadPool(self.threads)   # one persistent pool for every stage
        self.thread_policy = ThreadPolicy(self._pool)   # how many of them each launch uses
        self.prompts = PromptBuilder(model)
        self.lock = threading.Lock()   # one caller at a time makes frames (a stream's runner, the batch worker)
        self.cp_single_launch = True   # the code predictor's 15 sub-steps in one graph launch
        self.talker_persistent = True   # the talker step graph built once, then only fed
        self.overlap = default_overlap() if overlap is None else bool(overlap)
        self.overlap_worker: DecoderWorker | None = None   # set while overlapping (bound with the placement)
        self.set_placement(placement)

    @classmethod
    def load(cls, path: str | os.PathLike, threads: int | None = None, placement: str | dict | None = None,
             max_batch: int = 1, overlap: bool | None = None) -> "Engine":
        """`path`: a GGUF file, or "demo" for the bundled demo model (as on the command line)."""
        return cls(ModelFile(resolve_model(path)), threads=threads, placement=placement, max_batch=max_batch,
                   overlap=overlap)

    @property
    def max_batch(self) -> int:
        return self._batcher.max_batch

    @property
    def shared_batcher(self) -> Batcher:
        """The batch worker every take of this engine shares unless given another (a live take's always)."""
        return self._batcher

    def set_placement(self, placement: str | dict | None) -> None:
        """cpu | accel-weights | accel-sched, for all stages or per stage ({"talker": ...}).
        Takes effect on the next synthesis; the model file is not read again."""
        chosen = placements.resolve(placement)
        plans = placements.stage_plans(chosen)
        talker, cp, decoder = plans["talker"], plans["code_predictor"], plans["decoder"]
        with self.lock:
            # the weights bound once for this placement; one runner computes over them (a second
            # runner on the same weights could run beside it on its own pool)
            self._weights = _native.TtsWeights(self.model.native,
                                               talker_scheduled=talker.scheduled, code_predictor_scheduled=cp.scheduled,
                                               talker_weights_buffer=talker.weights_buffer,
                                               code_predictor_weights_buffer=cp.weights_buffer,
                                               talker_device=talker.device, code_predictor_device=cp.device)
            self._runner = _native.TtsRunner(self._weights, self._pool)
            self._decoder = SpeechDecoder(self.model, pool=self._pool, scheduled=decoder.scheduled,
                                          weights_buffer=decoder.weights_buffer, device=decoder.device)
            self.placement = chosen
            self._bind_overlap()

    def set_overlap(self, overlap: bool) -> None:
        """Decoding beside generation (True) or after each frame's generation (False), from the next
        synthesis on."""
        with self.lock:
            self.overlap = bool(overlap)
            self._bind_overlap()

    def _bind_overlap(self) -> None:
        """The decoder worker and its pool, on the decoder's weights (with one thread there is
        nothing to share: the stages take turns)."""
        if self.overlap and self.threads > 1:
            if self.overlap_worker is None or self.overlap_worker.pool.n_threads != self.threads:
                self.overlap_worker = DecoderWorker(_native.ThreadPool(self.threads))
            self.beside_decoder = self._decoder.beside(self.overlap_worker.pool)
        else:
            self.overlap_worker, self.beside_decoder = None, self._decoder
        self.thread_policy.overlap = self.overlap_worker

    def set_threads(self, threads: int) -> None:
        """Compute threads from the next synthesis on (a new pool; the model file is not read again)."""
        threads = check_threads(threads)
        if threads == self.threads:
            return
        with self.lock:
            self._pool = _native.ThreadPool(threads)
            self.thread_policy = ThreadPolicy(self._pool, adaptive=self.thread_policy.adaptive)
            self.threads = threads
        self.set_placement(self.placement)   # rebinds every stage to the new pool

    def placement_report(self) -> list[dict]:
        """Where each launch kind of the last synthesis ran, stage by stage: splits, ops per device,
        bytes copied between devices and the ops a scheduled stage left on the CPU, with why
        (kazeia.engine.synthesis.placement.where_it_ran formats one)."""
        with self.lock:
            return self.report_held()

    def report_held(self) -> list[dict]:
        """placement_report for a caller that holds `lock` already."""
        reports = [dict(r, mode=self.placement[r["stage"]]) for r in self._runner.placement_report()]
        decoder = (self.beside_decoder if self.overlap_worker is not None else self._decoder).placement_report()
        if decoder is not None:
            reports.append(dict(decoder, stage="decoder", launch="chunk", mode=self.placement["decoder"]))
        return reports

    @property
    def info(self) -> ModelInfo:
        return self.model.info

    @staticmethod
    def devices() -> list[dict]:
        return _native.devices()

    # -- the one way in --------------------------------------------------------------------------
    def plan(self, request: Request) -> TakePlan:
        """`request` as it will be spoken (long_text.plan_take): one prompt or its chunks, by the one
        rule (long_text.one_prompt_text) unless it says otherwise (Request.plan), every prompt checked
        before anything starts. ValueError names what is wrong: a request's own numbers, markup (line
        and column), a prompt the model refuses (long_text.PlanError: every chunk's)."""
        return plan_take(self, request)

    def take(self, request: Request | TakePlan, *, batcher: Batcher | None = None) -> Result | LongResult:
        """The whole take of `request` (or of its plan), once it has ended: one prompt's Result (every
        frame generated, then decoded as the reference decodes; with `batcher`, decoded as a stream
        among that batch's, the same audio), or a take of chunks as a long_text.LongResult (the joined
        audio, each chunk's own result and span, warnings of chunks that reached their frame limit)."""
        plan = request if isinstance(request, TakePlan) else self.plan(request)
        if plan.prompt is not None and batcher is None:
            return whole_prompt(self, plan.prompt)
        return whole_take(self.open_take(plan, batcher=batcher))

    def open_take(self, request: Request | TakePlan, *, text_open: bool = False, batcher: Batcher | None = None,
                  decode_every: int = DECODE_EVERY) -> PromptStream | ChunkedTake | LiveTake:
        """The take of `request` as it is made: iterate for its audio (Chunk), cancel() to stop within
        a frame, `result` once it has ended (wait() for it). One prompt: a PromptStream (the first
        frame decoded alone, for the time to first audio, then `decode_every` frames a launch); chunks:
        a ChunkedTake (the take's joined audio in order, each chunk's own in `takes`); `text_open`: a
        LiveTake whose text (request.text so far) goes on with write(delta) and ends with close(), its
        audio that of the whole text's take, bit for bit. `batcher`: one shared with other takes
        (Engine.batcher; take_many); None: the engine's own when it batches (max_batch > 1), else a
        thread of its own (a chunked take: a batcher of its own)."""
        if not isinstance(decode_every, int) or decode_every < 1:
            raise ValueError(f"decode_every must be a positive integer, got {decode_every!r}")
        if text_open:
            if isinstance(request, TakePlan):
                raise ValueError("a live take is planned as its text is written: give it a Request")
            return LiveTake(self, request, decode_every)
        plan = request if isinstance(request, TakePlan) else self.plan(request)
        return start_take(self, plan, batcher or (self._batcher if self.max_batch > 1 else None), decode_every)

    def take_many(self, requests: list[Request | TakePlan], max_batch: int | None = None) -> list:
        """Several takes in one batch, `max_batch` (default: the engine's, at least 2) at a time: each
        what take() gives (one prompt decoded as a stream, the same audio), in order. All are planned
        before any starts; a take that fails raises once all have ended."""
        batcher = Batcher(self, max_batch or max(self.max_batch, 2))
        plans = [r if isinstance(r, TakePlan) else self.plan(r) for r in requests]
        takes = [self.open_take(p, batcher=batcher) for p in plans]
        results, failure = [], None
        for take in takes:
            try:
                results.append(whole_take(take))
            except BaseException as e:   # (the others run on to their end first)
                failure = failure or e
        if failure is not None:
            raise failure
        return results

    def batcher(self, max_batch: int) -> Batcher:
        """A batch worker of its own for this engine (takes given it run together, up to max_batch)."""
        return Batcher(self, max_batch)

    def warm_up(self) -> None:
        """One short take, its audio dropped: a request's one-time costs (the streaming decoder's
        graphs and state, the prompt's buffers) are paid now, so the first real request's latencies
        are those of the ones after it. Any variant (a Base model hears a silent x-vector)."""
        request = Request("Warm up.", sampling=SamplingParams.from_model(self.info, max_frames=6))
        if self.info.variant == "custom_voice":
            request.speaker = self.info.speakers[0].name
        elif self.info.variant == "voice_design":
            request.instruct = "A calm voice."
        else:
            request.voice = Voice(np.zeros(self.prompts.hidden, np.float32))
        for _ in self.open_take(request):
            pass

    # -- what the takes call back (synthesis.host.TakeHost) -----------------------------------
    def count_text_tokens(self, text: str) -> int:
        """Text tokens `text` costs in a prompt (the long-text front end's budget counts these)."""
        return len(self.prompts.tok.encode(text))

    def frame_limit(self, sampling: SamplingParams) -> int:
        """The most frames a request may make: its own max_frames, bounded by the model's limit."""
        limit = int(self.info.sampling_defaults.get("max_new_tokens", 8192)) - 1
        return limit if sampling.max_frames is None else min(sampling.max_frames, limit)

    def max_frames_for(self, plan: PromptPlan, sampling: SamplingParams, body_tokens: int | None = None) -> int:
        """Runaway guard: generous for slow speech, bounded by frame_limit (body_tokens: the whole
        text's, for a text that was still being written when its session opened)."""
        if sampling.max_frames is not None:
            return self.frame_limit(sampling)
        tokens = plan.body_tokens if body_tokens is None else body_tokens
        return min(HEADROOM_FRAMES + FRAMES_PER_TOKEN * tokens, self.frame_limit(sampling))

    def _request(self, plan: PromptPlan, sampling: SamplingParams,
                 text_open: bool = False) -> "_native.GenerationRequest":
        """The native form of one request (text_open: its text is still being written; its frame
        limit then is that of the longest one-prompt text until the session's close_text)."""
        def stage(do, t, k, p):
            return _native.SamplingConfig(do_sample=bool(do), temperature=float(t), top_k=int(k), top_p=float(p))
        return _native.GenerationRequest(
            trailing_text_ids=np.asarray(plan.trailing_text_ids, np.int32),
            talker=stage(sampling.do_sample, sampling.temperature, sampling.top_k, sampling.top_p),
            code_predictor=stage(sampling.cp_do_sample, sampling.cp_temperature, sampling.cp_top_k, sampling.cp_top_p),
            repetition_penalty=float(sampling.repetition_penalty), min_new_tokens=2,
            max_frames=self.max_frames_for(plan, sampling, MAX_TEXT_TOKENS if text_open else None),
            seed=int(sampling.seed), cp_single_launch=self.cp_single_launch,
            talker_persistent=self.talker_persistent, text_open=text_open, **plan.arrays(self.prompts.hidden))

    def generate_frames(self, plan: PromptPlan, sampling: SamplingParams, on_frame) -> dict:
        """Every frame of one request, `on_frame` called after each (the caller holds `lock`)."""
        return self._runner.generate(self._request(plan, sampling), on_frame)

    def open_session(self, plan: PromptPlan, sampling: SamplingParams, text_open: bool = False):
        """A native session (prefilled) for the batch worker (the caller holds `lock`); text_open:
        its text still being written (plan: PromptBuilder.build(first_ids=...))."""
        return self._runner.open(self._request(plan, sampling, text_open))

    def step(self, sessions: list) -> None:
        """One frame for every session in one talker and one code-predictor launch (the caller
        holds `lock`)."""
        self._runner.step(sessions)

    # -- what measurements read (teacher forcing, the decoder) --------------------------------
    @property
    def decoder(self) -> SpeechDecoder:
        """The speech decoder under the engine's placement."""
        return self._decoder

    def decode(self, codes) -> np.ndarray:
        """Codes [frames, 16] -> audio, offline, under the engine's placement."""
        with self.lock:
            return self._decoder.decode(codes) if len(codes) else np.zeros(0, np.float32)

    def teacher_forced(self, text: str, codes, **request) -> tuple[np.ndarray, np.ndarray]:
        """The talker fed `text` as one prompt (`request`: a Request's speaker, language, instruct,
        voice, streaming_text) and then the given frames [n, 16]: its logits [n + 1, vocab] and final
        hidden states [n + 1, hidden] before each frame and after the last (for divergence measurements)."""
        plan = self.prompts.build(text, **request)
        with self.lock:
            return self._runner.teacher_forced(
                **plan.arrays(self.prompts.hidden), trailing_text_ids=np.asarray(plan.trailing_text_ids, np.int32),
                codes=np.ascontiguousarray(codes, np.int32))

    def code_predictor_logits(self, hidden, frame) -> np.ndarray:
        """The code predictor's logits [15, vocab] for a talker hidden state, fed the frame's codes."""
        with self.lock:
            return self._runner.code_predictor_logits(np.asarray(hidden, np.float32), np.asarray(frame, np.int32))
