"""The work of each of the controller's jobs, without Qt: a model load, a placement or thread change,
a take (whole or typed), a script, a book, a voice profile, a kept voice, a preview, and on the
service thread a download and the server's start and stop. Each runs on a worker thread as
`task(host, job, ...)`: `host` holds the engine (EngineHost), `job` is the controller's Job as a task
sees it (its `started`, `progress` and `status` signals, `cancelled`, `attach(stream)`, `typed`)."""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from kazeia.engine import (Engine, ModelFile, Request, SamplingParams, create_voice, load_voice, resolve_model,
                           save_voice, converted_checkpoint)
from kazeia.engine.proc_stats import peak_rss_mb, reset_peak_rss

from .take_request import TakeRequest

PREVIEW_TEXT = "This is how I sound."
PREVIEW_SECONDS = 6   # a preview stops here whatever the model does


@dataclass
class Ran:
    """What a take actually ran with (read from the engine on the worker, not from the widgets)."""
    placement: dict
    threads: int
    peak_memory_mb: float = 0.0
    tag: dict = field(default_factory=dict)   # the caller's own labels (e.g. a comparison's side)


@dataclass
class TakeOutcome:
    result: object   # the engine's Result
    ran: Ran
    chunks: list = field(default_factory=list)   # a long text's chunks (long_text.ChunkTake); [] for one prompt
    text: str | None = None   # a typed take's text, known once it is done


@dataclass
class ServeRequest:
    """What the Serve dialog asks for (checked there: another address than loopback needs a key)."""
    host: str
    port: int
    api_key: str | None
    wyoming_port: int | None       # None: no Wyoming server
    voices_folder: Path            # a Base model offers the voice library's profiles
    observer: object = None        # called with each request's record, on the server's thread
    wyoming_allow: tuple[str, ...] = ()   # the networks Wyoming's clients may come from (beyond loopback)


@dataclass
class Serving:
    server: object                 # kazeia.engine.serve.local.LocalServer
    voices: list[str]              # as a client names them, with what each maps to


def error_message(e: BaseException) -> str:
    return str(e) or traceback.format_exc(limit=1)


class EngineHost:
    """The engine a worker thread holds, and another model file a comparison's B runs on."""

    def __init__(self):
        self.engine: Engine | None = None
        self.other: tuple[str, Engine] | None = None   # (its path, its engine): one at a time

    def require_engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("no model is loaded")
        return self.engine

    def engine_for(self, model_path: str | None) -> Engine:
        """The loaded engine, or one on another model file of the same variant (kept for the next
        take that asks for it; one at a time)."""
        engine = self.require_engine()
        if model_path is None or Path(model_path).resolve() == Path(engine.info.path).resolve():
            return engine
        if self.other is None or self.other[0] != model_path:
            self.other = None   # (the previous one freed first)
            other = Engine(ModelFile(model_path), threads=engine.threads, placement=dict(engine.placement))
            if other.info.variant != engine.info.variant:
                raise ValueError(f"{Path(model_path).name} is a {other.info.variant} model; the loaded one is "
                                 f"{engine.info.variant}: compare models of one variant")
            other.warm_up()
            self.other = (model_path, other)
        return self.other[1]

    def apply(self, placement, threads, engine: Engine | None = None) -> Ran:
        engine = engine or self.require_engine()
        if threads is not None:
            engine.set_threads(int(threads))
        if placement is not None and placement != engine.placement:
            engine.set_placement(placement)
        return Ran(dict(engine.placement), engine.threads)


