"""What the workbench asks of a take, typed: the engine's Request (text, voice, sampling) and what
the workbench adds (where it runs, the voice profile, pronunciation rules, chunks made again, the tag
a placement comparison follows it by). Made by the window from its panels, read by the controller,
the take record and the comparison; Qt-free."""
from __future__ import annotations

from dataclasses import dataclass, field

from kazeia.engine.synthesis.requests import Request, SamplingParams


@dataclass(frozen=True)
class TakeRequest:
    text: str
    sampling: SamplingParams
    placement: dict
    threads: int
    speaker: str | None = None
    language: str | None = "auto"
    instruct: str | None = None
    streaming_text: bool | None = None
    voice_profile: str | None = None        # the profile's file (Base models)
    voice_profile_name: str | None = None   # its name, as the take records it
    lexicon: object | None = None           # text.lexicon.Lexicon: the pronunciation rules in force
    chunk_seeds: dict[int, int] = field(default_factory=dict)   # chunks of a long take made again
    tag: dict = field(default_factory=dict)   # (a placement comparison's side)
    model_path: str | None = None           # another model file of the same variant (a comparison's B
    #                                         in another weight type); None: the model loaded

    def engine_request(self, voice=None) -> Request:
        """The engine's Request, with the profile's voice loaded by the caller (on the engine's thread)."""
        return Request(self.text, self.speaker, self.language, self.instruct, voice, self.sampling,
                       self.streaming_text, lexicon=self.lexicon, chunk_seeds=dict(self.chunk_seeds))
