"""`kazeia say`: speak text into an audio file: the command's options made one Request, which the engine
plans (one prompt or a long take: Engine.plan) and speaks."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..synthesis.requests import MAX_BATCH
from .options import (DefaultsHelpFormatter, OVERLAP_HELP, PAUSE_OPTIONS, THREADS_HELP, as_options, check_output_path,
                      check_sampling, options_from, read_text_file, thread_count)


def add_parser(sub) -> None:
    s = sub.add_parser("say", help="speak text into an audio file",
                       formatter_class=DefaultsHelpFormatter,
                       description="Sampling defaults (temperature, top-k, top-p) are the model's own "
                                   "(kazeia info MODEL); threads: every core this process may use "
                                   "($KAZEIA_THREADS overrides), fewer while other processes hold some.")
    s.add_argument("--model", required=True, help='a GGUF file, a registered name (kazeia models), or "demo"')
    text = s.add_mutually_exclusive_group(required=True)
    text.add_argument("--text", default=None, help="the text to speak")
    text.add_argument("--text-file", default=None, help="read the text from a UTF-8 file")
    s.add_argument("-o", "--output", required=True, help=".wav (float) or .flac")
    s.add_argument("--speaker", default=None, help="CustomVoice speaker")
    s.add_argument("--language", default="auto", help="a language the model knows (kazeia info MODEL), or auto")
    s.add_argument("--instruct", default=None, help="voice description (VoiceDesign, 1.7B CustomVoice)")
    s.add_argument("--voice", default=None, help="voice profile (Base models): a voice of the library (kazeia voice list) or a .kzvoice file")
    s.add_argument("--seed", type=int, default=0, help="sampling seed (the same seed gives the same audio)")
    s.add_argument("--greedy", action="store_true", help="argmax everywhere (parity with the reference)")
    s.add_argument("--temperature", type=float, default=None, help="talker temperature (default: the model's)")
    s.add_argument("--top-k", type=int, default=None, help="talker top-k, 0 = off (default: the model's)")
    s.add_argument("--top-p", type=float, default=None, help="talker top-p (default: the model's)")
    s.add_argument("--max-frames", type=int, default=None, help="default: derived from the text length")
    s.add_argument("--stream", action="store_true", help="decode while generating (reports time to first audio)")
    feed = s.add_mutually_exclusive_group()
    feed.add_argument("--streaming-text", dest="streaming_text", action="store_true", default=None,
                      help="feed text while generating (default for Base)")
    feed.add_argument("--no-streaming-text", dest="streaming_text", action="store_false",
                      help="whole text in the prompt (default for CustomVoice and VoiceDesign)")
    s.add_argument("--codes-out", default=None, help="also save the codes [frames, 16] as .npy")
    s.add_argument("--subtitles", action="append", choices=["srt", "vtt"], default=None,
                   help="also write subtitles beside the output, a cue per chunk (repeat for both)")
    long = s.add_argument_group("long texts, dialogue and pauses (docs/speaking.md)")
    long.add_argument("--cast", default=None,
                      help="TOML file naming the voices [voice=NAME] and 'Name: text' lines may use")
    long.add_argument("--lexicon", action="append", default=None,
                      help="pronunciation rules (.toml or .csv); repeat to add files, later ones win")
    long.add_argument("--pause-sentence", type=float, default=150.0, help="ms of silence between chunks")
    long.add_argument("--pause-paragraph", type=float, default=600.0, help="ms of silence at a paragraph break")
    long.add_argument("--trim-silence", action="store_true", help="trim each chunk's leading and trailing silence")
    long.add_argument("--max-chars", type=int, default=250, help="characters per chunk at most")
    long.add_argument("--max-tokens", type=int, default=64, help="text tokens per chunk at most")
    long.add_argument("--batch", type=int, default=4, help="chunks synthesized together")
    s.add_argument("--threads", type=thread_count, default=None, help=THREADS_HELP)
    s.add_argument("--placement", default="cpu", choices=["cpu", "accel-weights", "accel-sched"],
                   help="where the stages run (kazeia devices lists what is available)")
    s.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=None, help=OVERLAP_HELP)
    s.set_defaults(func=run)


@dataclass(frozen=True)
class SayOptions:
    """`kazeia say`'s settings, typed, made once from the command line (options_from): one field per
    option, under the option's own name; what decides the audio becomes one Request (request)."""
    model: str
    text: str | None
    text_file: str | None
    output: str
    speaker: str | None = None
    language: str = "auto"
    instruct: str | None = None
    voice: str | None = None
    seed: int = 0
    greedy: bool = False
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    max_frames: int | None = None
    stream: bool = False
    streaming_text: bool | None = None
    codes_out: str | None = None
    subtitles: list[str] | None = None
    cast: str | None = None
    lexicon: list[str] | None = None
    pause_sentence: float = 150.0
    pause_paragraph: float = 600.0
    trim_silence: bool = False
    max_chars: int = 250
    max_tokens: int = 64
    batch: int = 4
    threads: int | None = None
    placement: str = "cpu"
    overlap: bool | None = None

    def request(self, engine, text: str, voice):
        """The Request these options make of `text` on `engine` (the model's sampling defaults, its
        speakers and the cast file's names), `voice` loaded."""
        from ..synthesis.requests import Request, SamplingParams
        from ..text.compose import Pauses
        from ..text.join import JoinSettings
        from ..text.lexicon import load_lexicons
        from ..text.sentences import Budget
        from ..voices.cast import load_cast
        cast = load_cast(self.cast, engine.model) if self.cast else None
        lexicon = load_lexicons(self.lexicon)[0] if self.lexicon else None
        given = {k: getattr(self, k) for k in ("temperature", "top_k", "top_p", "max_frames")
                 if getattr(self, k) is not None}
        sampling = SamplingParams.from_model(engine.info, seed=self.seed, **given)
        return Request(text, self.speaker, self.language, self.instruct, voice,
                       sampling.greedy() if self.greedy else sampling, self.streaming_text, lexicon=lexicon,
                       join=JoinSettings(trim_silence=self.trim_silence), cast=cast,
                       budget=Budget(self.max_chars, self.max_tokens),
                       pauses=Pauses(self.pause_sentence, self.pause_paragraph))


