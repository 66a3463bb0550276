"""Voice profiles (.kzvoice) as a hostile user shares them: every field that once became a path, wrong
types, arrays and zip members declaring huge sizes, bytes mutated at random. The one reader
(engine/voices/voice_profile.py) refuses each with one InputError naming the file and the field, in bounded
memory and time; `kazeia voice import` refuses it with exit code 2 and writes nothing; a library with
one bad profile lists the others and that one as unreadable, with why; delete touches nothing outside
the library; a Base model's server skips the bad profile and says so."""
from __future__ import annotations

import io
import json
import struct
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kazeia.engine.untrusted import InputError
from kazeia.engine.voices.voice_library import MAX_NAME_BYTES, VoiceLibrary, clean_name
from kazeia.engine.voices.voice_profile import MAX_FILE_BYTES, read_profile

from support.commands import kazeia

HIDDEN = 64   # the tiny Base checkpoint's hidden size (size "1b7" in its config)
# what reading may cost: untrusted.read_bytes asks for a buffer of the limit (+1) whatever the file's
# size (it is given back at once), and a few MiB of Python besides
MEMORY_BOUND = MAX_FILE_BYTES + 8 * 2**20


def good_meta(**changes) -> dict:
    meta = {"format": "kazeia-voice", "version": 1,
            "model": {"name": "tiny-base", "variant": "base", "size": "1b7", "hidden_size": HIDDEN},
            "ref_text": "Hello there.",
            "about": {"source": "recording", "language": "english", "notes": "n", "tags": ["warm"],
                      "created": 1.7e9, "origin": {"seed": 3, "text": "hi"}, "name": "Shared"}}
    meta.update(changes)
    return meta


def good_arrays() -> dict:
    rng = np.random.default_rng(0)
    return {"x_vector": rng.standard_normal(HIDDEN).astype(np.float32),
            "ref_codes": rng.integers(0, 2048, (10, 16)).astype(np.int32)}


def npy(array: np.ndarray) -> bytes:
    f = io.BytesIO()
    np.save(f, array)
    return f.getvalue()


def profile_bytes(meta=None, arrays=None, raw: dict | None = None, compress=zipfile.ZIP_STORED) -> bytes:
    """A .kzvoice as numpy.savez writes it, but of anything: `raw` members go in as given."""
    meta = good_meta() if meta is None else meta
    members = {f"{k}.npy": npy(v) for k, v in (good_arrays() if arrays is None else arrays).items()}
    members["meta.npy"] = npy(np.frombuffer(json.dumps(meta).encode(), np.uint8))
    members.update(raw or {})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compress) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out.getvalue()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def npy_header(shape, descr="<f4") -> bytes:
    """A .npy header alone (version 1.0), claiming `shape`: no data follows."""
    header = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


# ---- one reader, every field --------------------------------------------------------------------
def _about(**changes):
    return good_meta(about={**good_meta()["about"], **changes})


def _model(**changes):
    return good_meta(model={**good_meta()["model"], **changes})


WRONG = [   # (meta, the field the message names)
    (_about(created=[1]), "meta.about.created"),
    (good_meta(model="x"), "meta.model"),
    (good_meta(ref_text=5), "meta.ref_text"),
    (good_meta(about="x"), "meta.about"),
    (_about(name=5), "meta.about.name"),
    (_about(name="n" * 5000), "meta.about.name"),
    (_about(tags="warm"), "meta.about.tags"),
    (_about(tags=[1]), "meta.about.tags[0]"),
    (_about(origin={"text": {"deep": 1}}), "meta.about.origin.text"),
    (_about(notes=None, language=3), "meta.about.language"),
    (_model(size="/../../../../x"), "meta.model.size"),
    (_model(size=".."), "meta.model.size"),
    (_model(size=7), "meta.model.size"),
    (_model(hidden_size="64"), "meta.model.hidden_size"),
    (_model(hidden_size=10**12), "meta.model.hidden_size"),
    (_model(hidden_size=32), "x_vector"),           # (the array does not match what the meta says)
    (_model(name=None), "meta.model.name"),
    (good_meta(version="1"), "version"),
    (good_meta(version=True), "version"),
    (good_meta(format="other"), "meta.format"),
    (good_meta(ref_text=None), "meta.ref_text"),    # (codes without their transcript)
    ([1, 2], "meta.format"),
]


@pytest.mark.parametrize("meta,field", WRONG, ids=[f for _, f in WRONG])
def test_every_wrong_field_is_named(tmp_path, meta, field):
    path = write(tmp_path / "bad.kzvoice", profile_bytes(meta))
    with pytest.raises(InputError) as e:
        read_profile(path)
    message = str(e.value)
    assert message.startswith(f"{path}: ") and field in message and "\n" not in message


