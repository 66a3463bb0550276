"""Takes: every generation kept with its text, voice, parameters, seed, model, placement and
timings; saved in the user's data folder (index + one WAV per take, written atomically). The index is
read as outside input (engine/takes/take_record.py): a take whose record is damaged is recovered from its
audio, and the index as it was is kept aside, so no take is lost to a bad file."""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import soundfile

from kazeia.engine.atomic import atomic_path
from kazeia.engine.synthesis.placement import STAGES
from kazeia.engine.takes.take_record import TAKE_ID, check_record, read_index
from kazeia.engine.untrusted import InputError
from kazeia.engine.user_dirs import data_dir

from .take_request import TakeRequest


@dataclass
class Take:
    id: str
    created: float
    text: str
    model: str
    request: dict            # speaker, language, instruct, streaming_text
    sampling: dict           # SamplingParams fields (seed included)
    placement: dict
    threads: int
    timings: dict            # per-stage means, prefill, TTFA, RTF, frames
    stop_reason: str
    sample_rate: int
    name: str = ""
    where: dict = field(default_factory=dict)   # stage -> where it ran (placement.stage_lines)
    frame_ms: dict = field(default_factory=dict)   # stage -> ms of every frame (the take's latency chart)
    peak_memory_mb: float = 0.0                   # the process's peak resident memory during the take
    comparison: dict = field(default_factory=dict)   # a placement comparison: group, side, how B differs
    chunks: list = field(default_factory=list)   # a long text's chunks: text, voice, language, seed, span, ...
    audio: np.ndarray | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.created))
        return self.name or f"{when}  {self.text[:40]}"

    @property
    def voice(self) -> str:
        r = self.request
        if r.get("voice_profile"):
            return f"profile {r['voice_profile']}"
        if r.get("instruct"):
            return f"\"{r['instruct']}\""
        return r.get("speaker") or "-"

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate if self.audio is not None else \
            self.timings.get("frames", 0) * self.timings.get("frame_seconds", 0.08)

    @classmethod
    def for_request(cls, request: TakeRequest, model: str, sample_rate: int) -> "Take":
        """A take about to run: what was asked (the profile by its name, not its path)."""
        recorded = {"speaker": request.speaker, "language": request.language, "instruct": request.instruct,
                    "streaming_text": request.streaming_text}
        if request.chunk_seeds:
            recorded["chunk_seeds"] = {str(k): v for k, v in request.chunk_seeds.items()}
        recorded["voice_profile"] = request.voice_profile_name
        return cls(id=TakeStore.new_id(), created=time.time(), text=request.text, model=model, request=recorded,
                   sampling=asdict(request.sampling), placement=dict(request.placement),
                   threads=request.threads, timings={}, stop_reason="", sample_rate=sample_rate)

    def record(self, result, ran, where: dict, chunks=()) -> None:
        """What the take ran with and what it cost (the engine's Result and Ran, not the widgets);
        `chunks`: a long text's (long_text.ChunkTake), each kept with what makes it again."""
        self.chunks = [{"index": c.plan.index, "text": c.plan.text, "written": c.plan.written,
                        "voice": c.plan.voice_name, "language": c.plan.language, "seed": c.plan.seed,
                        "span": list(c.span), "stop_reason": c.result.stop_reason,
                        "rewrites": [[r.term, r.replacement, r.source] for r in c.plan.rewrites]} for c in chunks]
        t = result.timings
        self.placement, self.threads = dict(ran.placement), ran.threads
        self.peak_memory_mb = round(ran.peak_memory_mb, 1)
        self.audio, self.stop_reason, self.where = result.audio, result.stop_reason, where
        self.timings = {"prefill_ms": t.prefill_ms, "ttfa_ms": t.ttfa_ms, "rtf": t.rtf, "frames": t.frames,
                        "frame_seconds": t.frame_seconds, "talker_ms": t.mean_ms("talker"),
                        "code_predictor_ms": t.mean_ms("code_predictor"), "decoder_ms": t.mean_ms("decoder")}
        self.frame_ms = {s: [round(v, 3) for v in getattr(t, f"{s}_ms")] for s in STAGES}

    @classmethod
    def from_json(cls, d: dict) -> "Take":
        known = {f.name for f in fields(cls)} - {"audio"}
        return cls(**{k: v for k, v in d.items() if k in known})   # (fields of later versions are ignored)

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("audio")
        return d


