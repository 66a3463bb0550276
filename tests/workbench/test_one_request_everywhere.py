"""One request, every front end: `kazeia say`, the workbench, the speech server (the official openai
client on loopback) and render make the same audio from the same text, voice and sampling, for a text
that is one prompt and for one that is a long take (two chunks and a pause): one rule
(long_text.one_prompt_text, through Engine.take) decides which it is, wherever the request comes in."""
from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile

pytest.importorskip("fastapi")
import openai  # noqa: E402

from kazeia.engine import Engine, Request, SamplingParams, demo_model_path  # noqa: E402
from kazeia.engine.synthesis.long_text import one_prompt_text  # noqa: E402
from kazeia.engine.script.render import LocalExecutor, RenderOptions, plan_render, render  # noqa: E402
from kazeia.engine.serve.app import ServerSettings, create_app  # noqa: E402
from kazeia.engine.serve.encoders import pcm16  # noqa: E402
from kazeia.engine.serve.local import LocalServer  # noqa: E402
from kazeia.engine.serve.voices import VoiceBook  # noqa: E402

from support.commands import kazeia  # noqa: E402
from support.workbench import generate, window, workdir  # noqa: E402,F401 (fixtures)

SPEAKER, SEED, FRAMES = "ryan", 7, 6
REQUESTS = {"one prompt": "Hello  from every front end.",   # (respaced by the plan: the prompt is the text as given)
            "long take": "The first part is spoken here. [pause:300ms] The second part comes after a pause."}


@pytest.fixture(scope="module")
def engine():
    return Engine.load(demo_model_path(), threads=2, max_batch=4)


def by_say(text, tmp_path) -> np.ndarray:
    out = tmp_path / "say.wav"
    r = kazeia("say", "--model", "demo", "--speaker", SPEAKER, "--seed", SEED, "--max-frames", FRAMES,
               "--no-streaming-text", "--text", text, "-o", out)
    assert r.returncode == 0, r.stderr
    return soundfile.read(out, dtype="float32")[0]


def by_server(engine, text) -> bytes:
    app = create_app(engine, VoiceBook(engine.model), ServerSettings("demo", streaming_text=False))
    with LocalServer(app) as running:
        client = openai.OpenAI(base_url=running.url + "/v1", api_key="none", max_retries=0, timeout=120)
        return client.audio.speech.create(model="tts-1", voice=SPEAKER, input=text, response_format="pcm",
                                          extra_body={"max_frames": FRAMES, "seed": SEED}).content


def by_render(engine, text, tmp_path) -> np.ndarray:
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"id": "line", "text": text, "speaker": SPEAKER, "seed": SEED,
                                  "max_frames": FRAMES}) + "\n")
    summary = render(plan_render(script, engine, RenderOptions(tmp_path / "out")), LocalExecutor(engine, 4))
    assert summary.ok and summary.done == 1
    return soundfile.read(tmp_path / "out" / "line.wav", dtype="float32")[0]


def by_workbench(qtbot, window, text) -> np.ndarray:
    window.voice.speaker.setCurrentText(SPEAKER)
    window.sampling.streaming_text.setChecked(False)
    return generate(qtbot, window, frames=FRAMES, seed=SEED, text=text).audio


@pytest.mark.parametrize("kind", REQUESTS)
def test_say_the_workbench_the_server_and_render_make_the_same_audio(qtbot, window, engine, tmp_path, kind):
    text = REQUESTS[kind]
    sampling = SamplingParams.from_model(engine.info, seed=SEED, max_frames=FRAMES)
    plan = engine.plan(Request(text, speaker=SPEAKER, sampling=sampling, streaming_text=False))
    assert (one_prompt_text(text, plan.composition) is None) == (kind == "long take")
    alone = engine.take(plan).audio
    assert len(alone) > 0
    heard = {"say": by_say(text, tmp_path), "workbench": by_workbench(qtbot, window, text),
             "render": by_render(engine, text, tmp_path)}
    for front_end, audio in heard.items():
        assert np.array_equal(audio, alone), front_end
    assert by_server(engine, text) == pcm16(alone)   # (16-bit PCM: what the server sends)