BAD_ARRAYS = [
    ({"x_vector": np.zeros(HIDDEN, np.int32)}, "x_vector"),
    ({"x_vector": np.full(HIDDEN, np.nan, np.float32)}, "x_vector"),
    ({"x_vector": np.zeros((8, 8), np.float32)}, "x_vector"),
    ({"ref_codes": np.full((10, 16), 5000, np.int32)}, "ref_codes"),
    ({"ref_codes": np.full((10, 16), -1, np.int32)}, "ref_codes"),
    ({"ref_codes": np.zeros((10, 8), np.int32)}, "ref_codes"),
    ({"ref_codes": np.zeros((0, 16), np.int32)}, "ref_codes"),
    ({"ref_codes": np.zeros((2000, 16), np.int16)}, "ref_codes"),
    ({"ref_codes": np.zeros((10, 16), np.float32)}, "ref_codes"),
    ({"preview": np.zeros(100, np.float32)}, "meta.preview"),   # (audio without its rate)
]


@pytest.mark.parametrize("change,field", BAD_ARRAYS, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_ARRAYS)])
def test_every_wrong_array_is_named(tmp_path, change, field):
    path = write(tmp_path / "bad.kzvoice", profile_bytes(arrays={**good_arrays(), **change}))
    with pytest.raises(InputError, match=field):
        read_profile(path)


def test_object_arrays_and_strange_members_are_refused(tmp_path):
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    cases = {"pickle": {"x_vector.npy": pickled.getvalue()},
             "npy 3.0": {"x_vector.npy": b"\x93NUMPY\x03\x00" + npy(np.zeros(HIDDEN, np.float32))[8:]},
             "not npy": {"x_vector.npy": b"just text"},
             "structured": {"x_vector.npy": npy(np.zeros(HIDDEN, [("a", "<f4")]))}}
    for label, raw in cases.items():
        path = write(tmp_path / f"{label}.kzvoice", profile_bytes(raw=raw))
        with pytest.raises(InputError, match="x_vector"):
            read_profile(path)
    for data in (b"", b"not a zip", b"PK\x03\x04 damaged", profile_bytes()[:300]):
        with pytest.raises(InputError, match="not a Kazeia voice profile"):
            read_profile(write(tmp_path / "cut.kzvoice", data))
    with pytest.raises(InputError, match="no such file"):
        read_profile(tmp_path / "missing.kzvoice")
    with pytest.raises(InputError, match="not a regular file"):
        read_profile("/dev/zero")
    with pytest.raises(InputError, match="folder"):
        read_profile(tmp_path)


# ---- sizes declared, never believed -------------------------------------------------------------
def _bounded(call) -> tuple[float, int]:
    """(seconds, peak bytes Python and numpy allocated) of `call`, which must raise InputError."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(InputError) as e:
            call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return time.perf_counter() - start, peak, str(e.value)


def test_huge_declared_sizes_allocate_nothing(tmp_path, report):
    # an .npy header claiming 4 TiB of float32 (2**40 values), with no data behind it
    claim = write(tmp_path / "claim.kzvoice", profile_bytes(raw={"x_vector.npy": npy_header((2**40,))}))
    seconds, peak, message = _bounded(lambda: read_profile(claim))
    assert "x_vector" in message and "over the limit" in message
    assert seconds < 2 and peak < MEMORY_BOUND
    report(f"voice file claiming a 4 TiB x_vector: refused in {seconds * 1000:.1f} ms, peak {peak / 2**20:.2f} MiB")
    # a header whose shape fits the limit but not the bytes there are
    short = write(tmp_path / "short.kzvoice", profile_bytes(raw={"x_vector.npy": npy_header((HIDDEN,))}))
    with pytest.raises(InputError, match="needs 256 bytes, the file holds 0"):
        read_profile(short)
    # a zip member that inflates hugely: 200 MB of zeros deflated to ~200 KB
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("meta.npy", npy(np.frombuffer(json.dumps(good_meta()).encode(), np.uint8)))
        zf.writestr("preview.npy", b"\0" * 200_000_000)
    path = write(tmp_path / "bomb.kzvoice", bomb.getvalue())
    del bomb
    seconds, peak, message = _bounded(lambda: read_profile(path))
    assert "preview" in message and "over the limit" in message
    assert seconds < 2 and peak < MEMORY_BOUND
    report(f"voice file of {path.stat().st_size / 1e3:.0f} KB inflating to 200 MB: refused in {seconds * 1000:.1f} ms, "
           f"peak {peak / 2**20:.2f} MiB")


def test_a_member_lying_about_its_size_inflates_no_more_than_it_said(tmp_path):
    """The central directory says x_vector.npy is 384 bytes; its deflated data holds 50 MB: never more
    than was declared is inflated (then the CRC, or the array's own checks, refuse it)."""
    small = npy(np.zeros(HIDDEN, np.float32))
    body = small + b"\0" * 50_000_000
    data = bytearray(profile_bytes(arrays={"x_vector": np.zeros(1, np.float32)}, raw={"x_vector.npy": body},
                                   compress=zipfile.ZIP_DEFLATED))
    name = b"x_vector.npy"
    central = data.index(b"PK\x01\x02" + data[data.index(b"PK\x01\x02") + 4:][:0])   # (first entry)
    while data[central + 46:central + 46 + len(name)] != name:
        central = data.index(b"PK\x01\x02", central + 4)
    assert struct.unpack_from("<L", data, central + 24)[0] == len(body)
    struct.pack_into("<L", data, central + 24, len(small))   # (the declared size: a lie)
    path = write(tmp_path / "lie.kzvoice", bytes(data))
    tracemalloc.start()
    try:
        try:
            meta, arrays = read_profile(path)
            assert not arrays["x_vector"].any()   # (what was declared, and no more)
        except InputError as e:
            assert str(e).startswith(f"{path}: ")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND


# ---- mutated at random: ValueError or a checked profile, nothing else ---------------------------
GOOD = profile_bytes()
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=12)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(GOOD) - 1), st.integers(0, 255)), min_size=1, max_size=8),
       st.integers(0, len(GOOD)))
