"""The Python API's engine: load a model, synthesize text to audio, or stream audio while frames are
made (the stream itself: audio_stream.py; several at once: batch.py)."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from kazeia import _native

from . import placement as placements
from .audio_stream import AudioStream
from .batch import Batcher
from ..model_files.demo import resolve_model
from ..model_files.model_file import ModelFile, ModelInfo
from .overlap import DecoderWorker, default_overlap
from ..platform_info import check_cpu_level
from .prompt import PromptBuilder, PromptPlan, Voice
from .requests import Request, Result, SamplingParams, Timings
from .speech_decoder import SpeechDecoder
from .threads import ThreadPolicy, check_threads, default_threads

if TYPE_CHECKING:
    from .streamed_take import StreamedTake

FRAMES_PER_TOKEN = 16      # slow, emotional speech stays far below this (normal speech: ~4)
HEADROOM_FRAMES = 100      # 8 s on top, for short texts
DECODE_EVERY = 4           # frames per streaming decoder launch after the first (320 ms of audio)
OFFLINE_DECODE_EVERY = 8   # overlapped synthesize(): a decoder graph's most frames (no one listens meanwhile)
MAX_TEXT_TOKENS = 2048     # one request: several minutes of speech; longer texts go in parts


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
        self._prompts = PromptBuilder(model)
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

    # -- requests ----------------------------------------------------------------------------
    def prepare(self, text, speaker=None, language="auto", instruct=None, voice=None, sampling=None,
                streaming_text=None) -> tuple[PromptPlan, SamplingParams, Timings, float]:
        """A request checked and its prompt built: (plan, sampling, timings so far, start time).
        ValueError names what is wrong (sampling, text length, prompt and frame limit)."""
        start = time.perf_counter()
        sampling = sampling or SamplingParams.from_model(self.info)
        sampling.validate()
        plan = self._prompts.build(text, speaker=speaker, language=language, instruct=instruct, voice=voice,
                                   streaming_text=streaming_text)
        if plan.body_tokens > MAX_TEXT_TOKENS:
            raise ValueError(f"text too long: {plan.body_tokens} tokens in one request (at most {MAX_TEXT_TOKENS}, "
                             "several minutes of speech); synthesize and stream split a text of any length into "
                             "chunks unless asked for one prompt")
        positions = len(plan) + self.max_frames_for(plan, sampling) + 1
        if positions > self.info.hparams["talker"]["max_position_embeddings"]:
            raise ValueError(f"prompt and frame limit need {positions} positions; the model handles "
                             f"{self.info.hparams['talker']['max_position_embeddings']}: shorten the text or max_frames")
        timings = Timings(tokenize_ms=1000 * (time.perf_counter() - start),
                          frame_seconds=1 / self.info.frame_rate)
        return plan, sampling, timings, start

    def count_text_tokens(self, text: str) -> int:
        """Text tokens `text` costs in a prompt (the long-text front end's budget counts these)."""
        return len(self._prompts.tok.encode(text))

    def _prepare_request(self, r: Request):
        return self.prepare(r.text, r.speaker, r.language, r.instruct, r.voice, r.sampling, r.streaming_text)

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
            talker_persistent=self.talker_persistent, text_open=text_open, **plan.arrays(self._prompts.hidden))

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

    def synthesize(self, text: str, *, speaker: str | None = None, language: str | None = "auto",
                   instruct: str | None = None, voice: Voice | None = None, sampling: SamplingParams | None = None,
                   streaming_text: bool | None = None, one_prompt: bool = False, lexicon=None) -> Result:
        """Any text to one take (markup, dialogue, pauses, any length: docs/speaking.md). A text that
        is one chunk is one prompt: all frames generated, then decoded exactly as the reference
        decodes. Otherwise its chunks (Engine.compose) run batched and are joined; the Result is the
        whole take (Engine.speak gives each chunk's too). `one_prompt`: the text as given, no markup
        and no splitting, in one prompt (the reference's unit). `lexicon`: text.lexicon.Lexicon."""
        if not one_prompt:
            prompt, long = self._prompt_or_long(Request(text, speaker, language, instruct, voice, sampling,
                                                        streaming_text), lexicon)
            if long is not None:
                return long.wait()
            text, speaker, language, instruct, voice, sampling = (prompt.text, prompt.speaker, prompt.language,
                                                                  prompt.instruct, prompt.voice, prompt.sampling)
        if self.overlap_worker is not None:
            return self._synthesize_overlapped(*self.prepare(text, speaker, language, instruct, voice, sampling,
                                                             streaming_text), voice)
        with self.lock:
            plan, sampling, timings, start = self.prepare(text, speaker, language, instruct, voice, sampling,
                                                           streaming_text)
            policy = self.thread_policy
            policy.restart()
            out = self.generate_frames(plan, sampling,
                                 lambda index, codes, talker_ms, cp_ms, prefill_ms: policy.observe(talker_ms + cp_ms) or True)
            codes = out["codes"]
            t_dec = time.perf_counter()
            audio = self._decode(codes, voice)
            dec_ms = 1000 * (time.perf_counter() - t_dec)
            self._fill(timings, out, [dec_ms / max(len(codes), 1)] * len(codes), start)
            timings.ttfa_ms = timings.total_ms
            return Result(audio, self.info.sample_rate, codes, timings, out["stop_reason"], self.report_held())

    def _synthesize_overlapped(self, plan, sampling, timings, start, voice) -> Result:
        """synthesize() with the decoder beside generation: a stream, its chunks joined (a stream
        equals offline decoding bit for bit), and in-context cloning cut as offline does."""
        stream = AudioStream(self, plan, sampling, timings, start, icl_codes(voice), OFFLINE_DECODE_EVERY)
        stream.join()
        if stream.error is not None:
            raise stream.error
        result = stream.result
        ref = icl_codes(voice)
        if ref is not None and stream.prime_audio is not None:
            full = np.concatenate([stream.prime_audio, result.audio])
            result.audio = full[int(len(ref) / max(len(ref) + len(result.codes), 1) * len(full)):]
        result.timings.ttfa_ms = result.timings.total_ms   # (offline: the audio comes all at once)
        return result

    def compose(self, text: str, *, speaker: str | None = None, language: str | None = "auto",
                instruct: str | None = None, voice: Voice | None = None, seed: int = 0, cast: dict | None = None,
                lexicon=None, budget=None, pauses=None):
        """`text` as the long-text front end plans it (kazeia.engine.text.compose.Composition): its
        chunks (voice, language, seed, pronunciation rewrites) and the pauses between them, for this
        model's speakers, languages and tokenizer. `cast`: names -> text.compose.Cast (the model's
        speakers are there already); `lexicon`: text.lexicon.Lexicon; `budget`, `pauses`:
        text.sentences.Budget, text.compose.Pauses. MarkupError names line and column."""
        from ..voices.cast import model_cast
        from ..text.compose import Cast, Pauses, compose
        from ..text.sentences import Budget
        return compose(text, default=Cast(speaker=speaker, instruct=instruct, voice=voice), language=language or "auto",
                       cast={**model_cast(self.model), **(cast or {})}, languages=self.info.languages,
                       lexicon=lexicon, budget=budget or Budget(), pauses=pauses or Pauses(), seed=seed,
                       count_tokens=self.count_text_tokens)

    def speak(self, text: str, *, speaker: str | None = None, language: str | None = "auto",
              instruct: str | None = None, voice: Voice | None = None, sampling: SamplingParams | None = None,
              cast: dict | None = None, lexicon=None, budget=None, pauses=None, join=None,
              max_batch: int = 4, streaming_text: bool | None = None):
        """Any text as chunks through the batched engine joined into one take, with each chunk's own
        result (kazeia.engine.synthesis.long_text.LongResult: chunks, spans, warnings of chunks that reached
        their frame limit). `cast`, `lexicon`, `budget`, `pauses`: as for compose; `join`:
        text.join.JoinSettings (trimming, crossfade); `streaming_text`: as synthesize."""
        from .long_text import speak
        sampling = sampling or SamplingParams.from_model(self.info)
        plan = self.compose(text, speaker=speaker, language=language, instruct=instruct, voice=voice,
                            seed=sampling.seed, cast=cast, lexicon=lexicon, budget=budget, pauses=pauses)
        return speak(self, plan, sampling, join, max_batch=max_batch, streaming_text=streaming_text)

    def stream(self, text: str, *, speaker: str | None = None, language: str | None = "auto",
               instruct: str | None = None, voice: Voice | None = None, sampling: SamplingParams | None = None,
               streaming_text: bool | None = None, decode_every: int = DECODE_EVERY, one_prompt: bool = False,
               lexicon=None):
        """Audio chunks as frames are produced (through the streaming decoder). Iterate it; call
        cancel() to stop within one frame; `result` holds the totals once it has finished.
        The first frame is decoded alone (time to first audio); later ones `decode_every` at a
        time: each decoder launch streams all its weights, so one frame per launch costs ~1.5x.
        A text of more than one chunk (or with pauses) gives a LongStream: the take's joined audio
        in order, the first audio as soon as for its first sentence. `one_prompt`, `lexicon`: as
        synthesize."""
        if not isinstance(decode_every, int) or decode_every < 1:
            raise ValueError(f"decode_every must be a positive integer, got {decode_every!r}")
        if not one_prompt:
            prompt, long = self._prompt_or_long(Request(text, speaker, language, instruct, voice, sampling,
                                                        streaming_text), lexicon)
            if long is not None:
                return long
            text, speaker, language, instruct, voice, sampling = (prompt.text, prompt.speaker, prompt.language,
                                                                  prompt.instruct, prompt.voice, prompt.sampling)
        plan, sampling, timings, start = self.prepare(text, speaker, language, instruct, voice, sampling,
                                                       streaming_text)
        return AudioStream(self, plan, sampling, timings, start, icl_codes(voice), decode_every,
                           batcher=self._batcher if self.max_batch > 1 else None)

    def open_text_stream(self, *, speaker: str | None = None, language: str | None = "auto",
                         instruct: str | None = None, voice: Voice | None = None,
                         sampling: SamplingParams | None = None, decode_every: int = DECODE_EVERY,
                         lexicon=None, hold_ms: float = 0.0) -> "StreamedTake":
        """Speech of a text still being written: write(delta) as it comes, close() at the end,
        iterate for audio chunks (engine/synthesis/streamed_take.py). The codes and audio are those of the
        whole text (less its leading white space) given to take(Request(text, ...,
        streaming_text=True)), bit for bit: one utterance while the text is one prompt, else its
        chunks as the long-text front end plans them, each begun as soon as its words are known.
        `lexicon`: text.lexicon.Lexicon (a chunk it may rewrite begins once its words are all known);
        `hold_ms`: speech starts once the text holds that much reading (StreamedTake)."""
        from .streamed_take import StreamedTake
        return StreamedTake(self, speaker=speaker, language=language, instruct=instruct, voice=voice,
                            sampling=sampling, decode_every=decode_every, max_tokens=MAX_TEXT_TOKENS,
                            lexicon=lexicon, hold_ms=hold_ms)

    def take(self, request: Request, *, lexicon=None, join=None, chunk_seeds: dict[int, int] | None = None,
             decode_every: int = DECODE_EVERY):
        """The one way in for a take (the CLI, the workbench, the server and the benches come here):
        `request` as one prompt, an AudioStream, when long_text.one_prompt_text says it is one, else
        its chunks as a LongStream (started; the take's joined audio in order, each chunk's own in
        `takes`). `lexicon`: text.lexicon.Lexicon; `join`: text.join.JoinSettings; `chunk_seeds`:
        long_text.plan_take."""
        prompt, long = self._prompt_or_long(request, lexicon, join, chunk_seeds)
        if long is not None:
            return long
        return self.stream(prompt.text, speaker=prompt.speaker, language=prompt.language, instruct=prompt.instruct,
                           voice=prompt.voice, sampling=prompt.sampling, streaming_text=prompt.streaming_text,
                           decode_every=decode_every, one_prompt=True)

    def _prompt_or_long(self, request: Request, lexicon=None, join=None, chunk_seeds=None):
        """(the one prompt's Request, None), or (None, a LongStream of the chunks, started): Engine.take's
        decision. A batching engine's chunks share its batcher with every other stream (a server's
        requests), else they get one of their own."""
        from .long_text import LongStream, plan_take
        request = replace(request, sampling=request.sampling or SamplingParams.from_model(self.info))
        prompt, plan = plan_take(self, request, lexicon, join, chunk_seeds)
        if prompt is not None:
            return prompt, None
        shared = self._batcher if self.max_batch > 1 else None
        return None, LongStream(self, plan, request.sampling, join, max_batch=4,
                                streaming_text=request.streaming_text, batcher=shared)

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

    def batcher(self, max_batch: int) -> Batcher:
        """A batch worker of its own for this engine (streams given it run together, up to max_batch)."""
        return Batcher(self, max_batch)

    def submit(self, request: Request, batcher: Batcher, decode_every: int = DECODE_EVERY,
               follows: bool = False) -> AudioStream:
        """`request` as a stream run by `batcher` (Engine.batcher); `follows`: a later chunk of a take
        (a take's first chunk is admitted before it)."""
        return AudioStream(self, *self._prepare_request(request), icl_codes(request.voice), decode_every,
                           batcher=batcher, follows=follows)

    def synthesize_many(self, requests, max_batch: int | None = None) -> list[Result]:
        """Several utterances at once, `max_batch` (default: the engine's, at least 2) in one batch:
        `requests` are Request objects or dicts of synthesize()'s arguments. Results come back in
        order; each equals what synthesize() gives for the same request and seed (audio decoded as a
        stream, which equals offline decoding bit for bit). A request that fails raises after all
        have ended."""
        batcher = Batcher(self, max_batch or max(self.max_batch, 2))
        requests = [r if isinstance(r, Request) else Request(**r) for r in requests]
        prepared = [(self._prepare_request(r), icl_codes(r.voice)) for r in requests]   # all checked before any starts
        streams = [AudioStream(self, *p, prime, DECODE_EVERY, batcher=batcher) for p, prime in prepared]
        for s in streams:
            s.join()
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
        with self.lock:
            return self._decoder.decode(codes) if len(codes) else np.zeros(0, np.float32)

    def teacher_forced(self, text: str, codes, **request) -> tuple[np.ndarray, np.ndarray]:
        """The talker fed `text` (synthesize()'s request arguments) and then the given frames
        [n, 16]: its logits [n + 1, vocab] and final hidden states [n + 1, hidden] before each frame
        and after the last (for divergence measurements)."""
        plan = self._prompts.build(text, **request)
        with self.lock:
            return self._runner.teacher_forced(
                **plan.arrays(self._prompts.hidden), trailing_text_ids=np.asarray(plan.trailing_text_ids, np.int32),
                codes=np.ascontiguousarray(codes, np.int32))

    def code_predictor_logits(self, hidden, frame) -> np.ndarray:
        """The code predictor's logits [15, vocab] for a talker hidden state, fed the frame's codes."""
        with self.lock:
            return self._runner.code_predictor_logits(np.asarray(hidden, np.float32), np.asarray(frame, np.int32))

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
