"""Subtitles (WebVTT and SRT, written with webvtt-py) from where each chunk is heard in a take: one cue
per chunk, from its first to its last sample in the final audio, so a pause's silence falls between
cues. Crossfaded chunks overlap by the crossfade (a few ms); a cue ends where the next begins. A
text's angle brackets would be read as formatting tags by players: WebVTT gets them escaped, SRT
(which has no escapes) as the look-alike quotation marks ‹ ›."""
from __future__ import annotations

import io
import os
import textwrap
from pathlib import Path

from ..atomic import atomic_path
from .assemble import Cue

LINE_CHARS = 42   # a subtitle line's usual width


def _clock(samples: int, sample_rate: int) -> str:
    ms = int(round(samples * 1000 / sample_rate))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}"


def subtitles(cues: list[Cue], sample_rate: int, fmt: str) -> str:
    """The cues as `fmt` ("vtt" or "srt") text; empty chunks (no audio) have no cue."""
    import webvtt
    if fmt not in ("vtt", "srt"):
        raise ValueError(f"subtitles are vtt or srt, not {fmt!r}")
    shown = [c for c in cues if c.end > c.start and c.text.strip()]
    captions = []
    for k, cue in enumerate(shown):
        end = min(cue.end, shown[k + 1].start) if k + 1 < len(shown) else cue.end
        if fmt == "vtt":
            text = cue.text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        else:
            text = cue.text.replace("<", "\u2039").replace(">", "\u203a")
        captions.append(webvtt.Caption(_clock(cue.start, sample_rate), _clock(max(end, cue.start + 1), sample_rate),
                                       textwrap.wrap(text, LINE_CHARS) or [""]))
    out = io.StringIO()
    webvtt.WebVTT(captions=captions).write(out, format=fmt)
    return out.getvalue()


def write_subtitles(path: str | os.PathLike, cues: list[Cue], sample_rate: int) -> Path:
    """Subtitles in the format of `path`'s suffix (.vtt or .srt), written whole or not at all."""
    path = Path(path)
    text = subtitles(cues, sample_rate, path.suffix.lower().lstrip("."))
    with atomic_path(path) as partial:
        partial.write_text(text, encoding="utf-8")
    return path
