"""The operator's session without Qt: the loaded model's info, the takes, the voice library, the A/B
pair (the one the playback plays), a placement comparison under way, the status history, and the
rules: what may start when, a chunk's new seed, which Base models keep a take's voice and its name.
The window shows it, the presenters ask it and the engine's controller runs their jobs; this decides
(napari's ViewerModel and Friture's models keep the same line), so it is tested without a display."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from kazeia.engine.voices.voice_library import VoiceLibrary

from .comparison import PlacementComparison, difference_text
from .take_request import TakeRequest
from .takes import Take, TakeStore

KEPT_MESSAGES = 40   # what Help > Messages shows


@dataclass
class Restored:
    """A take's settings, for the panels to show again."""
    text: str
    request: dict
    streaming_text: bool
    sampling: dict
    placement: dict


@dataclass
class ComparisonStep:
    """What follows a finished take of a comparison: B's request, or the pair and how they differ."""
    next_request: TakeRequest | None = None
    tag: dict | None = None
    pair: tuple | None = None
    summary: str = ""


class Session:
    def __init__(self, store: TakeStore, voices: VoiceLibrary | None = None):
        self.store = store
        self.voices = voices or VoiceLibrary(store.folder.parent / "voices")
        self.info = None                  # the loaded model's ModelInfo
        self.comparison: PlacementComparison | None = None
        self.ab_pair: tuple[Take, Take] | None = None   # the A/B pair: the last listened to or compared
        self.messages: list[str] = []

    # ---- status history ----------------------------------------------------------------------
    def note(self, message: str) -> None:
        self.messages.append(f"{time.strftime('%H:%M:%S')}  {message}")

    def recent_messages(self) -> str:
        return "\n".join(self.messages[-KEPT_MESSAGES:]) or "no messages yet"

    # ---- what may start ------------------------------------------------------------------------
    def take_refusal(self, busy: bool, rendering: bool) -> str | None:
        """Why a take cannot start now (None: it can)."""
        if self.info is None:
            return "no model is loaded"
        if rendering:
            return "a script is rendering: takes wait until it ends or is stopped (Script tab)"
        if busy:
            return "a take is running: stop it first (Esc)"
        return None

    def require_base(self, what: str) -> None:
        if self.info is None or self.info.variant != "base":
            raise ValueError(f"{what} need a Base model")

    # ---- takes -------------------------------------------------------------------------------
    def keep(self, take: Take) -> str | None:
        """Saves a finished take; returns the message when the disk refused it (the take stays listed)."""
        try:
            self.store.add(take)
        except OSError as e:
            return f"could not save the take: {e}"
        return None

    @staticmethod
    def restored(take: Take) -> Restored:
        return Restored(take.text, take.request, bool(take.request.get("streaming_text")), take.sampling,
                        take.placement)

    @staticmethod
    def redo_seeds(take: Take, index: int, seed: int | None = None) -> dict[int, int]:
        """A long take's chunk seeds with chunk `index` given a new one (every other chunk comes out
        exactly as it was: a chunk's audio depends on its own seed only)."""
        if not take.chunks or not 0 <= index < len(take.chunks):
            raise ValueError(f"{take.label} has no chunk {index + 1}")
        seeds = {int(k): v for k, v in take.request.get("chunk_seeds", {}).items()}
        seeds[index] = random.randrange(2 ** 31) if seed is None else seed
        return seeds

    # ---- placement comparison ----------------------------------------------------------------
    def start_comparison(self, request: TakeRequest, a: dict, b: dict,
                         b_model: str | None = None) -> tuple[TakeRequest, dict]:
        """A's request and tag; B's follows from comparison_step (on `b_model` when given)."""
        self.comparison = PlacementComparison(request, a, b, b_model)
        return self.comparison.first()

    def comparison_step(self, take: Take, result, tag: dict) -> ComparisonStep | None:
        """None when the take is not part of the comparison under way."""
        if self.comparison is None or not self.comparison.owns(tag):
            return None
        step = self.comparison.step(take, result, tag)
        if step[0] == "B":
            return ComparisonStep(next_request=step[1], tag=step[2])
        _, pair, difference = step
        self.store.save()
        self.comparison = None
        self.ab_pair = pair
        return ComparisonStep(pair=pair, summary=f"compared: {difference_text(difference)}")

    def drop_comparison(self) -> None:
        """A stopped or failed take ends the comparison: it does not go on to B."""
        self.comparison = None

    # ---- voices ------------------------------------------------------------------------------
    def new_voice(self, audio_path: str, name: str | None = None) -> tuple[str, Path]:
        """A free profile name for audio_path (or `name`) and the profile's path."""
        self.require_base("voice profiles")
        name = self.voices.free_name(name or Path(audio_path).stem)
        return name, self.voices.path(name)

    def profile_path(self, name: str | None) -> str | None:
        return str(self.voices.path(name)) if name else None

    def voice_keeping_models(self, entries=None) -> list[str]:
        """The Base models a take's voice is kept with, one per size at hand: those pulled (the
        registry's `entries`, its own by default) and the one open."""
        if entries is None:
            from kazeia.engine.models.registry import Registry
            entries = Registry().entries()
        paths = [e.path for e in entries if e.variant == "base" and Path(e.path).is_file()]
        if self.info is not None and self.info.variant == "base" and str(self.info.path) not in paths:
            paths.insert(0, str(self.info.path))
        if not paths:
            raise ValueError("keeping a voice needs a Base model (0.6B or 1.7B): File > Get models... (Base), "
                             "or open one")
        return paths

    @staticmethod
    def kept_voice_name(take: Take, name: str | None = None) -> str:
        """The profile's name: as asked, else the take's, else from its voice design or speaker."""
        instruct = take.request.get("instruct")
        return name or take.name or (f"kept {instruct[:30]}" if instruct else f"kept {take.voice}")
