"""Takes and blind-test results as a hostile file gives them: take ids that climb out of the takes
folder, fields of the wrong type, JSON nested without bound or over its size, damaged audio. The
workbench's store keeps every other take, recovers the damaged one from its audio, keeps the index as
it was aside and says why; nothing outside the takes folder is read, listed or deleted; `kazeia voice
create --from-take` refuses a damaged record with exit code 2 and one line; the blind-test history
lists the good results and names the bad file and field."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kazeia.app.takes import Take, TakeStore
from kazeia.engine.takes import take_record
from kazeia.engine.takes.blind_test import BlindTest, saved_tests
from kazeia.engine.voices.keep_voice import read_take
from kazeia.engine.takes.take_record import check_record
from kazeia.engine.untrusted import InputError

from support.commands import kazeia


def record(i: int, **changes) -> dict:
    """A take's record as the workbench writes it (a long take of two chunks)."""
    r = {"id": f"20261206-1015{i:02d}-abc{i:03d}", "created": 1.7e9 + i, "text": f"take {i}", "model": "/m/base.gguf",
         "request": {"speaker": None, "language": "english", "instruct": "calm", "streaming_text": False,
                     "voice_profile": None, "chunk_seeds": {"0": 5}},
         "sampling": {"do_sample": True, "temperature": 0.9, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.05,
                      "cp_do_sample": True, "cp_temperature": 0.9, "cp_top_k": 50, "cp_top_p": 1.0, "seed": i,
                      "max_frames": None},
         "placement": {"talker": "cpu"}, "threads": 2,
         "timings": {"frames": 10, "frame_seconds": 0.08, "rtf": 0.5, "ttfa_ms": 100.0}, "stop_reason": "eos",
         "sample_rate": 24000, "name": "", "where": {"talker": "cpu"}, "frame_ms": {"talker": [1.0, 2.0]},
         "peak_memory_mb": 100.0,
         "comparison": {"group": "g", "side": "B", "other": "x",
                        "difference": {"codes_identical": True, "first_divergent_frame": None, "frames": [10, 10],
                                       "snr_db": float("inf"), "max_abs_diff": 0.0}},
         "chunks": [{"index": 0, "text": "a", "written": "a", "voice": None, "language": "english", "seed": 5,
                     "span": [0, 1200], "stop_reason": "eos", "rewrites": [["Dr", "doctor", "lexicon"]]},
                    {"index": 1, "text": "b", "written": "b", "voice": None, "language": "english", "seed": 6,
                     "span": [1200, 2400], "stop_reason": "eos", "rewrites": []}]}
    r.update(changes)
    return r


def takes_folder(tmp_path: Path, records: list, wavs=None) -> Path:
    folder = tmp_path / "data" / "takes"
    folder.mkdir(parents=True)
    for r in records if wavs is None else wavs:
        rid = r["id"] if isinstance(r, dict) else r
        if isinstance(rid, str) and "/" not in rid:
            soundfile.write(folder / f"{rid}.wav", np.full(2400, 0.1, np.float32), 24000, subtype="FLOAT")
    (folder / "index.json").write_text(json.dumps(records))
    return folder


