"""A designed voice kept, and the voice library: a take of the reference's tiny VoiceDesign checkpoint
kept with the tiny Base checkpoint equals (codes) the profile `kazeia voice create` makes from the same
audio and text; the library keeps notes and tags in the profiles, survives a damaged index and two
writers, exports and imports a voice with its preview, and is what `say --voice NAME` and the server's
/v1/audio/voices see."""
from __future__ import annotations

import json
import threading

import httpx2 as httpx
import numpy as np
import pytest
import soundfile

from kazeia.engine import Engine, Request, SamplingParams, load_voice, open_model
from kazeia.engine.audio_io import write_audio
from kazeia.engine.voices.keep_voice import keep_voice, read_take, reference_from_take, speaker_similarity
from kazeia.engine.voices.voice_library import INDEX, VoiceLibrary

from support.commands import kazeia

DESIGN = "A calm, low voice that speaks slowly."
TEXT = "The kept voice says this sentence."


@pytest.fixture(scope="module")
def designed_take(converted):
    """A VoiceDesign take (tiny random checkpoint: its audio is noise-like, but it is the take's audio)."""
    engine = Engine(open_model(converted("voice_design")), threads=2)
    sampling = SamplingParams.from_model(engine.info, seed=3, max_frames=40)
    result = engine.take(Request(TEXT, instruct=DESIGN, language="english", sampling=sampling))
    record = {"id": "t1", "text": TEXT, "model": str(converted("voice_design")),
              "request": {"instruct": DESIGN, "language": "english"}, "sampling": {"seed": 3}}
    return result.audio, record


def _codes(base, voice, seed=7):
    engine = Engine(base, threads=2)
    sampling = SamplingParams.from_model(base.info, seed=seed, max_frames=12)
    return engine.take(Request("Any new text at all.", voice=voice, sampling=sampling))


def test_a_designed_voice_kept_equals_voice_create_of_the_same_audio(converted, designed_take, tmp_path, report):
    audio, record = designed_take
    base = open_model(converted("base"))
    library = VoiceLibrary(tmp_path / "voices")
    names = keep_voice(reference_from_take(audio, 24000, record), [base], library, "calm designed")
    assert names == ["calm designed"]
    entry = library.entry("calm designed")
    assert (entry.source, entry.kind, entry.language, entry.transcript) == ("designed", "in-context", "english", TEXT)
    assert entry.origin["instruct"] == DESIGN and entry.origin["seed"] == 3
    # the same audio and text through `kazeia voice create`
    wav = tmp_path / "take.wav"
    soundfile.write(wav, audio, 24000, subtype="FLOAT")
    r = kazeia("voice", "create", "--model", converted("base"), "--audio", wav, "--text", TEXT, "-o",
               tmp_path / "made.kzvoice", "--threads", "2")
    assert r.returncode == 0, r.stderr
    kept, made = load_voice(library.path("calm designed"), base), load_voice(tmp_path / "made.kzvoice", base)
    assert np.array_equal(kept.x_vector, made.x_vector) and np.array_equal(kept.ref_codes, made.ref_codes)
    a, b = _codes(base, kept), _codes(base, made)
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.audio, b.audio)
    # how close the kept voice's new take is to the take it came from, by the speaker encoder's cosine
    # (random weights: the encoder's numbers, not a voice a listener would recognise)
    from kazeia.engine import create_voice
    from support.goldens import GOLDEN
    ref = tmp_path / "ref.wav"
    soundfile.write(ref, np.load(GOLDEN / "base_xvec_stream.npz")["ref_wav"], 24000)
    near = speaker_similarity(base, audio, a.audio)
    far = speaker_similarity(base, audio, _codes(base, create_voice(base, ref)).audio)
    report(f"kept voice (tiny random checkpoints): speaker cosine of the original take against the kept voice's "
           f"new take {near:.3f}, against another voice's take {far:.3f}")
    assert -1.0 <= far <= 1.0 and -1.0 <= near <= 1.0


