"""One Request, one audio, whichever way it comes in: the engine's own ways in (Engine.take whole,
Engine.open_take streamed, and a live take written delta by delta), `kazeia say`'s path, render's and
book's, the workbench's (its take and its typed take, as app/tasks runs them on an EngineHost), and
the server's (OpenAI's POST /v1/audio/speech, Wyoming's, the live sockets: each the 16-bit samples of
that audio) make the same audio of the same Request, bit for bit, for a text that is one prompt and
for one that is a long take (two chunks and a pause): Engine.plan alone decides which it is. On the
tiny reference checkpoint (random weights: every chunk runs to its frame limit)."""
from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import numpy as np
import pytest
import soundfile

from kazeia.engine import Engine, Request, SamplingParams, open_model
from kazeia.engine.serve.encoders import pcm16
from serve.clients import deepgram_turn, live_turn, openai_client, wyoming_speech

pytestmark = pytest.mark.levels   # (numbers compared across paths: run again at every lower CPU level)


SPEAKER, SEED, FRAMES = "vivian", 7, 6
TEXTS = {"one prompt": "Hello  from every front end.",   # (respaced by the plan: the prompt is the text as given)
         "long take": "The first part is spoken here. [pause:300ms] The second part comes after a pause."}


@pytest.fixture(scope="module")
def model_path(converted):
    return converted("custom_voice")


@pytest.fixture(scope="module")
def engine(model_path):
    return Engine(open_model(model_path), threads=2, max_batch=4)


def request_of(engine, text: str, streaming_text: bool | None, seed: int = SEED) -> Request:
    sampling = SamplingParams.from_model(engine.info, seed=seed, max_frames=FRAMES)
    return Request(text, SPEAKER, sampling=sampling, streaming_text=streaming_text)


def deltas_of(text: str) -> list[str]:
    """A text in the pieces a writer sends while it is spoken."""
    return [text[a:b] for a, b in ((0, 9), (9, 23), (23, len(text)))]


# ---- the ways in: each speaks `request` and gives its audio -----------------------------------------
def by_open_take(engine, request, tmp_path, model_path) -> np.ndarray:
    take = engine.open_take(request)
    heard = np.concatenate([c.audio for c in take])
    assert np.array_equal(heard, take.result.audio)   # (what was heard is the take)
    return heard


def by_live_take(engine, request, tmp_path, model_path) -> np.ndarray:
    """Its text written in pieces while it is spoken (a live take reads its text as it comes)."""
    live = engine.open_take(replace(request, text=""), text_open=True)
    for delta in deltas_of(request.text):
        live.write(delta)
    live.close()
    return np.concatenate([c.audio for c in live])


def by_say(engine, request, tmp_path, model_path) -> np.ndarray:
    from kazeia.engine.cli.say import SayOptions, say
    out = tmp_path / "say.wav"
    assert say(SayOptions(str(model_path), request.text, None, str(out), speaker=request.speaker, seed=SEED,
                          max_frames=FRAMES, streaming_text=request.streaming_text, threads=2)) == 0
    return soundfile.read(out, dtype="float32")[0]


def by_render(engine, request, tmp_path, model_path) -> np.ndarray:
    from kazeia.engine.script.render import LocalExecutor, RenderOptions, plan_render, render
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"id": "line", "text": request.text, "speaker": request.speaker, "seed": SEED,
                                  "max_frames": FRAMES}) + "\n")
    summary = render(plan_render(script, engine, RenderOptions(tmp_path / "out")), LocalExecutor(engine, 4))
    assert summary.ok and summary.done == 1
    return soundfile.read(tmp_path / "out" / "line.wav", dtype="float32")[0]


def workbench_job(typed=None):
    """What a workbench task sees of the controller's Job (app/controller.Job), without Qt."""
    import threading
    from types import SimpleNamespace
    quiet = SimpleNamespace(emit=lambda *_: None)
    return SimpleNamespace(started=quiet, progress=quiet, status=quiet, cancelled=threading.Event(),
                           attach=lambda stream: None, typed=typed)


def workbench_take(engine, request, task, typed=None):
    """`task` (app/tasks.take or typed_take) on an EngineHost holding `engine`, asked by the TakeRequest
    the presenter makes of `request` (on the engine's own placement and threads: nothing is rebound)."""
    from kazeia.app.tasks import EngineHost
    from kazeia.app.take_request import TakeRequest
    asked = TakeRequest(request.text, request.sampling, dict(engine.placement), engine.threads,
                        speaker=request.speaker, language=request.language, instruct=request.instruct,
                        streaming_text=request.streaming_text)
    assert replace(asked.engine_request(), chunk_seeds=None) == request   # (the same Request)
    host = EngineHost()
    host.engine = engine
    return task(host, workbench_job(typed), asked)


def by_workbench(engine, request, tmp_path, model_path) -> np.ndarray:
    from kazeia.app import tasks
    return workbench_take(engine, request, tasks.take).result.audio


def by_workbench_typed(engine, request, tmp_path, model_path) -> np.ndarray:
    """Its text typed in pieces (app/typed_text.TypedText hands them on to the typed take's live take)."""
    from kazeia.app import tasks
    from kazeia.app.typed_text import TypedText
    typed = TypedText()
    for delta in deltas_of(request.text):
        typed.write(delta)
    typed.close()
    outcome = workbench_take(engine, request, tasks.typed_take, typed)
    assert outcome.text == request.text
    return outcome.result.audio


