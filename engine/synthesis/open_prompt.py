"""One prompt whose text is still arriving (a chunk of a live take: live_take.py): one utterance, fed
as the text arrives. write() each delta (or offer() what is known of it), close() at the end; iterate
for audio chunks as for a PromptStream. The text's final tokens (text.final_tokens) go to a native
session opened with the first of them; when it has read all there is it waits on the host's batch
worker, stepping nothing, so it holds no other session back. The codes and audio are those of the
whole text given at once with streaming text, bit for bit, whatever the split and timing of the
deltas."""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Iterator

from .batch import TextFeed
from .prompt_stream import PromptStream
from .requests import MAX_TEXT_TOKENS, Chunk, Result, SamplingParams, Timings
from ..text.final_tokens import FinalTokens

if TYPE_CHECKING:
    from .host import TakeHost
    from .prompt import Voice


class OpenPromptStream:
    def __init__(self, engine: "TakeHost", *, speaker: str | None, language: str | None, instruct: str | None,
                 voice: "Voice | None", sampling: SamplingParams | None, decode_every: int,
                 after: "OpenPromptStream | None" = None):
        self._engine = engine
        self._after = after   # the chunk before this one in a take: this one is made after it (PromptStream.after)
        self._voice = dict(speaker=speaker, language=language, instruct=instruct, voice=voice)
        self._sampling = sampling or SamplingParams.from_model(engine.info)
        self._sampling.validate()
        self._decode_every = decode_every
        prompts = engine.prompts
        self._eos = prompts.text["tts_eos"]
        # the request checked now (speaker, voice, language), not at the first word
        prompts.build("", **self._voice, streaming_text=True, first_ids=[self._eos])
        self._text = FinalTokens(prompts.tok)
        self._feed = TextFeed(engine.shared_batcher.wake)
        self._lock = threading.Lock()
        self._audio: PromptStream | None = None
        self._started = threading.Event()   # the audio stream exists (or the text closed without one)
        self._start = 0.0

    # ---- the writer's side ---------------------------------------------------------------------
    def write(self, delta: str) -> None:
        with self._lock:
            self._send(self._text.push(delta))

    def offer(self, known: str, ahead: str) -> None:
        """For a text whose end is not decided yet (a chunk of a live take): it is `known`, ended
        there or going on as `ahead` goes (FinalTokens.offer); close(text) gives all of it."""
        with self._lock:
            self._send(self._text.offer(known, ahead))

    def close(self, text: str | None = None) -> None:
        """The end of the text (`text`: all of it, after offer): the rest is spoken, then the
        utterance ends."""
        with self._lock:
            ids = self._text.close(text)
            if not self._text.text.strip():   # (as a whole text: refused, and nothing is spoken)
                if self._audio is not None:
                    self._audio.cancel()
                    self._engine.shared_batcher.wake()
                self._started.set()
                raise ValueError("text is empty")
            self._send(ids + [self._eos])
            plan = self._audio_plan
            self._feed.close(self._engine.max_frames_for(plan, self._sampling, len(self._text.given)))

    def cancel(self) -> None:
        with self._lock:
            if self._audio is not None:
                self._audio.cancel()
                self._engine.shared_batcher.wake()
            self._started.set()

    @property
    def text(self) -> str:
        return self._text.text

    @property
    def frames_made(self) -> int:
        """Frames its session has made so far (0 before it starts)."""
        audio = self._audio
        return 0 if audio is None else audio.frames_seen

    def unread(self) -> int:
        """Text ids given to the model that it has not read yet (it reads one a frame), while the text
        is still open; 0 once it is closed or before the model starts."""
        audio = self._audio
        if audio is None or self._feed.closed:
            return 0
        return max(0, len(self._text.given) - 1 - audio.frames_seen)   # (the first is the prompt's)

    def _send(self, ids: list[int]) -> None:
        if not self._start:
            self._start = time.perf_counter()   # (time to first audio counts from the first text, by any call)
        if len(self._text.given) > MAX_TEXT_TOKENS:
            raise ValueError(f"text too long for one utterance: over {MAX_TEXT_TOKENS} tokens")
        if self._audio is None:
            if not ids:
                return
            plan = self._engine.prompts.build("", **self._voice, streaming_text=True, first_ids=ids[:1])
            self._audio_plan = plan
            timings = Timings(frame_seconds=1 / self._engine.info.frame_rate)
            self._audio = PromptStream(self._engine, plan, self._sampling, timings, self._start, None,
                                       self._decode_every, batcher=self._engine.shared_batcher, feed=self._feed,
                                       follows=self._after is not None,
                                       after=self._after._audio if self._after is not None else None)
            self._started.set()
            ids = ids[1:]
        self._feed.add(ids)

    # ---- the listener's side (as PromptStream) ---------------------------------------------------
    def _stream(self) -> PromptStream | None:
        self._started.wait()
        return self._audio

    def __iter__(self) -> Iterator[Chunk]:
        return self

    def __next__(self) -> Chunk:
        audio = self._stream()
        if audio is None:
            raise StopIteration
        return next(audio)

    def wait(self, timeout: float | None = None) -> Result | None:
        audio = self._stream()
        return None if audio is None else audio.wait(timeout)

    @property
    def ended(self) -> bool:
        """Its generation has ended (or its text closed before any was spoken)."""
        audio = self._audio
        return self._started.is_set() and (audio is None or audio.ended)

    def join(self, timeout: float | None = None) -> bool:
        if not self._started.wait(timeout):
            return False
        audio = self._audio
        return audio is None or audio.join(timeout)

    @property
    def result(self) -> Result | None:
        return None if self._audio is None else self._audio.result