def test_voice_create_from_a_take_file_reads_its_text(converted, designed_take, tmp_path, monkeypatch):
    audio, record = designed_take
    monkeypatch.setenv("KAZEIA_DATA_DIR", str(tmp_path / "data"))
    path = write_audio(tmp_path / "exported.wav", audio, 24000, params=record)   # as the workbench exports
    assert read_take(str(path)).text == TEXT
    r = kazeia("voice", "create", "--from-take", path, "--model", converted("base"), "--name", "from file",
               "--tag", "calm", "--threads", "2", env={"KAZEIA_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 0, r.stderr
    assert "designed" in r.stdout and "with its text" in r.stdout
    e = VoiceLibrary(tmp_path / "data" / "voices").entry("from file")
    assert e.source == "designed" and e.tags == ["calm"] and e.transcript == TEXT
    r = kazeia("voice", "create", "--from-take", "no-such-take", "--model", converted("base"),
               env={"KAZEIA_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 2 and "no workbench take with that id or name" in r.stderr
    r = kazeia("voice", "create", "--from-take", path, "--model", converted("voice_design"),
               env={"KAZEIA_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 2 and "a voice is kept with a Base model" in r.stderr


def _library_with_two(converted, folder):
    from kazeia.engine import create_voice
    from support.goldens import GOLDEN
    base = open_model(converted("base"))
    ref = np.load(GOLDEN / "base_xvec_stream.npz")["ref_wav"]
    folder.mkdir(parents=True, exist_ok=True)
    wav = folder.parent / "ref.wav"
    soundfile.write(wav, ref, 24000)
    library = VoiceLibrary(folder)
    library.add(create_voice(base, wav), base, "Narrator", {"language": "english", "tags": ["warm", "book"],
                                                             "notes": "for the novels"})
    library.add(create_voice(base, wav, text="Hello there."), base, "Announcer", {"tags": ["bright"]})
    return library, base


def test_the_library_searches_and_survives_a_damaged_index_and_two_writers(converted, tmp_path):
    library, base = _library_with_two(converted, tmp_path / "voices")
    assert [e.name for e in library.search("warm novels")] == ["Narrator"]
    assert [e.name for e in library.search("in-context")] == []   # (the kind is a column, not a word to search)
    assert {e.name for e in library.search("")} == {"Narrator", "Announcer"}
    assert (tmp_path / "voices" / INDEX).exists()
    for damage in (b"{not json", b"\x00\xff" * 50, json.dumps({"version": 1, "files": {"x": 5}}).encode(), b""):
        (tmp_path / "voices" / INDEX).write_bytes(damage)
        fresh = VoiceLibrary(tmp_path / "voices")
        assert {(e.name, e.kind, tuple(e.tags), e.notes) for e in fresh.entries()} == {
            ("Narrator", "x-vector", ("book", "warm"), "for the novels"), ("Announcer", "in-context", ("bright",), "")}
    # a damaged profile is listed as unreadable, the others stay usable
    (tmp_path / "voices" / "Broken.kzvoice").write_bytes(b"PK\x03\x04 damaged")
    broken = {e.name: e for e in VoiceLibrary(tmp_path / "voices").entries()}["Broken"]
    assert broken.kind == "unreadable" and broken.problem
    (tmp_path / "voices" / "Broken.kzvoice").unlink()
    # two workbenches on one folder, writing at once: nothing lost, names never collide
    one, two = VoiceLibrary(tmp_path / "voices"), VoiceLibrary(tmp_path / "voices")
    voice = load_voice(one.path("Narrator"), base)
    errors = []

    def writer(lib, tag):
        try:
            for i in range(8):
                lib.add(voice, base, f"copy {tag}{i}")
                lib.update("Narrator", notes=f"edited by {tag}{i}")
                lib.entries()
        except Exception as e:   # (recorded: the assertion below names it)
            errors.append(e)
    threads = [threading.Thread(target=writer, args=(lib, tag)) for lib, tag in ((one, "a"), (two, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    names = {e.name for e in VoiceLibrary(tmp_path / "voices").entries()}
    assert names == {"Narrator", "Announcer"} | {f"copy {t}{i}" for t in "ab" for i in range(8)}
    assert one.entry("Narrator").notes in {f"edited by {t}7" for t in "ab"}
    with pytest.raises(ValueError, match="taken"):
        one.rename("copy a0", "copy B1")   # (any case)
    assert one.rename("copy a0", "Storyteller") == "Storyteller" and two.find("storyteller").stem == "Storyteller"


def test_export_import_carries_the_preview_and_say_and_serve_use_the_library(converted, tmp_path, monkeypatch):
    monkeypatch.setenv("KAZEIA_DATA_DIR", str(tmp_path / "data"))
    library, base = _library_with_two(converted, tmp_path / "data" / "voices")
    preview = np.sin(np.arange(4800) / 9).astype(np.float32) * 0.2
    library.keep_preview("Narrator", preview, 24000, base.info, "auto")
    assert np.array_equal(library.cached_preview("Narrator", base.info, "auto")[0], preview)
    library.update("Narrator", tags=["warm"])   # (notes and tags do not change the voice: the preview stays)
    assert library.cached_preview("Narrator", base.info, "auto") is not None
    out = library.export("Narrator", tmp_path / "narrator.kzvoice", base.info)
    other = VoiceLibrary(tmp_path / "elsewhere")
    name = other.import_file(out)
    e = other.entry(name)
    assert (name, e.source, e.tags, e.notes) == ("Narrator", "recording", ["warm"], "for the novels")
    assert np.array_equal(other.cached_preview(name)[0], preview)   # the preview came with the file
    assert np.array_equal(load_voice(other.path(name), base).x_vector, load_voice(library.path("Narrator"), base).x_vector)
    assert other.import_file(out) == "Narrator 2"
    library.delete("Narrator")   # (its previews go with it)
    assert library.names() == ["Announcer"] and not any((tmp_path / "data" / "voices" / ".previews").iterdir())
    # say --voice NAME: a voice of the library, any case; an unknown one is named with the ones there are
    r = kazeia("say", "--model", converted("base"), "--voice", "announcer", "--text", "Hi.", "--max-frames", "4",
               "-o", tmp_path / "hi.wav", env={"KAZEIA_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 0, r.stderr
    r = kazeia("say", "--model", converted("base"), "--voice", "nobody", "--text", "Hi.", "-o", tmp_path / "x.wav",
               env={"KAZEIA_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 2 and "no voice 'nobody'" in r.stderr and "Announcer" in r.stderr
    r = kazeia("voice", "list", "bright", env={"KAZEIA_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 0 and r.stdout.startswith("Announcer")
    # the server of a Base model offers the library's voices with what the library knows of them
    from kazeia.engine.serve.app import ServerSettings, create_app
    from kazeia.engine.serve.local import LocalServer
    from kazeia.engine.serve.voices import VoiceBook
    engine = Engine(base, threads=2)
    with LocalServer(create_app(engine, VoiceBook(base), ServerSettings("base"))) as server:
        voices = httpx.get(server.url + "/v1/audio/voices", timeout=30).json()["voices"]
        by_id = {v["id"]: v for v in voices}
        assert by_id["Announcer"]["kind"] == "profile" and by_id["Announcer"]["tags"] == ["bright"]
        r = httpx.post(server.url + "/v1/audio/speech", json={"model": "base", "voice": "Announcer", "input": "Hi.",
                                                              "response_format": "pcm", "max_frames": 3}, timeout=60)
        assert r.status_code == 200 and len(r.content) == 3 * 1920 * 2