WAYS_IN = {"open_take": by_open_take, "live take": by_live_take, "say": by_say, "render": by_render,
           "workbench": by_workbench, "workbench typed": by_workbench_typed}
# (the server's are below, on a server of their own)
STREAMING_TEXT_ONLY = {"live take", "workbench typed"}   # (a live take always reads its text as it comes)
NO_STREAMING_TEXT = {"render"}        # (a script line has no such column: the model's default)


@pytest.mark.parametrize("streaming_text", [None, True])
@pytest.mark.parametrize("kind", TEXTS)
def test_one_request_is_one_audio_through_every_way_in(engine, model_path, tmp_path, kind, streaming_text):
    request = request_of(engine, TEXTS[kind], streaming_text)
    plan = engine.plan(request)
    assert (plan.prompt is None) == (kind == "long take")
    whole = engine.take(request).audio
    assert len(whole) > 0
    for name, way_in in WAYS_IN.items():
        if (name in STREAMING_TEXT_ONLY and not streaming_text) or (name in NO_STREAMING_TEXT and streaming_text):
            continue
        folder = tmp_path / name.replace(" ", "_")
        folder.mkdir()
        assert np.array_equal(way_in(engine, request, folder, model_path), whole), name


def test_a_books_chapter_is_the_take_of_the_request_it_makes(engine, tmp_path):
    """A book speaks each chapter as the Request it makes of it (its text with a pause after its
    title, the book's seed mixed with the chapter's number) and Engine.take speaks that Request alike."""
    from kazeia.engine.book.render import BookOptions, plan_book, render_book, spoken_text
    from kazeia.engine.book.source import read_book
    from kazeia.engine.text.compose import chunk_seed
    path = tmp_path / "book.md"
    path.write_text(f"# A Book\n\n## One\n\n{TEXTS['long take']}\n\n## Two\n\n{TEXTS['one prompt']}\n",
                    encoding="utf-8")
    book = read_book(path)
    options = BookOptions(tmp_path / "out", formats=(), m4b=False, subtitles=(), loudness=None,
                          request=request_of(engine, "", None))
    result = render_book(plan_book(book, engine, options), engine)
    assert len(result.chapters) == 2
    for number, (chapter, written) in enumerate(zip(book.read_chapters, result.chapters), 1):
        request = request_of(engine, spoken_text(chapter, options.chapter_pause_ms), None)
        request = replace(request, sampling=replace(request.sampling, seed=chunk_seed(SEED, number)))
        assert np.array_equal(soundfile.read(written.path, dtype="float32")[0], engine.take(request).audio)


# ---- the server's ways in, on loopback: each speaks `request` as a client of one protocol and gives
# the 16-bit samples the server sent (the server feeds text while generating: streaming_text=True)
KEY = "one-request"
SERVER_SEED = 0   # (a Wyoming request has no seed: the model's default; the others ask for it)


@pytest.fixture(scope="module")
def server(engine):
    """A server of `engine` with a Wyoming port beside it: (the server, the Wyoming port)."""
    pytest.importorskip("fastapi")
    from kazeia.engine.serve.app import ServerSettings, create_app
    from kazeia.engine.serve.local import LocalServer, free_port
    from kazeia.engine.serve.voices import VoiceBook
    port = free_port()
    settings = ServerSettings("tiny", api_key=KEY, max_frames=FRAMES, wyoming=("127.0.0.1", port))
    with LocalServer(create_app(engine, VoiceBook(engine.model), settings)) as running:
        yield running, port


def by_openai(server, request) -> bytes:
    speech = openai_client(server[0], KEY).audio.speech
    asked = dict(model="tts-1", voice=request.speaker, input=request.text,
                 extra_body={"seed": SERVER_SEED, "max_frames": FRAMES})
    pcm = speech.create(response_format="pcm", **asked).content
    wav = speech.create(response_format="wav", **asked).content
    assert wav[:4] == b"RIFF" and wav[44:] == pcm   # (the same samples after a WAV header)
    return pcm


def by_wyoming(server, request) -> bytes:
    return asyncio.run(wyoming_speech(server[1], request.speaker, request.text))


def by_wyoming_streamed(server, request) -> bytes:
    return asyncio.run(wyoming_speech(server[1], request.speaker, request.text, deltas_of(request.text)))


def by_live_socket(server, request) -> bytes:
    audio, messages = asyncio.run(live_turn(server[0], KEY, deltas_of(request.text), voice=request.speaker,
                                            seed=SERVER_SEED))
    assert messages[-1]["type"] == "turn.end" and messages[-1]["outcome"] == "ok", messages
    return audio


def by_deepgram_socket(server, request) -> bytes:
    return asyncio.run(deepgram_turn(server[0], KEY, deltas_of(request.text), model=request.speaker,
                                     seed=SERVER_SEED))


SERVER_WAYS_IN = {"openai": by_openai, "wyoming": by_wyoming, "wyoming streamed": by_wyoming_streamed,
                  "live socket": by_live_socket, "deepgram socket": by_deepgram_socket}


@pytest.mark.parametrize("kind", TEXTS)
def test_one_request_is_one_audio_through_every_server_way_in(engine, server, kind):
    request = request_of(engine, TEXTS[kind], True, seed=SERVER_SEED)
    whole = pcm16(engine.take(request).audio)   # (as the server sends 16-bit samples)
    assert len(whole) > 0
    for name, way_in in SERVER_WAYS_IN.items():
        assert way_in(server, request) == whole, name
