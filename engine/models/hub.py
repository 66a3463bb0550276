"""Fetching a checkpoint from the Hugging Face Hub into the hub's own cache, every file checked
against the hash the hub publishes for it.

huggingface_hub reads HF_ENDPOINT, HF_HUB_CACHE and HF_HUB_OFFLINE once, at import; they are read
here at each call instead and passed to it explicitly, so a process (the workbench, a test) can change
them between pulls. HF_TOKEN is left to huggingface_hub, which reads it at each request.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import httpx2
from huggingface_hub import HfApi, hf_hub_download, hf_hub_url
from huggingface_hub.utils import build_hf_headers, get_session
from huggingface_hub import errors as hf_errors

from ..model_files.errors import PullCancelled, PullError

DEFAULT_ENDPOINT = "https://huggingface.co"
# What the converter reads (configs, tokenizer files, weights); READMEs and pictures are left out.
CHECKPOINT_PATTERNS = ("*.json", "*.safetensors", "*.txt")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_HASH_BLOCK = 8 << 20
PART_SUFFIX = ".part"   # a weights file being downloaded, kept between pulls
DOWNLOAD_TRIES = 5

# progress(kind, file, n): "download" and "verify" with bytes since the last call, "discard" when a
# file's bytes so far are thrown away (a corrupt copy fetched again)
Progress = Callable[[str, "RepoFile", int], None]


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in ("1", "ON", "YES", "TRUE")


@dataclass(frozen=True)
class HubSettings:
    endpoint: str
    cache_dir: Path
    offline: bool

    @classmethod
    def from_env(cls) -> "HubSettings":
        """The variables huggingface_hub itself honours, read now."""
        home = os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
        cache = (os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
                 or os.path.join(home, "hub"))
        return cls(endpoint=(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
                   cache_dir=Path(os.path.expanduser(os.path.expandvars(cache))),
                   offline=_truthy(os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")))


@dataclass(frozen=True)
class RepoFile:
    name: str              # path in the repository, "/"-separated
    size: int | None
    digest: str | None     # sha256 of an LFS file, else the git blob sha1; also its blob's name in the cache

    @property
    def algorithm(self) -> str | None:
        return None if self.digest is None else ("sha256" if len(self.digest) == 64 else "git-sha1")


@dataclass(frozen=True)
class Listing:
    repo: str
    commit: str
    files: tuple[RepoFile, ...]
    from_cache: bool       # True when listed from the local cache (offline), not by the hub

    def file(self, name: str) -> RepoFile | None:
        return next((f for f in self.files if f.name == name), None)


def file_digest(path: str | os.PathLike, algorithm: str, on_bytes: Callable[[int], None] | None = None,
                cancel=None) -> str:
    """sha256, or git's blob sha1 (sha1 of b"blob <size>\\0" + content), of a file."""
    size = os.path.getsize(path)
    h = hashlib.sha256() if algorithm == "sha256" else hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            if cancel is not None and cancel.is_set():
                raise PullCancelled("cancelled while verifying")
            h.update(block)
            if on_bytes is not None:
                on_bytes(len(block))
    return h.hexdigest()


def _progress_class(report: Callable[[int], None], cancel):
    """A stand-in for the tqdm class huggingface_hub drives while downloading (it only calls update,
    close and the context methods): forwards the byte counts, and stops the download on cancel."""
    class _Bar:
        def __init__(self, *args, **kwargs):
            pass

        def update(self, n: int = 1) -> None:
            if cancel is not None and cancel.is_set():
                raise PullCancelled("cancelled while downloading")
            report(n)

        def close(self) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> bool:
            return False
    return _Bar