def test_fuzz_mutated_bytes(tmp_path, flips, cut):
    data = bytearray(GOOD)
    for at, value in flips:
        data[at] = value
    _read_or_refuse(tmp_path / "fuzz.kzvoice", bytes(data[:max(cut, 1)] if cut < 40 else data))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["format", "version", "model", "ref_text", "about", "preview", "model.size", "model.name",
                        "model.hidden_size", "about.name", "about.tags", "about.created", "about.origin",
                        "about.notes"]), json_values)
def test_fuzz_meta_fields(tmp_path, field, value):
    meta = good_meta()
    *parents, key = field.split(".")
    (meta[parents[0]] if parents else meta)[key] = value
    _read_or_refuse(tmp_path / "fuzz.kzvoice", profile_bytes(meta))


def _read_or_refuse(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        meta, arrays = read_profile(path)
    except ValueError as e:
        assert str(e).startswith(f"{path}: ") and "\n" not in str(e)
        return
    # what passed is whole: the library can list it and make its previews folder from it
    assert arrays["x_vector"].shape == (meta["model"]["hidden_size"],)
    library = VoiceLibrary(path.parent / "lib")
    (library.folder / "v.kzvoice").write_bytes(data)
    assert library.entries()[0].kind != "unreadable"
    assert len(library._voice_digest("v")) == 24
    (library.folder / "v.kzvoice").unlink()


# ---- names ----------------------------------------------------------------------------------------
def test_names_from_a_file_never_name_a_path(tmp_path):
    library = VoiceLibrary(tmp_path / "voices")
    for name, expected in (("../../evil", "_evil"), ("..", "_"), ("/etc/passwd", "_etc_passwd"), ("", "shared"),
                           ("  ", "shared"), (".hidden", "_hidden")):
        src = write(tmp_path / "in" / "shared.kzvoice", profile_bytes(_about(name=name)))
        got = library.import_file(src)
        assert got.startswith(expected) and (library.folder / f"{got}.kzvoice").is_file()
    assert {p.split("/")[0] for p in tree(tmp_path)} == {"voices", "in"}   # (nothing written elsewhere)
    long = "語" * 200   # 600 bytes of UTF-8, 200 characters (the reader's limit)
    got = library.import_file(write(tmp_path / "in" / "long.kzvoice", profile_bytes(_about(name=long))))
    assert len(got.encode()) <= MAX_NAME_BYTES and got == "語" * (MAX_NAME_BYTES // 3)
    assert library.import_file(tmp_path / "in" / "long.kzvoice").endswith(" 2")   # (numbered, still fits)
    assert clean_name(12345) == "12345" and clean_name("a/b\\c\0d") == "a_b_c_d"


# ---- the library, the command line, the server ---------------------------------------------------
def test_a_folder_beside_the_library_survives_import_and_delete(tmp_path):
    """The issue's case: meta.model.size `/../../../../victim` once named the previews folder."""
    data = tmp_path / "data"
    victim = write(tmp_path / "victim" / "keep.txt", b"mine").parent
    env = {"KAZEIA_DATA_DIR": str(data)}
    meta = _model(size="/../../../victim")
    meta["preview"] = {"sample_rate": 24000, "text": "x"}
    evil = write(tmp_path / "evil.kzvoice", profile_bytes(meta, raw={"preview.npy": npy(np.zeros(2400, np.float32))}))
    r = kazeia("voice", "import", evil, env=env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().startswith("kazeia voice: error:") and "meta.model.size" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not any((data / "voices").glob("*.kzvoice"))
    # the same file placed in the library by an older Kazeia: listed unreadable, deleted alone
    write(data / "voices" / "Evil.kzvoice", evil.read_bytes())
    r = kazeia("voice", "list", env=env)
    assert r.returncode == 0 and "Evil" in r.stdout and "unreadable: meta.model.size" in r.stdout, r.stdout + r.stderr
    r = kazeia("voice", "delete", "evil", env=env)
    assert r.returncode == 0, r.stderr
    assert (victim / "keep.txt").read_bytes() == b"mine" and not (data / "voices" / "Evil.kzvoice").exists()


def test_a_library_with_bad_profiles_lists_the_others(tmp_path, converted):
    from kazeia.engine import open_model
    from kazeia.engine.serve.voices import VoiceBook
    folder = tmp_path / "data" / "voices"
    library = VoiceLibrary(folder)
    good = library.import_file(write(tmp_path / "good.kzvoice", profile_bytes(_about(name="Good"))))
    for i, (meta, field) in enumerate(WRONG[:6]):
        write(folder / f"bad{i}.kzvoice", profile_bytes(meta))
    write(folder / "claim.kzvoice", profile_bytes(raw={"x_vector.npy": npy_header((2**40,))}))
    entries = {e.name: e for e in VoiceLibrary(folder).entries()}
    assert entries[good].kind == "in-context" and entries[good].tags == ["warm"]
    for i, (_, field) in enumerate(WRONG[:6]):
        assert entries[f"bad{i}"].kind == "unreadable" and entries[f"bad{i}"].problem.startswith(field)
    assert entries["claim"].kind == "unreadable" and "x_vector" in entries["claim"].problem
    assert [e.name for e in VoiceLibrary(folder).entries()] == list(entries)   # (again, from the index)
    # the command line lists them all; the server of a Base model skips the bad ones and says why
    r = kazeia("voice", "list", env={"KAZEIA_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 0 and r.stdout.count("unreadable:") == 7 and good in r.stdout
    book = VoiceBook(open_model(converted("base")), folder)
    assert book.resolve(good).kind == "profile" and len(book.skipped) == 7
    assert all(str(folder) in why for why in book.skipped)
    # a damaged index with entries of the wrong types is a cache: read the profiles again
    index = folder / "index.json"
    cache = json.loads(index.read_text())
    for item in cache["files"].values():
        item["entry"]["tags"], item["entry"]["created"] = "x", [1]
    index.write_text(json.dumps(cache))
    assert {e.name: e.tags for e in VoiceLibrary(folder).entries()}[good] == ["warm"]
    index.write_text("[" * 100_000)
    assert len(VoiceLibrary(folder).entries()) == 8
    # an index an older Kazeia wrote (version 1, profiles unchecked) is read again, not believed
    cache = json.loads(index.read_text())
    cache["version"] = 1
    cache["files"]["bad0.kzvoice"]["entry"].update(kind="x-vector", problem="")
    index.write_text(json.dumps(cache))
    assert {e.name: e.kind for e in VoiceLibrary(folder).entries()}["bad0"] == "unreadable"


def test_nothing_is_written_for_a_bad_import_and_a_bad_edit(tmp_path):
    library = VoiceLibrary(tmp_path / "voices")
    before = tree(tmp_path)
    for meta, _ in WRONG:
        with pytest.raises(ValueError):
            library.import_file(write(tmp_path / "in.kzvoice", profile_bytes(meta)))
    assert tree(tmp_path) == before | {"in.kzvoice"}
    name = library.import_file(write(tmp_path / "ok.kzvoice", profile_bytes()))
    kept = library.path(name).read_bytes()
    with pytest.raises(InputError, match="meta.about.notes"):
        library.update(name, notes="n" * 20_000)
    assert library.path(name).read_bytes() == kept


def test_voice_list_sends_the_terminal_no_control_codes(tmp_path):
    data = tmp_path / "data"
    VoiceLibrary(data / "voices").import_file(write(tmp_path / "loud.kzvoice", profile_bytes(
        _about(name="Loud", notes="\x1b]0;owned\x07\x1b[2Jgone\nnext line", tags=["\x1b[31mred"]))))
    r = kazeia("voice", "list", env={"KAZEIA_DATA_DIR": str(data)})
    assert r.returncode == 0 and "Loud" in r.stdout and "gone" in r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and len(r.stdout.strip().splitlines()) == 1
