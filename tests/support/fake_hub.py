"""A Hugging Face hub on loopback, enough of it for huggingface_hub's model_info(files_metadata=True)
and hf_hub_download over plain HTTP (no Xet headers, so the client never tries Xet): repository info
with hashes, HEAD/GET on resolve URLs with X-Repo-Commit, ETag / X-Linked-Etag / X-Linked-Size,
Content-Length, Range requests answered 206, and the hub's error codes (X-Error-Code RepoNotFound,
RevisionNotFound, EntryNotFound; 401 "Invalid credentials" for a wrong token).

Faults, each served once per file: `drop[name]` sends half of the body and closes the connection;
`corrupt[name]` serves the body with one byte flipped; `pace[name]` sends it at that many bytes a
second. `requests` logs (method, path, headers with lower-case names)."""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeRepo:
    files: dict[str, bytes]
    commit: str
    private_token: str | None = None   # set: only this bearer token may read it

    @classmethod
    def from_folder(cls, folder: str | Path, repo_id: str, **kw) -> "FakeRepo":
        root = Path(folder)
        files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
        files[".gitattributes"] = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
        files["README.md"] = b"# a test checkpoint\n"
        return cls(files, hashlib.sha1(repo_id.encode()).hexdigest(), **kw)

    def is_lfs(self, name: str) -> bool:
        return name.endswith(LFS_SUFFIXES)

    def etag(self, name: str) -> str:
        data = self.files[name]
        return hashlib.sha256(data).hexdigest() if self.is_lfs(name) else git_blob_sha1(data)

    def sibling(self, name: str) -> dict:
        data = self.files[name]
        s = {"rfilename": name, "size": len(data), "blobId": git_blob_sha1(data)}
        if self.is_lfs(name):
            s["size"] = len(data)
            s["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
        return s


@dataclass
class FakeHub:
    repos: dict[str, FakeRepo] = field(default_factory=dict)
    drop: set[str] = field(default_factory=set)       # file names (path in the repo) to cut once
    corrupt: set[str] = field(default_factory=set)    # file names to serve damaged once
    corrupt_always: set[str] = field(default_factory=set)
    pace: dict[str, float] = field(default_factory=dict)   # file name -> bytes a second (a slow download)
    requests: list[tuple[str, str, dict]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeHub":
        hub = self

        class Handler(_Handler):
            pass
        Handler.hub = hub
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def gets(self, name: str) -> list[dict]:
        """Headers of each GET of a file's bytes."""
        with self.lock:
            return [h for m, p, h in self.requests
                    if m == "GET" and (r := _RESOLVE.match(p)) is not None and r.group(3) == name]


_INFO = re.compile(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub

    def log_message(self, *args) -> None:   # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _error(self, status: int, code: str | None = None, message: str | None = None) -> None:
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        if message:
            self.send_header("X-Error-Message", message)
        payload = json.dumps({"error": message or code or str(status)}).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _repo(self, repo_id: str) -> FakeRepo | None:
        """The repository, or None after answering as the hub does for a missing or forbidden one."""
        repo = self.hub.repos.get(repo_id)
        auth = self.headers.get("Authorization", "")
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        if repo.private_token is not None and auth != f"Bearer {repo.private_token}":
            if auth:
                self._error(401, None, "Invalid credentials in Authorization header")
            else:
                self._error(401, "RepoNotFound", "Repository not found")
            return None
        return repo

    def _serve(self, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        with self.hub.lock:
            self.hub.requests.append((self.command, path, {k.lower(): v for k, v in self.headers.items()}))
        if m := _INFO.match(path):
            return self._serve_info(m, body)
        m = _RESOLVE.match(path)
        if not m:
            return self._error(404)
        repo = self._repo(m.group(1))
        if repo is None:
            return
        if m.group(2) not in ("main", repo.commit):
            return self._error(404, "RevisionNotFound", "Invalid rev id")
        name = m.group(3)
        if name not in repo.files:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("X-Repo-Commit", repo.commit)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._serve_file(repo, name, body)

    def _serve_info(self, m: re.Match, body: bool) -> None:
        """A repository's (or a revision's) info: its commit and files."""
        repo = self._repo(m.group(1))
        if repo is None:
            return
        if m.group(2) not in (None, "main", repo.commit):
            return self._error(404, "RevisionNotFound", "Invalid rev id")
        info = {"id": m.group(1), "modelId": m.group(1), "sha": repo.commit, "private": False,
                "siblings": [repo.sibling(n) for n in sorted(repo.files)]}
        payload = json.dumps(info).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def _serve_file(self, repo, name: str, body: bool) -> None:
        """A file, from a Range's start, with the hub's headers and the faults asked for."""
        data = repo.files[name]
        start = 0
        rng = self.headers.get("Range")
        if rng and (r := re.match(r"bytes=(\d+)-", rng)):
            start = int(r.group(1))
        if body:
            with self.hub.lock:
                fault = ("drop" if name in self.hub.drop else
                         "corrupt" if name in self.hub.corrupt or name in self.hub.corrupt_always else None)
                self.hub.drop.discard(name)
                self.hub.corrupt.discard(name)
            if fault == "corrupt":
                i = len(data) // 2
                data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
        else:
            fault = None
        part = data[start:]
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", repo.commit)
        etag = repo.etag(name)
        if repo.is_lfs(name):
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("ETag", f'"{git_blob_sha1(data)}"')
        else:
            self.send_header("ETag", f'"{etag}"')
        self.send_header("Accept-Ranges", "bytes")
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(part)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if not body:
            return
        if fault == "drop":
            self.wfile.write(part[: len(part) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)   # the rest never comes: the client sees a short body
            return
        rate = self.hub.pace.get(name)
        if rate is None:
            self.wfile.write(part)
            return
        block = max(1, int(rate / 20))   # (20 writes a second: a slow link, not a stalled one)
        try:
            for i in range(0, len(part), block):
                self.wfile.write(part[i:i + block])
                self.wfile.flush()
                time.sleep(block / rate)
        except OSError:   # the client went away (a cancelled pull)
            self.close_connection = True
