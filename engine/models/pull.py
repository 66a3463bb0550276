"""`kazeia pull`: a released checkpoint from the hub to a registered model file in one step:
list and check it, download and verify it (models/hub.py), convert it to one GGUF file, register it
(models/registry.py).

pull_model() is the API for programs and the workbench's dialog: it reports through on_progress
(PullProgress events, from the calling thread) and stops soon after `cancel` (anything with
is_set(), e.g. a threading.Event) is set, raising PullCancelled; a failure raises PullError with one
line that says why. Whatever stops it, nothing half-written is registered or left under the model's
name: downloads finish into the hub's cache one whole file at a time, the model file appears only
once complete.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..model_files.errors import PullCancelled, PullError
from ..model_files.gguf_file import TypeMix
from .catalog import DEFAULT_DECODER_TYPE, KnownModel, default_type, find_known, repo_for, size_label
from .hub import HubRepo, HubSettings, Listing, RepoFile
from .registry import ModelEntry, Registry, check_name

TTS_MODEL_TYPE = "qwen3_tts"
CODEC_MODEL_TYPE = "qwen3_tts_tokenizer_12hz"
METADATA_BYTES = 16 << 20   # beyond the tensors: the tokenizer (~7 MB for the released vocabulary), headers


@dataclass(frozen=True)
class PullProgress:
    phase: str          # "download", "verify", "convert"
    done: int           # in this phase, over all its files
    total: int
    unit: str = "B"     # "B" (download, verify) or "param" (convert)
    file: str | None = None

    def as_dict(self) -> dict:
        return {"phase": self.phase, "file": self.file, "done": self.done, "total": self.total, "unit": self.unit}


@dataclass(frozen=True)
class PullResult:
    entry: ModelEntry | None    # None for the codec, which is downloaded only
    snapshot: Path              # the checkpoint folder in the hub's cache
    commit: str
    downloaded_bytes: int       # 0 when everything was cached
    up_to_date: bool            # the model was registered from this commit and type already
    offline: bool               # listed from the cache, not by the hub


def check_free_space(need: int, folder: Path, what: str) -> None:
    """Refuses before writing when `need` bytes do not fit where `folder` is (or would be)."""
    probe = Path(folder).resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if need > free:
        raise PullError(f"not enough disk space to {what}: about {_mb(need)} needed in {folder}, {_mb(free)} free")


def _mb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


class _Phase:
    """Throttled PullProgress events of one phase (weights come in 1 MB blocks, small files whole, hashing in
    8 MB blocks; the last event of each file is always sent)."""

    def __init__(self, phase: str, total: int, on_progress, unit: str = "B"):
        self.phase, self.total, self.unit, self.on_progress = phase, total, unit, on_progress
        self.done, self._last = 0, 0.0

    def add(self, n: int, file: str | None, final: bool = False) -> None:
        self.done += n
        now = time.monotonic()
        if self.on_progress is not None and (final or now - self._last >= 0.2):
            self._last = now
            self.on_progress(PullProgress(self.phase, min(self.done, self.total), self.total, self.unit, file))


def pull_model(source: str, *, revision: str | None = None, out_type: str | None = None,
               decoder_type: str | None = None, output: str | os.PathLike | None = None,
               name: str | None = None, force: bool = False,
               on_progress: Callable[[PullProgress], None] | None = None, cancel=None,
               on_note: Callable[[str], None] | None = None) -> PullResult:
    """Pulls `source` (an alias such as "0.6b-customvoice", or a repository id) at `revision`
    (default main), converts it to `out_type` / `decoder_type` (default: the gate-passing mix for its
    size, f16 decoder) into `output` (default <models folder>/<name>.gguf) and registers it as `name`
    (default: the alias, with the type appended when not the default). on_note(text) gets one-line
    remarks (cache used, resumed, conversion skipped)."""
    note = on_note or (lambda text: None)
    settings = HubSettings.from_env()
    known = find_known(source)
    repo = HubRepo(repo_for(source), revision, settings)
    listing = repo.listing()
    if listing.from_cache:
        note(f"using the cached copy of {repo.repo_id} at {listing.commit[:12]} (HF_HUB_OFFLINE or hub unreachable)")
    config_file = listing.file("config.json")
    if config_file is None:
        raise PullError(f"{repo.repo_id} is not a Qwen3-TTS checkpoint: it has no config.json")
    config = repo.read_json(config_file, listing.commit, cancel=cancel)
    model_type = config.get("model_type")
    if model_type == CODEC_MODEL_TYPE or (known is not None and known.codec):
        snapshot, fetched = _fetch_all(repo, listing, on_progress, cancel, note)
        note(f"{repo.repo_id} is the speech codec alone: downloaded and verified into {snapshot}, not converted "
             "(every Qwen3-TTS model carries its own copy in speech_tokenizer/)")
        return PullResult(None, snapshot, listing.commit, fetched, False, listing.from_cache)
    if model_type != TTS_MODEL_TYPE:
        raise PullError(f"{repo.repo_id} is not a Qwen3-TTS checkpoint (config.json model_type {model_type!r}, "
                        f"expected {TTS_MODEL_TYPE!r}); nothing beyond config.json was downloaded")

    size = size_label(config)
    mix = TypeMix.parse(out_type or default_type(size))
    decoder = decoder_type or ("f32" if str(mix) == "f32" else DEFAULT_DECODER_TYPE)
    name = check_name(name or _default_name(repo.repo_id, known, mix, decoder, size))
    registry = Registry()
    out = Path(output) if output is not None else registry.folder / f"{name}.gguf"
    if out.is_dir():
        raise PullError(f"{out} is a folder: give a file name (.gguf)")

    previous = registry.get(name)
    if (not force and previous is not None and previous.revision == listing.commit and previous.type == str(mix)
            and previous.decoder_type == decoder and Path(previous.path) == out.resolve() and out.is_file()
            and out.stat().st_size == previous.file_bytes):
        note(f"{name} is up to date ({repo.repo_id} at {listing.commit[:12]}, {mix}): nothing to do")
        return PullResult(previous, repo.snapshot_dir(listing.commit), listing.commit, 0, True, listing.from_cache)

    snapshot, fetched = _fetch_all(repo, listing, on_progress, cancel, note)
    entry = _convert_and_register(repo, listing, snapshot, config, mix, decoder, size, name, out, registry,
                                  on_progress, cancel)
    return PullResult(entry, snapshot, listing.commit, fetched, False, listing.from_cache)


def _default_name(repo_id: str, known: KnownModel | None, mix: TypeMix, decoder: str, size: str | None) -> str:
    base = known.alias if known is not None else repo_id.split("/", 1)[1].lower().replace("qwen3-tts-12hz-", "")
    if str(mix) != default_type(size):
        base += f"-{mix.slug}"
    if decoder != DEFAULT_DECODER_TYPE:
        base += f"-dec-{decoder}"
    return base


def _fetch_all(repo: HubRepo, listing: Listing, on_progress, cancel, note) -> tuple[Path, int]:
    """Every listed file in the cache and verified; the space the missing ones need is checked first.
    Returns (snapshot folder, bytes downloaded)."""
    missing = [f for f in listing.files if not repo.is_cached(f)]
    left = sum(repo.partial_bytes(f) for f in missing)
    need = sum(f.size or 0 for f in missing) - left
    if left:
        note(f"continuing: {_mb(left)} of {repo.repo_id} are here from an earlier pull")
    if missing and not repo.settings.offline:
        check_free_space(need, repo.settings.cache_dir, f"download {repo.repo_id}")
    download = _Phase("download", need, on_progress)
    verify = _Phase("verify", sum(f.size or 0 for f in listing.files), on_progress)
    counted: dict[str, int] = {}

    def progress(kind: str, file: RepoFile, n: int) -> None:
        if kind == "download":
            counted[file.name] = counted.get(file.name, 0) + n
            download.add(n, file.name)
        elif kind == "verify":
            verify.add(n, file.name)
        else:   # a corrupt copy thrown away: its bytes come again
            download.total += file.size or 0
            verify.total += file.size or 0

    # all downloads first, then all checks: one phase after the other for progress bars
    paths = {}
    for file in listing.files:
        if cancel is not None and cancel.is_set():
            raise PullCancelled("cancelled")
        paths[file.name] = repo.download(file, listing.commit, progress, cancel)
        download.add(0, file.name, final=True)
    for file in listing.files:
        repo.verify(file, listing.commit, paths[file.name], progress, cancel)
        verify.add(0, file.name, final=True)
    if not listing.from_cache:
        repo.remember(listing.commit)
    return repo.snapshot_dir(listing.commit), sum(counted.values())


def estimated_model_bytes(checkpoint_config: dict, generation_config: dict, speech_tokenizer_config: dict,
                          mix: TypeMix, decoder_type: str | None) -> int:
    """About how large the converted file will be (exact tensor bytes plus a margin for metadata)."""
    from ..model_files.convert import expected_tensors
    from ..model_files.gguf_file import estimated_file_bytes
    from ..model_files.metadata import metadata_from_configs
    md = metadata_from_configs(checkpoint_config, generation_config, speech_tokenizer_config)
    return estimated_file_bytes(expected_tensors(md), mix, decoder_type) + METADATA_BYTES


def _convert_and_register(repo: HubRepo, listing: Listing, snapshot: Path, config: dict, mix: TypeMix,
                          decoder: str, size: str | None, name: str, out: Path, registry: Registry,
                          on_progress, cancel) -> ModelEntry:
    from ..model_files.checkpoint import Checkpoint
    from ..model_files.convert import convert
    from ..model_files.errors import ConversionError
    try:
        ckpt = Checkpoint.open(snapshot)
        ckpt.tensors.close()
        estimate = estimated_model_bytes(ckpt.config, ckpt.generation_config, ckpt.speech_tokenizer_config,
                                         mix, decoder)
    except ConversionError as e:
        raise PullError(f"{repo.repo_id} at {listing.commit[:12]} cannot be converted: {e}") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    check_free_space(estimate, out.parent, f"convert {repo.repo_id}")
    phase = _Phase("convert", 1, on_progress, unit="param")

    def converted(done: int, total: int) -> None:
        if cancel is not None and cancel.is_set():
            raise PullCancelled("cancelled while converting")   # the partial file is removed on the way out
        phase.total = total
        phase.add(done - phase.done, None, final=done == total)

    try:
        report = convert(snapshot, out, out_type=mix, decoder_type=decoder, progress=False,
                         on_progress=converted, model_name=repo.repo_id.split("/", 1)[1])
    except ConversionError as e:
        raise PullError(f"{repo.repo_id} at {listing.commit[:12]} cannot be converted: {e}") from None
    variant = config.get("tts_model_type") or "unknown"
    entry = ModelEntry(name=name, path=str(out.resolve()), source=repo.repo_id, revision=listing.commit,
                       type=str(mix), decoder_type=decoder, variant=variant,
                       size=size or f"{report.n_params / 1e6:.0f}M", file_bytes=out.stat().st_size,
                       added=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
                       endpoint=repo.settings.endpoint)
    registry.add(entry)
    return entry