def _atomic_write(path: Path, write) -> None:
    with atomic_path(path) as tmp:
        write(tmp)


class TakeStore:
    """Takes of this user; survives restarts, and a failed write loses nothing already kept."""

    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder or data_dir()) / "takes"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.takes: list[Take] = []
        self.problems: list[str] = []   # what was damaged on loading, and what was done about it
        self._load()

    def _index(self) -> Path:
        return self.folder / "index.json"

    def _load(self) -> None:
        index = self._index()
        entries, damaged = [], []
        if index.exists() or index.is_symlink():
            try:
                entries = read_index(index)
            except InputError as e:
                damaged.append(str(e))
        known = set()
        for i, e in enumerate(entries):
            try:
                take = Take.from_json(check_record(e, f"{index}: takes[{i}]"))
            except InputError as error:   # (its audio, if any, is recovered below)
                damaged.append(str(error))
                continue
            if self._wav(take.id).exists() and take.id not in known:
                self.takes.append(take)
                known.add(take.id)
        for wav in sorted(self.folder.glob("*.wav")):
            if wav.stem in known or wav.name.startswith(".") or not TAKE_ID.fullmatch(wav.stem):
                continue   # (a file of another name is not ours to list)
            try:
                info = soundfile.info(wav)
            except (RuntimeError, soundfile.LibsndfileError) as e:
                self.problems.append(f"{wav}: not readable audio ({e}); left as it is")
                continue
            self.takes.append(Take(id=wav.stem, created=wav.stat().st_mtime, text="(recovered take)", model="",
                                   request={}, sampling={}, placement={}, threads=0, timings={},
                                   stop_reason="", sample_rate=info.samplerate, name=f"recovered {wav.stem}"))
        if damaged:
            # never lose takes to a damaged index: keep it aside as it was, the takes it lost recovered
            aside = index.with_name(f"index.damaged-{int(time.time())}.json")
            index.rename(aside)
            self.problems += damaged[:5] + [f"... and {len(damaged) - 5} more"] * (len(damaged) > 5)
            self.problems.append(f"the take index was damaged: kept as {aside.name}, its takes' audio recovered")
        if damaged or len(self.takes) != len(entries):
            self._save_index()

    def _wav(self, take_id: str) -> Path:
        """A take's audio file: right in the takes folder (the id is checked to be a plain stem)."""
        path = self.folder / f"{take_id}.wav"
        if not TAKE_ID.fullmatch(take_id) or path.parent != self.folder:
            raise InputError(f"{take_id!r}: not a take id; refused")
        return path

    def audio(self, take: Take) -> np.ndarray:
        if take.audio is None:
            take.audio, _ = soundfile.read(self._wav(take.id), dtype="float32")
        return take.audio

    def add(self, take: Take) -> Take:
        """Lists the take, then writes it. A failed write (a full disk) raises, and the take stays
        listed with its audio in memory for this session: it can still be played and exported."""
        assert take.audio is not None
        self.takes.append(take)
        _atomic_write(self._wav(take.id),
                      lambda p: soundfile.write(p, take.audio, take.sample_rate, format="WAV", subtype="FLOAT"))
        self._save_index()
        return take

    def save(self) -> None:
        """Writes the index after a take's fields changed (e.g. a comparison's result)."""
        self._save_index()

    def rename(self, take: Take, name: str) -> None:
        take.name = name
        self._save_index()

    def delete(self, take: Take) -> None:
        wav = self._wav(take.id)   # (refused before anything changes)
        self.takes.remove(take)
        self._save_index()
        wav.unlink(missing_ok=True)

    def _save_index(self) -> None:
        text = json.dumps([t.to_json() for t in self.takes], indent=1)
        _atomic_write(self._index(), lambda p: p.write_text(text))

    @staticmethod
    def new_id() -> str:
        return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
