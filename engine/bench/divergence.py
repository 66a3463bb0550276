"""Quantisation divergence against f32 on the bench sentence: teacher-forced talker and code-predictor
logits (KL, top 5, vox's gate per stage) and the agreement of free-running greedy codes."""
from __future__ import annotations

import numpy as np

from ..accuracy import LOGIT_STAGES, logit_divergence, stage_gates
from ..synthesis.requests import ONE_PROMPT, Request, SamplingParams
from ..synthesis.engine import Engine
from .text import BENCH_TEXT

def divergence(ref: Engine, other: Engine, frames: int) -> dict:
    """Teacher-forced logits of talker and code predictor on the f32 model's greedy frames, and the
    agreement of free-running greedy codes."""
    greedy = SamplingParams.from_model(ref.info, max_frames=frames).greedy()
    request = Request(BENCH_TEXT, "vivian", "english", sampling=greedy, plan=ONE_PROMPT)
    r, o = ref.take(request), other.take(request)
    n = min(len(r.codes), len(o.codes))
    d = logit_divergence(ref, other, BENCH_TEXT, dict(speaker="vivian", language="english"), r.codes)
    return {**d, "passes_gate": stage_gates(d), "types": {s: other.info.stage_type(s) for s in LOGIT_STAGES},
            "code_agreement": float(np.mean(r.codes[:n] == o.codes[:n])) if n else 0.0, "frames": n}