class HubRepo:
    """One repository at one revision, read through the hub's cache folder."""

    def __init__(self, repo_id: str, revision: str | None = None, settings: HubSettings | None = None):
        self.repo_id = repo_id
        self.revision = revision or "main"
        self.settings = settings or HubSettings.from_env()
        self.storage = self.settings.cache_dir / ("models--" + repo_id.replace("/", "--"))

    # -- listing ------------------------------------------------------------------------------------

    def listing(self, patterns=CHECKPOINT_PATTERNS) -> Listing:
        """The files at this revision and their hashes: from the hub, or from the cache offline or
        when the hub cannot be reached and the revision was fetched before."""
        if self.settings.offline:
            return self._cached_listing(patterns, why="HF_HUB_OFFLINE is set")
        try:
            info = HfApi(endpoint=self.settings.endpoint).model_info(
                self.repo_id, revision=self.revision, files_metadata=True)
        except (httpx2.ConnectError, httpx2.TimeoutException) as e:
            if self._cached_commit() is not None:
                return self._cached_listing(patterns, why=f"cannot reach {self.settings.endpoint}")
            raise PullError(f"cannot reach {self.settings.endpoint} ({e}); nothing of {self.repo_id} is cached "
                            f"in {self.settings.cache_dir}") from None
        except Exception as e:
            raise self.error(e) from None
        files = tuple(RepoFile(s.rfilename, s.lfs.size if s.lfs else s.size,
                               s.lfs.sha256 if s.lfs else s.blob_id)
                      for s in info.siblings or () if _wanted(s.rfilename, patterns))
        if not info.sha:
            raise PullError(f"{self.settings.endpoint} gave no commit for {self.repo_id}: not a Hugging Face hub?")
        return Listing(self.repo_id, info.sha, files, from_cache=False)

    def remember(self, commit: str) -> None:
        """Records which commit the revision named, as the hub's cache does (refs/<revision>), so that
        an offline pull of the same revision finds it: files are fetched by commit, which records none."""
        if self.revision != commit:
            ref = self.storage / "refs" / self.revision
            ref.parent.mkdir(parents=True, exist_ok=True)
            if not ref.is_file() or ref.read_text().strip() != commit:
                ref.write_text(commit)

    def _cached_commit(self) -> str | None:
        if _COMMIT.match(self.revision):
            return self.revision if (self.storage / "snapshots" / self.revision).is_dir() else None
        ref = self.storage / "refs" / self.revision
        return ref.read_text().strip() if ref.is_file() else None

    def _cached_listing(self, patterns, why: str) -> Listing:
        commit = self._cached_commit()
        snapshot = self.storage / "snapshots" / (commit or "-")
        if commit is None or not snapshot.is_dir():
            raise PullError(f"{self.repo_id} ({self.revision}) is not in the Hugging Face cache "
                            f"{self.settings.cache_dir} and {why}: pull it once online")
        files = []
        for path in sorted(snapshot.rglob("*")):
            name = path.relative_to(snapshot).as_posix()
            if path.is_dir() or not _wanted(name, patterns):
                continue
            # the cache names each blob by the hash the hub gave for it: that is what it is checked against
            digest = Path(os.readlink(path)).name if path.is_symlink() else None
            files.append(RepoFile(name, path.stat().st_size if path.exists() else None, digest))
        return Listing(self.repo_id, commit, tuple(files), from_cache=True)

    # -- files --------------------------------------------------------------------------------------

    def is_cached(self, file: RepoFile) -> bool:
        return file.digest is not None and (self.storage / "blobs" / file.digest).is_file()

    def partial_bytes(self, file: RepoFile) -> int:
        """Bytes of the file an earlier pull left to be continued (_fetch_blob)."""
        if file.algorithm != "sha256":
            return 0
        part = self.storage / "blobs" / (file.digest + PART_SUFFIX)
        return part.stat().st_size if part.is_file() else 0

    def snapshot_dir(self, commit: str) -> Path:
        return self.storage / "snapshots" / commit

    def fetch(self, file: RepoFile, commit: str, progress: Progress | None = None, cancel=None) -> Path:
        """The file in the cache, downloaded if missing, and verified (see verify)."""
        return self.verify(file, commit, self.download(file, commit, progress, cancel), progress, cancel)

    def download(self, file: RepoFile, commit: str, progress: Progress | None = None, cancel=None) -> Path:
        """The file in the cache, downloaded if missing; a weights file is continued where an earlier
        pull or a dropped connection left it (_fetch_blob), a file once finished is never fetched again."""
        report = progress or (lambda kind, f, n: None)
        try:
            if file.algorithm == "sha256" and not self.settings.offline and not self.is_cached(file):
                self._fetch_blob(file, commit, report, cancel)
            return Path(hf_hub_download(
                self.repo_id, file.name, revision=commit, cache_dir=self.settings.cache_dir,
                endpoint=self.settings.endpoint, local_files_only=self.settings.offline,
                tqdm_class=_progress_class(lambda n: report("download", file, n), cancel)))
        except PullCancelled:
            raise
        except Exception as e:
            raise self.error(e, file.name) from None

    def _fetch_blob(self, file: RepoFile, commit: str, report, cancel) -> None:
        """A weights file into the cache's blob, continued across pulls: huggingface_hub 2.4 writes
        each download to a file unique to its process and deletes it on failure, so a pull stopped at
        3 of 4 GB would start that file again from zero. The bytes go to blobs/<sha256>.part (the
        name is the content's, so any commit may continue it), a dropped connection or a new pull
        asks for the rest with a Range request, and the whole file is renamed into place; then
        hf_hub_download finds the blob and only links it into the snapshot."""
        blob = self.storage / "blobs" / file.digest
        part = blob.with_name(blob.name + PART_SUFFIX)
        part.parent.mkdir(parents=True, exist_ok=True)
        url = hf_hub_url(self.repo_id, file.name, revision=commit, endpoint=self.settings.endpoint)
        for attempt in range(1, DOWNLOAD_TRIES + 1):
            have = part.stat().st_size if part.exists() else 0
            if file.size is not None and have > file.size:   # not this file's beginning: start over
                part.unlink()
                have = 0
            if have == file.size:   # (whole already: a pull that stopped before moving it)
                break
            try:
                self._get_into(url, part, have, file, report, cancel)
                break
            except (httpx2.TransportError, httpx2.StreamError) as e:   # a dropped connection: ask for the rest
                if attempt == DOWNLOAD_TRIES:
                    raise PullError(f"{self.repo_id}/{file.name}: the connection kept dropping ({e}); run the pull "
                                    "again to continue from the bytes already here") from None
        if file.size is None or part.stat().st_size == file.size:
            part.replace(blob)   # (checked against its sha256 by verify, like any cached file)

    @staticmethod
    def _get_into(url: str, part: Path, have: int, file: RepoFile, report, cancel) -> None:
        headers = build_hf_headers()
        if have:
            headers["Range"] = f"bytes={have}-"
        with get_session().stream("GET", url, headers=headers, follow_redirects=True,
                                  timeout=httpx2.Timeout(30.0, read=60.0)) as response:
            if have and response.status_code == 200:   # the server sent it all again: take it from the top
                have = 0
            elif response.status_code not in (200, 206):
                response.raise_for_status()
            with open(part, "ab" if have else "wb") as f:
                for chunk in response.iter_bytes(1 << 20):
                    if cancel is not None and cancel.is_set():
                        raise PullCancelled("cancelled while downloading (the bytes so far are kept for the next pull)")
                    f.write(chunk)
                    report("download", file, len(chunk))

    def verify(self, file: RepoFile, commit: str, path: Path, progress: Progress | None = None,
               cancel=None) -> Path:
        """Checks a cached file against its hash; a copy that does not match is deleted and fetched
        once more, and a second mismatch (or one offline) is an error."""
        report = progress or (lambda kind, f, n: None)
        for attempt in (1, 2):
            if file.digest is None:
                return path
            got = file_digest(path, file.algorithm, lambda n: report("verify", file, n), cancel)
            if got == file.digest:
                return path
            self._evict(path)
            report("discard", file, 0)
            if attempt == 2 or self.settings.offline:
                again = "again " if attempt == 2 else ""
                raise PullError(f"{self.repo_id}: {file.name} does not match the hub's {file.algorithm} "
                                f"{again}(expected {file.digest[:12]}..., got {got[:12]}...); the damaged copy was "
                                + ("deleted: check the network or the mirror" if attempt == 2 else
                                   "deleted, and HF_HUB_OFFLINE forbids fetching it again"))
            path = self.download(file, commit, progress, cancel)
        raise AssertionError("unreachable")

    def _evict(self, path: Path) -> None:
        """Deletes a cached file: the blob behind the snapshot's link, then the link."""
        blob = Path(os.path.realpath(path))
        blob.unlink(missing_ok=True)
        path.unlink(missing_ok=True)

    def read_json(self, file: RepoFile, commit: str, progress: Progress | None = None, cancel=None) -> dict:
        path = self.fetch(file, commit, progress, cancel)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise PullError(f"{self.repo_id}: {file.name} is not valid JSON ({e})") from None

    # -- errors -------------------------------------------------------------------------------------

    def error(self, e: Exception, filename: str | None = None) -> PullError:
        """One line for what huggingface_hub raised."""
        where, repo = self.settings.endpoint, self.repo_id
        what = f"{repo}/{filename}" if filename else repo
        status = getattr(getattr(e, "response", None), "status_code", None)
        if isinstance(e, hf_errors.GatedRepoError):
            return PullError(f"{repo} is gated: accept its terms on {where}/{repo} and set HF_TOKEN to a token of "
                             "that account")
        if isinstance(e, hf_errors.RepositoryNotFoundError):
            return PullError(f"{repo}: no such repository on {where} (a private one needs HF_TOKEN)")
        if isinstance(e, hf_errors.RevisionNotFoundError):
            return PullError(f"{repo}: no revision {self.revision!r} on {where}")
        if isinstance(e, hf_errors.RemoteEntryNotFoundError):
            return PullError(f"{what}: no such file at revision {self.revision!r}")
        if isinstance(e, (hf_errors.LocalEntryNotFoundError, hf_errors.OfflineModeIsEnabled)):
            return PullError(f"{what} is not in the Hugging Face cache {self.settings.cache_dir}"
                             + (" and HF_HUB_OFFLINE is set" if self.settings.offline else
                                f" and {where} could not be reached"))
        if status == 401:
            return PullError(f"{where} refused the token (HTTP 401 Unauthorized): check HF_TOKEN "
                             "(or the token saved by `hf auth login`)")
        if status == 403:
            return PullError(f"{where} refused access to {repo} (HTTP 403 Forbidden): the token lacks the permission")
        if status is not None:
            return PullError(f"{what}: {where} answered HTTP {status}")
        if isinstance(e, (httpx2.ConnectError, httpx2.TimeoutException)):
            return PullError(f"cannot reach {where} ({e}); with the files cached, HF_HUB_OFFLINE=1 uses them")
        if isinstance(e, (httpx2.HTTPError, OSError, ValueError)):
            return PullError(f"{what}: download failed ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
        return PullError(f"{what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def _wanted(name: str, patterns) -> bool:
    base = name.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(base, p) for p in patterns)
