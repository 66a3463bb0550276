"""How far one engine's numbers are from another's on the same inputs: teacher-forced talker and
code-predictor logits (KL, top-5 overlap, vox's gate metric) and decoder SNR on the same codes.
Used for quantised types against f32 and for placements against the CPU."""
from __future__ import annotations

import numpy as np

AUDIO_CODES = 2048   # the talker ids that are audio codes (what it may choose besides EOS)
GATE_KL, GATE_TOP5, GATE_SNR_DB = 0.02, 0.97, 30.0   # vox's gate for logits; decoder SNR from issue 11
LOGIT_STAGES = ("talker", "code_predictor")


def stage_gates(d: dict) -> dict[str, bool]:
    """Per stage, whether a logit_divergence result passes vox's gate (KL and reference argmax in top 5)."""
    return {s: d[f"{s}_kl"] <= GATE_KL and d[f"{s}_ref_argmax_in_top5"] >= GATE_TOP5 for s in LOGIT_STAGES}


def kl(p_logits: np.ndarray, q_logits: np.ndarray) -> float:
    def log_softmax(x):
        x = x - x.max(axis=-1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    lp, lq = log_softmax(p_logits.astype(np.float64)), log_softmax(q_logits.astype(np.float64))
    return float(np.mean(np.sum(np.exp(lp) * (lp - lq), axis=-1)))


def top5_overlap(a: np.ndarray, b: np.ndarray) -> float:
    ta, tb = np.argsort(-a, axis=-1)[..., :5], np.argsort(-b, axis=-1)[..., :5]
    return float(np.mean([len(set(x) & set(y)) / 5 for x, y in zip(ta.reshape(-1, 5), tb.reshape(-1, 5))]))


def ref_argmax_in_top5(ref: np.ndarray, other: np.ndarray) -> float:
    """vox's gate metric: how often the reference's argmax is among the other's five best."""
    best = np.argmax(ref, axis=-1)[..., None]
    return float(np.mean(np.any(np.argsort(-other, axis=-1)[..., :5] == best, axis=-1)))


def logit_divergence(ref, other, text: str, request: dict, codes: np.ndarray, cp_frames: int = 10) -> dict:
    """Both engines (kazeia.engine.Engine) fed the same request and frames `codes`."""
    lr, hr = ref.teacher_forced(text, codes, **request)
    lo, ho = other.teacher_forced(text, codes, **request)
    vocab = min(AUDIO_CODES, lr.shape[1])
    n_cp = min(len(codes), cp_frames)
    cpr = np.stack([ref.code_predictor_logits(hr[f], codes[f]) for f in range(n_cp)])
    cpo = np.stack([other.code_predictor_logits(ho[f], codes[f]) for f in range(n_cp)])
    return {"talker_kl": kl(lr[:, :vocab], lo[:, :vocab]), "talker_top5": top5_overlap(lr[:, :vocab], lo[:, :vocab]),
            "talker_ref_argmax_in_top5": ref_argmax_in_top5(lr[:, :vocab], lo[:, :vocab]),
            "code_predictor_kl": kl(cpr, cpo), "code_predictor_top5": top5_overlap(cpr, cpo),
            "code_predictor_ref_argmax_in_top5": ref_argmax_in_top5(cpr, cpo)}


def snr_db(ref: np.ndarray, other: np.ndarray) -> float:
    n = min(len(ref), len(other))
    noise = float(np.sum((ref[:n].astype(np.float64) - other[:n]) ** 2))
    return float("inf") if noise == 0 else 10 * float(np.log10(np.sum(ref[:n].astype(np.float64) ** 2) / noise))


def decoder_snr_db(ref, other, codes: np.ndarray) -> float:
    """Both engines' decoders on the same codes."""
    return snr_db(ref.decode(codes), other.decode(codes))
