"""`kazeia pull` and `kazeia models` against a hub on loopback (tests/support/fake_hub.py) through the real
huggingface_hub client: download, verification, resume, faults, offline use, disk space, registry."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from support.commands import kazeia
from support.fake_hub import FakeHub, FakeRepo
from support.goldens import GOLDEN, checkpoint_dir

pytestmark = pytest.mark.timeout(180)

CV_REPO = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
BASE_REPO = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"



@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A hub serving the tiny CustomVoice checkpoint as the 0.6B CustomVoice release; the
    environment points huggingface_hub at it and every folder into tmp_path."""
    server = FakeHub({CV_REPO: FakeRepo.from_folder(checkpoint_dir("custom_voice"), CV_REPO)}).start()
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE",
                "HUGGINGFACE_HUB_CACHE", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("KAZEIA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KAZEIA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    yield server
    server.stop()


def cache_repo(tmp_path, repo_id=CV_REPO) -> Path:
    return tmp_path / "hf" / "hub" / ("models--" + repo_id.replace("/", "--"))


def registry(tmp_path) -> list[dict]:
    path = tmp_path / "data" / "models" / "registry.json"
    return json.loads(path.read_text())["models"] if path.exists() else []


def model_files(tmp_path) -> list[Path]:
    folder = tmp_path / "data" / "models"
    return sorted(folder.glob("*.gguf")) + sorted(folder.glob(".*partial*")) if folder.exists() else []


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def one_line_error(r, *needles):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ---- the whole path, through the command line ------------------------------------------------------

def test_pull_registers_a_model_usable_by_name(hub, tmp_path):
    r = kazeia("pull", "0.6b-customvoice", "--json")
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    phases = [e["phase"] for e in events]
    assert {"download", "verify", "convert"} <= set(phases) and phases[-1] == "done"
    # phases in order, and each one's last event complete
    assert phases.index("download") < phases.index("verify") < phases.index("convert")
    for phase in ("download", "verify", "convert"):
        last = [e for e in events if e["phase"] == phase][-1]
        assert last["done"] == last["total"] > 0, last
    repo = hub.repos[CV_REPO]
    download = [e for e in events if e["phase"] == "download"][-1]
    wanted = [n for n in repo.files if n.endswith((".json", ".safetensors", ".txt"))]
    assert download["total"] == sum(len(repo.files[n]) for n in wanted) - len(repo.files["config.json"])
    done = events[-1]
    assert done["commit"] == repo.commit and done["model"]["name"] == "0.6b-customvoice"

    [entry] = registry(tmp_path)
    assert entry["source"] == CV_REPO and entry["revision"] == repo.commit and entry["variant"] == "custom_voice"
    assert entry["type"] == "q8_0" and entry["decoder_type"] == "f16"   # a size without a gate mix: q8_0
    gguf = Path(entry["path"])
    assert gguf == tmp_path / "data" / "models" / "0.6b-customvoice.gguf" and gguf.stat().st_size == entry["file_bytes"]
    # the cache holds exactly the hub's bytes, the README left out
    snapshot = cache_repo(tmp_path) / "snapshots" / repo.commit
    for name in wanted:
        assert (snapshot / name).read_bytes() == repo.files[name], name
    assert not (snapshot / "README.md").exists()

    r = kazeia("info", "0.6b-customvoice", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["variant"] == "custom_voice" and info["path"] == str(gguf) and info["name"] == "Qwen3-TTS-12Hz-0.6B-CustomVoice"

    # again: up to date, no file fetched
    gets = len([1 for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p])
    r = kazeia("pull", "0.6b-customvoice")
    assert r.returncode == 0 and "up to date" in r.stderr, r.stderr
    assert len([1 for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p]) == gets

    r = kazeia("models")
    assert r.returncode == 0 and "0.6b-customvoice" in r.stdout and CV_REPO in r.stdout and str(gguf) in r.stdout
    r = kazeia("models", "info", "0.6b-customvoice")
    assert r.returncode == 0 and repo.commit in r.stdout and "vivian" in r.stdout, r.stdout
    r = kazeia("models", "rm", "0.6b-customvoice")
    assert r.returncode == 0 and not gguf.exists() and registry(tmp_path) == []
    one_line_error(kazeia("models", "info", "0.6b-customvoice"), "no model named")
    one_line_error(kazeia("info", "0.6b-customvoice"), "0.6b-customvoice")


def test_registered_name_speaks_and_a_path_wins(hub, tmp_path, monkeypatch):
    from kazeia.engine.model_files.demo import resolve_model
    from kazeia.engine.models.pull import pull_model
    result = pull_model("0.6b-customvoice", name="cv", out_type="q8_0")
    assert resolve_model("cv") == Path(result.entry.path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cv").write_bytes(b"")
    assert resolve_model("cv") == Path("cv")   # an existing path wins over a registered name
    (tmp_path / "cv").unlink()
    Path(result.entry.path).unlink()
    with pytest.raises(ValueError, match="registered but its file"):
        resolve_model("cv")


def test_say_with_a_registered_name(hub, tmp_path):
    from kazeia.engine.models.pull import pull_model
    pull_model(CV_REPO, name="tiny-cv")
    out = tmp_path / "hello.wav"
    r = kazeia("say", "--model", "tiny-cv", "--speaker", "vivian", "--text", "Hi.", "--max-frames", "4",
               "--threads", "1", "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 1000


# ---- faults on the wire ---------------------------------------------------------------------------

def test_dropped_connection_resumes_with_a_range_request(hub, tmp_path):
    """A 24 MB file cut in the middle is fetched on from the bytes that arrived."""
    from kazeia.engine.models.pull import pull_model
    codec = "Qwen/Qwen3-TTS-Tokenizer-12Hz"
    big = hashlib.sha256(b"seed").digest() * (24 * 2**20 // 32)
    hub.repos[codec] = FakeRepo({"config.json": b'{"model_type": "qwen3_tts_tokenizer_12hz"}',
                                 "model.safetensors": big}, "c" * 40)
    hub.drop.add("model.safetensors")
    result = pull_model(codec)
    gets = hub.gets("model.safetensors")
    assert len(gets) == 2, gets
    assert "range" not in gets[0]
    start = int(gets[1]["range"].removeprefix("bytes=").rstrip("-"))
    assert 0 < start <= len(big) // 2
    assert sha256(result.snapshot / "model.safetensors") == hashlib.sha256(big).hexdigest()


def test_a_stopped_pull_continues_where_it_stopped(hub, tmp_path):
    """A pull stopped half-way through the weights (here cancelled; Ctrl-C or a crash leave the same)
    keeps their bytes; the next pull asks only for the rest, and the file is whole and verified."""
    from kazeia.engine.model_files.errors import PullCancelled
    from kazeia.engine.models.pull import pull_model
    weights = "model.safetensors"
    data = hub.repos[CV_REPO].files[weights]
    hub.pace[weights] = 8e6   # (~0.9 s: a stop lands mid-file)
    cancel = threading.Event()

    def stop_midway(p):
        if p.phase == "download" and p.file == weights and p.done >= 2 * 2**20:
            cancel.set()
    with pytest.raises(PullCancelled):
        pull_model("0.6b-customvoice", on_progress=stop_midway, cancel=cancel)
    part = cache_repo(tmp_path) / "blobs" / (hashlib.sha256(data).hexdigest() + ".part")
    kept = part.stat().st_size
    assert 2 * 2**20 <= kept < len(data) and part.read_bytes() == data[:kept]
    snapshot = cache_repo(tmp_path) / "snapshots" / hub.repos[CV_REPO].commit
    already = sum(f.stat().st_size for f in snapshot.rglob("*") if f.is_file())   # (the small files before it)
    hub.pace.clear()
    notes, events = [], []
    result = pull_model("0.6b-customvoice", on_note=notes.append, on_progress=events.append)
    gets = hub.gets(weights)
    assert len(gets) == 2 and gets[1]["range"] == f"bytes={kept}-"
    assert any("continuing" in n for n in notes)
    assert result.downloaded_bytes == sum(len(b) for n, b in hub.repos[CV_REPO].files.items()
                                          if n.endswith((".json", ".txt", ".safetensors"))) - kept - already
    download = [e for e in events if e.phase == "download"][-1]
    assert download.done == download.total   # (the total is what was left to fetch)
    assert sha256(result.snapshot / weights) == hashlib.sha256(data).hexdigest() and not part.exists()
    assert result.entry is not None and Path(result.entry.path).is_file()


def test_dropped_connection_mid_checkpoint_still_converts(hub, tmp_path):
    from kazeia.engine.models.pull import pull_model
    hub.drop.add("model.safetensors")
    result = pull_model("0.6b-customvoice")
    assert len(hub.gets("model.safetensors")) == 2
    data = hub.repos[CV_REPO].files["model.safetensors"]
    assert sha256(result.snapshot / "model.safetensors") == hashlib.sha256(data).hexdigest()
    assert result.entry is not None and Path(result.entry.path).is_file()


def test_corrupt_download_is_fetched_again(hub, tmp_path):
    from kazeia.engine.models.pull import pull_model
    name = "speech_tokenizer/model.safetensors"
    hub.corrupt.add(name)
    hub.corrupt.add("vocab.json")   # a small file: checked by its git blob sha1
    events = []
    result = pull_model("0.6b-customvoice", on_progress=events.append)
    assert len(hub.gets(name)) == 2 and len(hub.gets("vocab.json")) == 2
    assert (result.snapshot / name).read_bytes() == hub.repos[CV_REPO].files[name]
    assert (result.snapshot / "vocab.json").read_bytes() == hub.repos[CV_REPO].files["vocab.json"]
    last = [e for e in events if e.phase == "download"][-1]
    assert last.done == last.total


def test_corrupt_twice_is_an_error_and_nothing_is_kept(hub, tmp_path):
    from kazeia.engine.model_files.errors import PullError
    from kazeia.engine.models.pull import pull_model
    hub.corrupt_always.add("model.safetensors")
    with pytest.raises(PullError, match="model.safetensors does not match the hub's sha256 again"):
        pull_model("0.6b-customvoice")
    data = hub.repos[CV_REPO].files["model.safetensors"]
    assert not (cache_repo(tmp_path) / "blobs" / hashlib.sha256(data).hexdigest()).exists()
    assert len(hub.gets("model.safetensors")) == 2
    assert registry(tmp_path) == [] and model_files(tmp_path) == []


def test_hub_errors_are_one_line(hub, tmp_path):
    hub.repos["acme/private-tts"] = FakeRepo.from_folder(checkpoint_dir("custom_voice"), "acme/private-tts",
                                                         private_token="hf_right")
    one_line_error(kazeia("pull", "acme/missing"), "acme/missing: no such repository on", hub.url)
    one_line_error(kazeia("pull", "acme/private-tts"), "no such repository", "HF_TOKEN")
    os.environ["HF_TOKEN"] = "hf_wrong"
    try:
        one_line_error(kazeia("pull", "acme/private-tts"), "refused the token (HTTP 401", "HF_TOKEN")
        os.environ["HF_TOKEN"] = "hf_right"
        r = kazeia("pull", "acme/private-tts", "-q")
        assert r.returncode == 0, r.stderr
    finally:
        del os.environ["HF_TOKEN"]
    one_line_error(kazeia("pull", "0.6b-customvoice", "--revision", "v9"), "no revision 'v9'")
    one_line_error(kazeia("pull", "not-an-alias"), "neither a known alias")
    assert [e["source"] for e in registry(tmp_path)] == ["acme/private-tts"]


def test_not_a_qwen3_tts_repository(hub, tmp_path):
    files = {"config.json": json.dumps({"model_type": "bert"}).encode(), "model.safetensors": b"\0" * 100_000}
    hub.repos["acme/bert"] = FakeRepo(files, "b" * 40)
    r = kazeia("pull", "acme/bert", "--json")
    line = one_line_error(r, "acme/bert is not a Qwen3-TTS checkpoint", "'bert'")
    assert json.loads(r.stdout.splitlines()[-1]) == {"phase": "error", "message": line.split("error: ", 1)[1]}
    assert hub.gets("model.safetensors") == [] and len(hub.gets("config.json")) == 1
    assert registry(tmp_path) == []


def test_missing_file_cannot_be_converted(hub, tmp_path):
    repo = FakeRepo.from_folder(checkpoint_dir("custom_voice"), "acme/no-vocab")
    del repo.files["vocab.json"]
    hub.repos["acme/no-vocab"] = repo
    one_line_error(kazeia("pull", "acme/no-vocab"), "cannot be converted", "vocab.json")
    assert registry(tmp_path) == [] and model_files(tmp_path) == []


def test_codec_is_download_only(hub, tmp_path):
    from kazeia.engine.models.pull import pull_model
    codec = "Qwen/Qwen3-TTS-Tokenizer-12Hz"
    hub.repos[codec] = FakeRepo.from_folder(Path(checkpoint_dir("custom_voice")) / "speech_tokenizer", codec)
    notes = []
    result = pull_model("tokenizer-12hz", on_note=notes.append)
    assert result.entry is None and (result.snapshot / "model.safetensors").is_file()
    assert any("not converted" in n for n in notes) and registry(tmp_path) == []


# ---- offline, disk space, cancelling ----------------------------------------------------------------

def test_offline_reuses_the_cache(hub, tmp_path, monkeypatch):
    from kazeia.engine.model_files.errors import PullError
    from kazeia.engine.models.pull import pull_model
    first = pull_model("0.6b-customvoice")
    hub.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = kazeia("pull", "0.6b-customvoice", "--type", "f16", "--name", "cv-f16")
    assert r.returncode == 0, r.stderr
    assert "using the cached copy" in r.stderr
    names = {e["name"]: e for e in registry(tmp_path)}
    assert names["cv-f16"]["revision"] == first.commit and names["cv-f16"]["type"] == "f16"
    one_line_error(kazeia("pull", "1.7b-base"), "not in the Hugging Face cache", "HF_HUB_OFFLINE")
    # a cached file damaged on disk is noticed offline too (its blob is named by the hub's hash)
    blob = Path(os.path.realpath(first.snapshot / "model.safetensors"))
    raw = bytearray(blob.read_bytes())
    raw[1000] ^= 0xFF
    blob.write_bytes(bytes(raw))
    with pytest.raises(PullError, match="does not match .* HF_HUB_OFFLINE forbids fetching it again"):
        pull_model("0.6b-customvoice", name="cv-again")
    assert not blob.exists() and "cv-again" not in {e["name"] for e in registry(tmp_path)}


def _tmpfs_pull(tmp_path, mount: Path, *args) -> subprocess.CompletedProcess:
    """`kazeia pull` with `mount` on a 1 MB tmpfs in a private mount namespace."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to mount a small tmpfs")
    mount.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {mount}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {probe.stderr.strip()}")
    cmd = " ".join([f"mount -t tmpfs -o size=1m tmpfs {mount} &&", "exec", sys.executable, "-m", "kazeia.engine",
                    "pull", *args])
    return subprocess.run(["unshare", "-rm", "sh", "-c", cmd], capture_output=True, text=True, timeout=120,
                          env={**os.environ})


def test_disk_space_is_checked_before_writing(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "small-cache"))
    r = _tmpfs_pull(tmp_path, tmp_path / "small-cache", "0.6b-customvoice")
    one_line_error(r, "not enough disk space to download", "MB needed", "MB free")
    assert hub.gets("model.safetensors") == [] and registry(tmp_path) == []

    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("KAZEIA_DATA_DIR", str(tmp_path / "small-data"))
    r = _tmpfs_pull(tmp_path, tmp_path / "small-data", "0.6b-customvoice")
    one_line_error(r, "not enough disk space to convert")
    assert not (tmp_path / "small-data" / "models").exists() or not any((tmp_path / "small-data" / "models").iterdir())


def test_cancel_leaves_nothing_behind(hub, tmp_path):
    from kazeia.engine.model_files.errors import PullCancelled
    from kazeia.engine.models.pull import pull_model
    cancel = threading.Event()

    def stop_in(phase):
        def on_progress(p):
            if p.phase == phase and 0 < p.done:
                cancel.set()
        return on_progress
    with pytest.raises(PullCancelled):
        pull_model("0.6b-customvoice", on_progress=stop_in("download"), cancel=cancel)
    blobs = cache_repo(tmp_path) / "blobs"
    assert not any(p.name.endswith(".incomplete") for p in blobs.iterdir())   # (only weights' .part are kept)
    assert registry(tmp_path) == [] and model_files(tmp_path) == []
    cancel.clear()
    with pytest.raises(PullCancelled):
        pull_model("0.6b-customvoice", on_progress=stop_in("convert"), cancel=cancel)
    assert registry(tmp_path) == [] and model_files(tmp_path) == []
    cancel.clear()
    assert pull_model("0.6b-customvoice", cancel=cancel).entry.name == "0.6b-customvoice"


# ---- the registry and the catalog -------------------------------------------------------------------

def test_damaged_registry_is_a_message(hub, tmp_path):
    folder = tmp_path / "data" / "models"
    folder.mkdir(parents=True)
    (folder / "registry.json").write_text("{not json")
    one_line_error(kazeia("models"), "registry", "is damaged")
    one_line_error(kazeia("models", "rm", "x"), "is damaged")


def test_names_are_checked(hub):
    from kazeia.engine.models.registry import check_name
    assert check_name("0.6b-customvoice-talker-q5_k+cp-q6_k")
    for bad in ("demo", "../x", "Has Caps", "a/b", ""):
        with pytest.raises(ValueError):
            check_name(bad)


def test_catalog_sizes_match_the_release_inventory():
    """The sizes `kazeia models available` shows, recomputed from the release's tensor inventory."""
    from kazeia.engine.model_files.gguf_file import TypeMix
    from kazeia.engine.models.catalog import KNOWN_MODELS, default_type, size_label
    from kazeia.engine.models.pull import estimated_model_bytes
    from kazeia.engine.model_files.random_model import GENERATION_CONFIG
    inventory = json.loads((GOLDEN / "inventory_real.json").read_text())
    codec = inventory["speech_tokenizer"]
    keys = {"customvoice": "custom_voice", "voicedesign": "voice_design", "base": "base"}
    for model in KNOWN_MODELS:
        if model.codec:
            assert abs(model.download_mb - codec["num_params"] * 2 / 1e6) < 5
            continue
        size, kind = model.alias.split("-")
        entry = inventory["models"][f"{size}-{keys[kind]}"]
        assert entry["config"]["tts_model_type"] == model.variant and size_label(entry["config"]) == model.size
        download = (entry["num_params"] + codec["num_params"]) * 2 / 1e6
        assert 0 < model.download_mb - download < 10, (model.alias, download)
        mix = TypeMix.parse(default_type(model.size))
        converted = estimated_model_bytes(entry["config"], GENERATION_CONFIG, codec["config"], mix, "f16") / 1e6
        assert abs(model.converted_mb - converted) / converted < 0.02, (model.alias, converted)
