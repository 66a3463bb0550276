"""The f32 products and convolutions of seeded weights and columns, as this machine's kernels make them:
direct products, convolutions, Winograd's forms and transposed convolutions in pairs, for f16 and bf16
weights. Run on x86-64 and on arm64 (tests/native/test_arm64_products.py), they must be equal bit for bit.

    python tests/support/products_dump.py OUT.npz      (a file of its own: it runs in the arm64 root too)
"""
from __future__ import annotations

import sys

import numpy as np


def products() -> dict[str, np.ndarray]:
    from kazeia import _native_checks
    out = {}
    for t in ("f16", "bf16"):
        for rows, cols, n in [(96, 672, 300), (192, 1344, 7), (16, 32, 1), (1024, 512, 4)]:
            applied, _, ours, alone = _native_checks.compare_gemm_fma(t, rows, cols, n, seed=rows)
            assert applied and np.array_equal(ours, alone), (t, rows, cols, n)
            out[f"gemm-{t}-{rows}-{cols}-{n}"] = ours
        for ch, rows, taps, dil, n in [(96, 96, 7, 9, 300), (768, 768, 7, 3, 5), (32, 16, 7, 9, 20)]:
            applied, _, in_place, _ = _native_checks.compare_conv_fma(t, ch, rows, taps, dil, n, seed=rows)
            assert applied, (t, ch, rows)
            out[f"conv-{t}-{ch}-{rows}-{taps}-{dil}-{n}"] = in_place
        for ch, rows, dil, period, frames in [(96, 96, 9, 1920, 1), (768, 768, 3, 32, 3), (32, 32, 9, 32, 2)]:
            applied, _, whole, by_frame, *_ = _native_checks.compare_conv_winograd(t, ch, rows, dil, period, frames, seed=rows)
            assert applied and np.array_equal(whole, by_frame), (t, ch, rows, dil)
            out[f"winograd-{t}-{ch}-{rows}-{dil}-{period}-{frames}"] = whole
        for c_in, rows, period, frames in [(192, 288, 640, 1), (384, 768, 160, 2)]:
            applied, _, whole, by_frame, _ = _native_checks.compare_tconv_pairs(t, c_in, rows, period, frames, seed=rows)
            assert applied and np.array_equal(whole, by_frame), (t, c_in, rows)
            out[f"pairs-{t}-{c_in}-{rows}-{period}-{frames}"] = whole
    return out


if __name__ == "__main__":
    np.savez(sys.argv[1], **products())