def run(args) -> int:
    return say(options_from(SayOptions, args))


def say(o: SayOptions) -> int:
    import numpy as np

    from ..audio_io import write_audio
    from ..model_files.demo import resolve_model
    from ..synthesis.engine import Engine
    text = o.text if o.text is not None else read_text_file(o.text_file)
    _check_numbers(o)
    check_output_path(o.output)   # before minutes of synthesis, not after
    if o.codes_out:
        check_output_path(o.codes_out)
    engine = Engine.load(resolve_model(o.model), threads=o.threads, placement=o.placement,
                         overlap=o.overlap)
    info = engine.info
    if info.random_weights:
        print(f"note: {info.path.name} has random weights and produces noise", file=sys.stderr)
    voice = None
    if o.voice:
        from ..voices.voice_library import load_named_voice
        voice = load_named_voice(o.voice, engine.model)
    plan = engine.plan(o.request(engine, text, voice))
    if plan.prompt is None:
        return _say_long(engine, plan, o)
    result = _spoken(engine, plan) if o.stream else engine.take(plan)
    write_audio(o.output, result.audio, result.sample_rate)
    if o.codes_out:
        np.save(o.codes_out, result.codes)
    if o.subtitles:   # (one prompt: one cue)
        from ..long_take.assemble import Cue
        chunk = plan.composition.chunks[0]
        _write_subtitles(o, [Cue(0, len(result.audio), " ".join(chunk.written.split()), 0)], result.sample_rate)
    _print_rewrites(plan.composition)
    print(f"wrote {o.output}: {result.timings.audio_seconds:.2f} s of audio, stopped by {result.stop_reason}")
    print(result.timings.summary())
    return 0


def _spoken(engine, plan):
    """The one prompt streamed (--stream: decoded as frames are made, for the time to first audio)."""
    stream = engine.open_take(plan)
    try:
        for _ in stream:
            pass
    except KeyboardInterrupt:
        stream.cancel()
        stream.wait()
        raise
    return stream.result


def _check_numbers(o: SayOptions) -> None:
    """Every number of the command line checked before the model loads (NaN fails every range)."""
    from ..text.compose import Pauses
    from ..text.sentences import Budget
    check_sampling(o.seed, temperature=o.temperature, top_k=o.top_k, top_p=o.top_p, max_frames=o.max_frames)
    as_options(Pauses(o.pause_sentence, o.pause_paragraph).validate, PAUSE_OPTIONS)
    as_options(Budget(o.max_chars, o.max_tokens).validate, PAUSE_OPTIONS)
    if not 1 <= o.batch <= MAX_BATCH:
        raise ValueError(f"--batch must be from 1 to {MAX_BATCH}, got {o.batch}")


def _say_long(engine, plan, o: SayOptions) -> int:
    """Several chunks (or pauses, or trimming): spoken through the batched engine, each chunk kept on
    disk as it ends and the file written from them (book/take.py: memory stays flat; after a stop,
    the same command resumes)."""
    import time

    import numpy as np

    from ..long_take.take import write_take
    chunks = plan.composition.chunks
    bar = None
    if sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=len(chunks), unit="chunk", desc="speaking", file=sys.stderr)
    start = time.perf_counter()
    try:
        take = write_take(engine, plan, o.output, o.batch, on_chunk=lambda done: bar.update(1) if bar else None)
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start
    if take.kept:
        print(f"resumed: {take.kept} of {take.chunks} chunk(s) were kept from the run before", file=sys.stderr)
    if o.codes_out:
        np.save(o.codes_out, take.codes)
    _write_subtitles(o, take.assembled.cues, take.assembled.sample_rate)
    _print_rewrites(plan.composition)
    for index in take.limited:
        chunk = chunks[index]
        print(f"warning: chunk {index + 1} (line {chunk.at.line}) reached its frame limit before it ended: its "
              f"speech may be cut or run on", file=sys.stderr)
    audio_seconds = take.assembled.seconds
    print(f"wrote {o.output}: {audio_seconds:.2f} s of audio in {len(chunks)} chunk(s), {len(take.codes)} frames")
    print(f"{seconds:.2f} s in all, RTF {seconds / audio_seconds if audio_seconds else float('nan'):.2f}")
    return 0


def _write_subtitles(o: SayOptions, cues, sample_rate: int) -> None:
    from ..long_take.subtitles import write_subtitles
    for kind in o.subtitles or ():
        path = write_subtitles(Path(o.output).with_suffix(f".{kind}"), cues, sample_rate)
        print(f"wrote {path}")


def _print_rewrites(composition) -> None:
    for chunk in composition.chunks:
        for r in chunk.rewrites:
            print(f"lexicon: chunk {chunk.index + 1}: {r.term!r} -> {r.replacement!r} ({r.source})")