# ---- on the engine's worker thread ----------------------------------------------------------------
def load(host: EngineHost, job, path: str, threads, placement, out_type: str) -> Engine:
    try:
        p = resolve_model(path)   # ("demo" is the bundled demo model, as on the command line)
        if p.is_dir():   # a downloaded Hugging Face checkpoint: converted once, cached
            p = converted_checkpoint(p, out_type, on_start=job.status.emit,
                                     on_progress=lambda done, total: job.progress.emit((done // 1000, total // 1000)))
        host.other = None   # (a comparison's other model belongs to the model loaded before)
        host.engine = Engine(ModelFile(p), threads=threads, placement=placement)
    except Exception as e:
        raise RuntimeError(f"cannot open {path}: {error_message(e)}") from e
    try:   # while the operator types: the first take's latencies are then those of the next ones
        host.engine.warm_up()
    except Exception as e:
        job.status.emit(f"warm-up failed (takes still run): {error_message(e)}")
    return host.engine


def apply(host: EngineHost, job, placement, threads) -> Ran:
    return host.apply(placement, threads)


def take(host: EngineHost, job, request: TakeRequest) -> TakeOutcome:
    engine = host.engine_for(request.model_path)
    ran = host.apply(request.placement, request.threads, engine)
    ran.tag = request.tag
    voice = load_voice(request.voice_profile, engine.model) if request.voice_profile else None
    reset_peak_rss()
    # one rule for one prompt or a long take (Engine.take); markup errors name line and column
    stream = engine.open_take(request.engine_request(voice))
    job.attach(stream)
    job.started.emit(ran)
    for chunk in stream:
        job.progress.emit(chunk)
    ran.peak_memory_mb = peak_rss_mb()
    return TakeOutcome(stream.result, ran, getattr(stream, "takes", []))


def typed_take(host: EngineHost, job, request: TakeRequest) -> TakeOutcome:
    """A take whose text is typed while it is spoken (Engine.open_take, text_open): the take the whole
    text would be, its chunks begun as their words are known."""
    engine = host.require_engine()
    ran = host.apply(request.placement, request.threads)
    voice = load_voice(request.voice_profile, engine.model) if request.voice_profile else None
    reset_peak_rss()
    live = Request("", speaker=request.speaker, language=request.language, instruct=request.instruct, voice=voice,
                   sampling=request.sampling)
    stream = engine.open_take(live, text_open=True)
    job.attach(stream)
    job.typed.attach(stream)
    job.started.emit(ran)
    for chunk in stream:
        job.progress.emit(chunk)
    if job.typed.error:
        raise ValueError(job.typed.error)
    if stream.result is None:
        raise ValueError("nothing was typed" if not job.cancelled.is_set() else "stopped before any text")
    ran.peak_memory_mb = peak_rss_mb()
    # (its chunks, as a long take's; none when the whole text was one prompt, as for any take)
    return TakeOutcome(stream.result, ran, [] if stream.one_prompt else stream.takes, stream.text)


def script(host: EngineHost, job, request: dict):
    """A script through the render core (as `kazeia render`): all lines (those done and unchanged
    are kept) or the given ids (rendered again)."""
    from kazeia.engine.script.render import LocalExecutor, RenderOptions, plan_render, render
    engine = host.require_engine()
    options = RenderOptions(Path(request["out_dir"]), fmt=request["fmt"], batch=int(request["batch"]), resume=True,
                            skip_invalid=True)
    plan = plan_render(request["script"], engine, options)
    if request.get("ids") is not None:
        wanted = set(request["ids"])
        every = plan.jobs + plan.kept
        plan.jobs = [j for j in every if j.line.id in wanted]
        plan.kept, plan.invalid = [j for j in every if j.line.id not in wanted], []
    return render(plan, LocalExecutor(engine, options.batch),
                  on_line=lambda _, entry, summary: job.progress.emit((entry, summary)), stop=job.cancelled.is_set)


def book(host: EngineHost, job, request: dict):
    """A book through the book core (as `kazeia book`), in the window's voice and sampling (its seed
    and frame limit too); resumes what the folder holds. Progress goes out as plain snapshots (the
    Progress object stays on this thread)."""
    from kazeia.engine.takes.loudness import LoudnessTarget
    from kazeia.engine.book.render import BookOptions, plan_book, render_book
    from kazeia.engine.book.source import read_book
    engine = host.require_engine()
    voice = None
    if request.get("voice_profile"):
        from kazeia.engine.voices.voice import load_voice
        voice = load_voice(request["voice_profile"], engine.model)
    sampling = request.get("sampling")
    # (the book's seed is its sampling's: chapter k's chunks are seeded from it)
    spoken = Request("", speaker=request.get("speaker"), language=request.get("language") or "auto",
                     instruct=request.get("instruct"), voice=voice, sampling=sampling, lexicon=request.get("lexicon"))
    options = BookOptions(Path(request["out_dir"]), formats=tuple(request["formats"]), m4b=request["m4b"],
                          loudness=LoudnessTarget(request["loudness"], -3.0, request["per"]), request=spoken,
                          batch=int(request.get("batch", 4)))
    plan = plan_book(read_book(request["book"]), engine, options)

    def progress(p) -> None:
        job.progress.emit({"chapter_chunks": dict(p.chapter_chunks), "chapters_written": list(p.chapters_written),
                           "chunks_done": p.chunks_done, "chunks_total": p.chunks_total, "chunks_kept": p.chunks_kept,
                           "seconds_left": p.seconds_left, "stage": p.stage})
    return render_book(plan, engine, progress, stop=job.cancelled.is_set)


def voice_profile(host: EngineHost, job, name: str, audio_path: str, transcript, out_path: str) -> str:
    engine = host.require_engine()
    if engine.info.variant != "base":
        raise ValueError("voice profiles need a Base model")
    save_voice(create_voice(engine.model, audio_path, text=transcript), Path(out_path), engine.model,
               {"source": "recording", "created": time.time(), "origin": {"file": Path(audio_path).name}})
    return name


def kept_voice(host: EngineHost, job, record: dict, audio, sample_rate: int, model_paths: list[str], name: str,
               library_folder: str) -> list[str]:
    """A take's voice kept with each Base model given (the loaded one is used as it is)."""
    from kazeia.engine.voices.keep_voice import keep_voice, reference_from_take
    from kazeia.engine.model_files.model_file import open_model
    from kazeia.engine.voices.voice_library import VoiceLibrary
    reference = reference_from_take(audio, sample_rate, record, f"take {record.get('name') or record.get('id')}")
    engine = host.engine
    models = [engine.model if engine is not None and str(engine.info.path) == p else open_model(p) for p in model_paths]
    return keep_voice(reference, models, VoiceLibrary(library_folder), name)


def preview(host: EngineHost, job, profile_path: str, language: str):
    engine = host.require_engine()
    voice = load_voice(profile_path, engine.model)
    info = engine.info
    sampling = SamplingParams.from_model(info, seed=0, max_frames=int(PREVIEW_SECONDS * info.frame_rate))
    return engine.take(Request(PREVIEW_TEXT, language=language, voice=voice, sampling=sampling)).audio


# ---- on the service thread (never behind a take) ------------------------------------------------
def pull(host: EngineHost, job, source: str):
    """A download, verified, converted and registered (`kazeia pull`'s steps)."""
    from kazeia.engine.model_files.errors import PullCancelled, PullError
    from kazeia.engine.models.pull import pull_model
    try:
        return pull_model(source, on_progress=job.progress.emit, cancel=job.cancelled, on_note=job.status.emit)
    except PullCancelled:
        raise RuntimeError("cancelled: nothing was registered; what was downloaded is kept, and the next "
                           "download continues from it") from None
    except (PullError, ValueError, OSError) as e:
        raise RuntimeError(str(e)) from None


def serve(host: EngineHost, job, engine: Engine, request: ServeRequest) -> Serving:
    """kazeia serve's app on the loaded engine (the server has threads of its own and its requests
    join the engine's batches, so a take running meanwhile is not waited for)."""
    from kazeia.engine.serve.app import ServerSettings, create_app
    from kazeia.engine.serve.local import LocalServer
    from kazeia.engine.serve.voices import VoiceBook
    info = engine.info
    voices = VoiceBook(engine.model, request.voices_folder if info.variant == "base" else None)
    wyoming = (request.host, request.wyoming_port) if request.wyoming_port else None
    settings = ServerSettings(info.path.stem, api_key=request.api_key, max_batch=max(1, engine.max_batch),
                              wyoming=wyoming, listen_host=request.host, wyoming_allow=list(request.wyoming_allow))
    app = create_app(engine, voices, settings, observer=request.observer)
    server = LocalServer(app, port=request.port, host=request.host)
    return Serving(server, [v["id"] + (f" ({v['maps_to']})" if "maps_to" in v else "") for v in voices.listing()])


def stop_serving(host: EngineHost, job, serving: Serving) -> None:
    serving.server.stop()
