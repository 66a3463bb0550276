"""The workbench's session model without Qt (app/session.py): what may start when, a placement
comparison from A to B to the pair, takes kept or the disk's refusal said, a chunk's new seed, voice
names. Real takes of the tiny reference checkpoint; no display, no event loop."""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from kazeia.app.session import Session
from kazeia.app.take_request import TakeRequest
from kazeia.app.takes import Take, TakeStore
from kazeia.engine import SamplingParams

NEEDS_QT = False   # (conftest: no `gui` marker; the quick tier runs these)


@pytest.fixture
def session(tmp_path):
    return Session(TakeStore(tmp_path))


def request(engine, seed=7, **kw) -> TakeRequest:
    sampling = SamplingParams.from_model(engine.info, seed=seed, max_frames=4)
    return TakeRequest("One sentence for the session.", sampling, {"talker": "cpu"}, 2, speaker="vivian", **kw)


def run(engine, req: TakeRequest, session) -> tuple[Take, object]:
    """A take as the controller makes one: the engine's Result recorded into the Take."""
    result = engine.open_take(req.engine_request())
    for _ in result:
        pass
    take = Take.for_request(req, str(engine.info.path), engine.info.sample_rate)
    ran = SimpleNamespace(placement=dict(req.placement), threads=req.threads, peak_memory_mb=0.0)   # (controller.Ran)
    take.record(result.result, ran, where={})
    return take, result.result


def test_the_session_imports_no_qt():
    code = "import sys, kazeia.app.session; print(any(m.startswith('PySide6') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_what_may_start_when(session):
    assert session.take_refusal(busy=False, rendering=False) == "no model is loaded"
    session.info = SimpleNamespace(variant="custom_voice")
    assert session.take_refusal(busy=False, rendering=False) is None
    assert "a take is running" in session.take_refusal(busy=True, rendering=False)
    assert "a script is rendering" in session.take_refusal(busy=True, rendering=True)
    with pytest.raises(ValueError, match="voice profiles need a Base model"):
        session.new_voice("/audio/ana.wav")


def test_a_comparison_goes_from_a_to_b_to_the_pair_it_keeps(session, engines):
    engine = engines("custom_voice")
    session.info = engine.info
    req_a, tag_a = session.start_comparison(request(engine), {"talker": "cpu"}, {"talker": "cpu", "decoder": "cpu"})
    assert tag_a["side"] == "A" and req_a.placement == {"talker": "cpu"}
    a, result_a = run(engine, req_a, session)
    assert session.comparison_step(a, result_a, {"compare": "another"}) is None   # not this comparison's take
    step = session.comparison_step(a, result_a, tag_a)
    assert step.pair is None and step.tag["side"] == "B"
    assert step.next_request.placement == {"talker": "cpu", "decoder": "cpu"}
    assert (step.next_request.text, step.next_request.sampling) == (req_a.text, req_a.sampling)   # same text, seed
    assert session.keep(a) is None
    b, result_b = run(engine, step.next_request, session)
    assert session.keep(b) is None
    done = session.comparison_step(b, result_b, step.tag)
    assert done.pair == (a, b) and session.ab_pair == (a, b) and session.comparison is None
    assert done.summary.startswith("compared: identical codes; identical audio")
    assert a.comparison["other"] == b.id and b.comparison["other"] == a.id and b.comparison["side"] == "B"
    saved = {e["id"]: e for e in json.loads((session.store.folder / "index.json").read_text())}
    assert saved[b.id]["comparison"]["difference"]["codes_identical"] is True   # kept with the takes


def test_a_stopped_comparison_does_not_go_on(session, engines):
    engine = engines("custom_voice")
    req_a, tag_a = session.start_comparison(request(engine), {"talker": "cpu"}, {"talker": "cpu"})
    session.drop_comparison()
    a, result = run(engine, req_a, session)
    assert session.comparison_step(a, result, tag_a) is None


def test_a_full_disk_is_said_and_the_take_stays_listed(session, engines, monkeypatch):
    engine = engines("custom_voice")
    take, _ = run(engine, request(engine), session)

    def full(path, write):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("kazeia.app.takes._atomic_write", full)
    message = session.keep(take)
    assert message.startswith("could not save the take") and "No space left" in message
    assert take in session.store.takes and session.store.audio(take) is take.audio   # playable, exportable


def test_a_chunk_made_again_gets_a_new_seed_and_the_others_keep_theirs(session):
    take = Take(id="t", created=0, text="x", model="m", request={"chunk_seeds": {"0": 11}}, sampling={},
                placement={}, threads=1, timings={}, stop_reason="", sample_rate=24000,
                chunks=[{"index": 0}, {"index": 1}, {"index": 2}])
    assert session.redo_seeds(take, 2, seed=99) == {0: 11, 2: 99}
    fresh = session.redo_seeds(take, 1)
    assert fresh[0] == 11 and 0 <= fresh[1] < 2 ** 31
    with pytest.raises(ValueError, match="has no chunk 4"):
        session.redo_seeds(take, 3)
    restored = session.restored(take)
    assert restored.text == "x" and restored.request == take.request and restored.streaming_text is False


def test_voice_names_are_free_and_messages_are_kept(session):
    session.info = SimpleNamespace(variant="base")
    name, path = session.new_voice("/audio/Ana B.wav")
    assert name == "Ana B" and path == session.voices.path("Ana B")
    path.write_bytes(b"taken")
    assert session.new_voice("/audio/Ana B.wav")[0] == "Ana B 2"
    for i in range(50):
        session.note(f"message {i}")
    shown = session.recent_messages().splitlines()
    assert len(shown) == 40 and shown[-1].endswith("message 49")


def test_a_voice_is_kept_with_each_base_model_at_hand_and_named_from_the_take(session, tmp_path):
    pulled = tmp_path / "base-1.7b.gguf"
    pulled.write_bytes(b"gguf")
    entries = [SimpleNamespace(variant="base", path=str(pulled)),
               SimpleNamespace(variant="base", path=str(tmp_path / "gone.gguf")),   # (deleted since)
               SimpleNamespace(variant="custom_voice", path=str(pulled))]
    with pytest.raises(ValueError, match="needs a Base model"):
        session.voice_keeping_models([])
    assert session.voice_keeping_models(entries) == [str(pulled)]
    session.info = SimpleNamespace(variant="base", path=tmp_path / "open-0.6b.gguf")
    assert session.voice_keeping_models(entries) == [str(tmp_path / "open-0.6b.gguf"), str(pulled)]
    session.info = SimpleNamespace(variant="base", path=pulled)   # (the open one is a pulled one: once)
    assert session.voice_keeping_models(entries) == [str(pulled)]
    take = Take(id="t", created=0, text="x", model="m", request={"speaker": "vivian"}, sampling={}, placement={},
                threads=1, timings={}, stop_reason="", sample_rate=24000)
    assert session.kept_voice_name(take, "mine") == "mine" and session.kept_voice_name(take).startswith("kept ")
    take.request["instruct"] = "A calm, low voice that reads a long novel aloud"
    assert session.kept_voice_name(take) == "kept A calm, low voice that reads a"