def test_a_take_id_never_names_a_path(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    soundfile.write(victim / "x.wav", np.zeros(240, np.float32), 24000)
    good = record(1)
    folder = takes_folder(tmp_path, [good, record(2, id="../../../victim/x"), record(3, id="/etc/passwd"),
                                     record(4, id=".hidden"), record(5, id=5)], wavs=[good])
    store = TakeStore(tmp_path / "data")
    assert [t.id for t in store.takes] == [good["id"]]
    assert any("takes[1]" in p and "not a take id" in p for p in store.problems)
    assert (victim / "x.wav").exists()
    store.delete(store.takes[0])
    assert (victim / "x.wav").exists() and not (folder / f"{good['id']}.wav").exists()
    # a take whose id was changed in memory cannot reach out either
    rogue = Take(**{k: v for k, v in record(6).items()}, audio=np.zeros(10, np.float32))
    rogue.id = "../../victim/x"
    store.takes.append(rogue)
    with pytest.raises(InputError, match="not a take id"):
        store.delete(rogue)
    assert (victim / "x.wav").exists()


CHUNK = {"index": 0, "text": "a", "written": "a", "voice": None, "language": None, "seed": 1, "span": [0, 1],
         "stop_reason": "eos", "rewrites": []}
WRONG = [  # (a field made wrong, the field the message names)
    ({"created": [1]}, "created"), ({"text": 5}, "text"), ({"model": None}, "model"),
    ({"request": "x"}, "request"), ({"request": {"instruct": 5}}, "request.instruct"),
    ({"request": {"chunk_seeds": {"x": 1}}}, "request.chunk_seeds"),
    ({"request": {"chunk_seeds": {"0": 2**64}}}, "request.chunk_seeds.0"),
    ({"sampling": {"temperature": "hot"}}, "temperature"), ({"sampling": {"seed": -1}}, "seed"),
    ({"sampling": {"seed": 2**40}}, "sampling.seed"), ({"threads": 1.5}, "threads"),
    ({"timings": {"frames": "x"}}, "timings.frames"), ({"sample_rate": 0}, "sample_rate"),
    ({"frame_ms": {"talker": "x"}}, "frame_ms.talker"), ({"where": {"talker": 1}}, "where.talker"),
    ({"comparison": {"difference": {"codes_identical": 1}}}, "comparison.difference.codes_identical"),
    ({"chunks": "x"}, "chunks"), ({"chunks": [{**CHUNK, "span": "x"}]}, "chunks[0].span"), ({"chunks": [{"index": 0, "span": [0, 1]}]}, "chunks[0]: has no"),
    ({"chunks": [{**CHUNK, "span": [5, 1]}]}, "chunks[0].span[1]"),
    ({"chunks": [{**CHUNK, "written": 3}]}, "chunks[0].written"),
    ({"name": ["x"]}, "name"), ({"peak_memory_mb": "1"}, "peak_memory_mb"),
]


@pytest.mark.parametrize("change,field", WRONG, ids=[f for _, f in WRONG])
def test_a_damaged_take_is_recovered_and_the_others_kept(tmp_path, change, field):
    records = [record(1), record(2, **change), record(3)]
    folder = takes_folder(tmp_path, records)
    original = (folder / "index.json").read_bytes()
    store = TakeStore(tmp_path / "data")
    by_id = {t.id: t for t in store.takes}
    assert set(by_id) == {r["id"] for r in records}   # (none lost: the damaged one recovered from its audio)
    assert by_id[records[0]["id"]].text == "take 1" and by_id[records[2]["id"]].chunks == records[2]["chunks"]
    assert by_id[records[1]["id"]].text == "(recovered take)"
    assert any(f"take {records[1]['id']}:" in p and field in p for p in store.problems), store.problems
    assert [p.read_bytes() for p in folder.glob("index.damaged-*.json")] == [original]   # (kept as it was)
    again = TakeStore(tmp_path / "data")   # (the index written back is whole: nothing more to say)
    assert not again.problems and len(again.takes) == 3


def test_an_index_nested_too_deep_or_too_large_loses_no_take(tmp_path, monkeypatch):
    folder = takes_folder(tmp_path, [record(1), record(2)])
    (folder / "index.json").write_text("[" * 100_000)
    store = TakeStore(tmp_path / "data")
    assert len(store.takes) == 2 and "nested deeper" in store.problems[0]
    monkeypatch.setattr(take_record, "MAX_INDEX_BYTES", 1000)
    (folder / "index.json").write_text(json.dumps([record(1), record(2)]))
    store = TakeStore(tmp_path / "data")
    assert len(store.takes) == 2 and "over the limit of 1,000" in store.problems[0]
    (folder / "index.json").write_text("{}")
    assert "a list of takes is needed" in TakeStore(tmp_path / "data").problems[0]


def test_damaged_audio_is_left_alone_not_a_crash(tmp_path):
    folder = takes_folder(tmp_path, [record(1)])
    (folder / "20261206-101599-abcdef.wav").write_bytes(b"RIFF not audio")
    (folder / "not ours; a (copy).wav").write_bytes(b"RIFF")
    store = TakeStore(tmp_path / "data")
    assert [t.id for t in store.takes] == [record(1)["id"]]
    assert any("not readable audio" in p for p in store.problems)
    assert (folder / "20261206-101599-abcdef.wav").exists() and (folder / "not ours; a (copy).wav").exists()


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                       max_size=3), max_leaves=10)
FIELDS = ["id", "created", "text", "request", "request.instruct", "request.chunk_seeds", "sampling",
          "sampling.seed", "sampling.top_k", "timings", "timings.frames", "frame_ms", "chunks", "chunks.0",
          "chunks.0.span", "chunks.0.rewrites", "comparison", "comparison.difference", "where", "sample_rate"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(FIELDS), json_values)
