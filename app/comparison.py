"""Placement comparison: the same request rendered on placement A, then B, and how the two differ:
the audio (max abs difference, SNR of A against B - A) and the codes (identical, or the first frame
where they part)."""
from __future__ import annotations

import uuid
from dataclasses import replace

import numpy as np

from kazeia.engine.accuracy import snr_db

from .take_request import TakeRequest


def compare_results(a, b) -> dict:
    """a, b: engine Results of the same text, voice and seed."""
    n = min(len(a.audio), len(b.audio))
    frames = min(len(a.codes), len(b.codes))
    differ = np.flatnonzero(np.any(np.asarray(a.codes[:frames]) != np.asarray(b.codes[:frames]), axis=1))
    if len(differ):
        first = int(differ[0])
    elif len(a.codes) != len(b.codes):
        first = frames   # one stopped earlier
    else:
        first = None
    return {"max_abs_diff": float(np.max(np.abs(a.audio[:n] - b.audio[:n]))) if n else 0.0,
            "snr_db": snr_db(a.audio, b.audio) if n else float("nan"),
            "codes_identical": first is None, "first_divergent_frame": first,
            "frames": [len(a.codes), len(b.codes)]}


def difference_text(d: dict) -> str:
    codes = ("identical codes" if d["codes_identical"]
             else f"codes part at frame {d['first_divergent_frame']} (of {d['frames'][0]} / {d['frames'][1]})")
    snr = "identical audio (SNR inf)" if d["snr_db"] == float("inf") else f"SNR {d['snr_db']:.1f} dB"
    return f"{codes}; {snr}, max |B - A| {d['max_abs_diff']:.3g}"


class PlacementComparison:
    """A then B of one request: `first()` is A's request, each finished take goes to `step()`, which
    answers B's request after A, and the pair with its difference after B."""

    def __init__(self, request: TakeRequest, a: dict, b: dict, b_model: str | None = None):
        self.group = uuid.uuid4().hex[:8]
        self.request, self.placements, self.b_model = request, {"A": a, "B": b}, b_model
        self.a_take = self.a_result = None

    def tag(self, side: str) -> dict:
        return {"compare": self.group, "side": side}

    def first(self) -> tuple[TakeRequest, dict]:
        return replace(self.request, placement=self.placements["A"]), self.tag("A")

    def owns(self, tag: dict) -> bool:
        return tag.get("compare") == self.group

    def step(self, take, result, tag: dict):
        """("B", request, tag) after A; ("done", (a, b), difference) after B (both takes marked)."""
        take.comparison = {"group": self.group, "side": tag["side"]}
        if tag["side"] == "A":
            self.a_take, self.a_result = take, result
            return "B", replace(self.request, placement=self.placements["B"], model_path=self.b_model), self.tag("B")
        difference = compare_results(self.a_result, result)
        take.comparison.update(other=self.a_take.id, difference=difference)
        self.a_take.comparison.update(other=take.id)
        return "done", (self.a_take, take), difference