def test_fuzz_a_record_is_refused_or_usable_everywhere(field, value):
    """A record that passes is one every reader of a take can use (the details pane, restoring its
    settings, a chunk made again, the subtitles of an export, keeping its voice)."""
    from kazeia.app.panels.takes import take_details
    from kazeia.app.session import Session
    from kazeia.engine.voices.keep_voice import reference_from_take
    r = record(1)
    *parents, key = field.split(".")
    target = r
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target[p]
    target[int(key) if isinstance(target, list) else key] = value
    try:
        check_record(json.loads(json.dumps(r)), "index.json")
    except ValueError as e:
        assert str(e).startswith("index.json: ") and "\n" not in str(e)
        return
    take = Take.from_json(r)
    assert take_details(take) and take.label and take.voice and take.seconds >= 0
    Session.restored(take)
    if take.chunks:   # (a take without chunks has none to make again: that ValueError is by design)
        Session.redo_seeds(take, len(take.chunks) - 1, 7)
    [(c["span"][0], c["span"][1], " ".join(c["written"].split()), c["index"]) for c in take.chunks]
    audio = np.sin(np.arange(48000) / 7).astype(np.float32) * 0.3
    reference_from_take(audio, 24000, r)


def test_from_take_refuses_a_damaged_record(tmp_path):
    env = {"KAZEIA_DATA_DIR": str(tmp_path / "data")}
    takes_folder(tmp_path, [record(1, id="../../x", name="mine"), record(2, name="other")])
    with pytest.raises(InputError, match="not a take id"):
        read_take("mine", tmp_path / "data" / "takes")
    r = kazeia("voice", "create", "--from-take", "mine", env=env)
    assert r.returncode == 2 and r.stderr.startswith("kazeia voice: error:") and "not a take id" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    # an exported take's record beside its audio, damaged
    wav = tmp_path / "exported.wav"
    soundfile.write(wav, np.sin(np.arange(48000) / 7).astype(np.float32) * 0.3, 24000)
    Path(f"{wav}.json").write_text("[" * 50_000)
    r = kazeia("voice", "create", "--from-take", wav, env=env)
    assert r.returncode == 2 and "exported.wav.json: nested deeper" in r.stderr
    Path(f"{wav}.json").write_text(json.dumps(record(1, chunks=[{**CHUNK, "span": "x"}])))
    with pytest.raises(InputError, match=r"chunks\[0\].span"):
        read_take(str(wav))


def _saved(folder: Path, name: str, d) -> None:
    (folder / "listening").mkdir(parents=True, exist_ok=True)
    (folder / "listening" / f"{name}.json").write_text(d if isinstance(d, str) else json.dumps(d))


def test_blind_test_history_lists_the_good_and_names_the_bad(tmp_path):
    test = BlindTest("abx", {"label": "A take", "take": "t1", "placement": {"talker": "cpu"}}, {"label": "B"},
                     trials=4, seed=9)
    for choice in "ABAB":
        test.answer(choice)
    test.save(tmp_path)
    good = test.to_dict()
    bad = {"trials": ("5", "trials"), "seed": ([1], "seed"), "answers": (["C"], "answers"), "id": ("../x", "id"),
           "gains_db": ([1.0], "gains_db"), "kind": ("other", "kind"), "a": ("x", "a"), "started": (None, "started")}
    for key, (value, _) in bad.items():
        _saved(tmp_path, f"bad-{key}", {**good, key: value})
    _saved(tmp_path, "deep", "[" * 100_000)
    _saved(tmp_path, "list", "[1, 2]")
    problems: list[str] = []
    tests = saved_tests(tmp_path, problems)
    assert [t.id for t in tests] == [test.id] and tests[0].verdict == test.verdict
    assert len(problems) == len(bad) + 2
    for key, (_, field) in bad.items():
        assert any(f"bad-{key}.json: {field}" in p for p in problems), (key, problems)
    assert any("deep.json: nested deeper" in p for p in problems)
    rogue = BlindTest("abx", {"label": "a"}, {"label": "b"}, trials=1)
    rogue.id = "../../outside"
    with pytest.raises(InputError, match="not a test's id"):
        rogue.save(tmp_path)
    assert not (tmp_path.parent / "outside.json").exists()


def test_an_audio_files_comment_nested_without_end_is_no_parameters(tmp_path):
    """(a take exported elsewhere carries its settings in its comment: read as outside input)"""
    from kazeia.engine.audio_io import read_params
    path = tmp_path / "given.wav"
    with soundfile.SoundFile(path, "w", 24000, 1, subtype="FLOAT") as f:
        f.comment = "[" * 3000
        f.write(np.zeros(240, np.float32))
    assert read_params(path) is None
