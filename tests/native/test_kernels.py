"""Kazeia's own CPU kernels against ggml's products and the exact sums, on random data: the one-column
and lanes products, the prompt GEMM, panel claims, the prefill attention, which kernel runs at which
CPU level, and a batch's columns each equal to the column alone. `kernels` tests: scripts/test.sh runs
them at every KAZEIA_CPU level of this CPU, the ARM64 leg at every ARM level."""
from __future__ import annotations

import numpy as np
import pytest

from kazeia import _native, _native_checks
from kazeia.engine.platform_info import active_kernels, at_cpu_level, f32_products_active

pytestmark = pytest.mark.kernels


@pytest.mark.parametrize("type_", ["q8_0", "q6_K", "f32", "f16", "bf16", "q4_K"])
def test_batch_products_give_every_column_what_it_gets_alone(type_):
    """The kernels behind a batched step: each column bit for bit as a one-column product."""
    batch, alone = _native_checks.compare_batch_columns(type_, rows=256, cols=1024, n=6, seed=3)
    assert batch.shape == alone.shape == (6, 256)
    assert np.array_equal(batch, alone)
    assert np.abs(alone).max() > 0


def test_repacked_q4k_matrices_multiply_like_the_file_layout():
    """On the CPU, q4_K matrices are copied into ggml's interleaved layout (CPU_REPACK) for faster
    products; both layouts hold the same quantised values, so only the summation order differs."""
    for n in (1, 2, 17):   # the talker step, the padded single column, a prompt
        made, plain, repacked = _native_checks.compare_repacked_matmul(64, 1024, n, seed=n)
        if not made:
            pytest.skip("ggml has no repacked q4_K layout for this CPU (it needs AVX2)")
        assert plain.shape == repacked.shape == (n, 64)
        assert np.abs(plain - repacked).max() <= 1e-5 * np.abs(plain).max()


def test_one_column_q8_0_kernel_matches_ggml():
    """On the CPU, the talker's and code predictor's one-column q8_0 products use Kazeia's kernel
    (four accumulators per row, one linear stream per thread); the vector is quantised as ggml does,
    so only the order of the float sums may differ."""
    cases = [(64, 1024), (1031, 3072), (7, 96), (1, 32)]   # odd row counts split unevenly between threads
    for (rows, cols), avx2_only in [(c, False) for c in cases] + [(cases[1], True)]:   # and without VNNI
        applied, ggml, ours = _native_checks.compare_gemv_q8_0(rows, cols, seed=rows, avx2_only=avx2_only)
        if not applied:
            pytest.skip("the kernel needs AVX2, FMA and F16C" + at_cpu_level())
        assert ggml.shape == ours.shape == (rows,)
        assert np.abs(ggml - ours).max() <= 1e-6 * np.abs(ggml).max()


@pytest.mark.parametrize("type_", ["q6_k", "q5_k"])
def test_k_quant_one_column_kernel_matches_ggml(type_):
    """The gate-passing q6_K and q5_K types get their own kernel where the lanes layout is missing
    (AVX2 without AVX-512 VNNI): one column (steps) and several (prefill, four columns per unpacked
    block plus the rest one by one); ggml's q8_K quantisation of the columns, so only the order of
    the float sums differs."""
    for rows, cols, n in [(64, 1024, 1), (1031, 3072, 1), (7, 256, 1), (1, 2048, 1), (64, 1024, 4), (33, 512, 7),
                          (1031, 3072, 67)]:
        applied, ggml, ours = _native_checks.compare_gemv_k_quant(type_, rows, cols, n, seed=rows)
        if not applied:
            pytest.skip("the kernel needs AVX2, FMA and F16C" + at_cpu_level())
        assert ggml.shape == ours.shape == (n, rows)
        assert np.abs(ggml - ours).max() <= 1e-5 * np.abs(ggml).max(), (rows, cols, n)


def lanes_types() -> set[str]:
    """The weight types with a lanes form at the CPU level in force (any of its three forms)."""
    active = active_kernels()
    return {"q8_0", "q6_k", "q5_k"} if active & {"lanes", "lanes_avxvnni", "lanes_avx2"} else set()


def test_prompt_gemm_matches_ggml_and_the_exact_product():
    """A prompt's products (8 columns and more) take Kazeia's int8 GEMM: 32 weight rows unpacked once
    into register lanes, exact integer sums per scale group. q8_0: the columns are quantised as ggml
    quantises them, so only the order of the float sums differs. q6_K: ggml quantises the columns to
    q8_K (one scale per 256 values), the GEMM to q8_0 (one per 32), so the GEMM must come out at
    least as close to the dequantised weights times the f32 columns as ggml does."""
    for type_, rows, cols, n in [("q8_0", 64, 1024, 8), ("q8_0", 3072, 1024, 67), ("q8_0", 96, 3072, 13),
                                 ("q6_k", 64, 1024, 8), ("q6_k", 1024, 3072, 67), ("q6_k", 160, 512, 11)]:
        applied, ggml, ours, exact = _native_checks.compare_gemm_int8(type_, rows, cols, n, seed=rows)
        if not applied:
            pytest.skip("the GEMM needs AVX2" + at_cpu_level())
        assert ggml.shape == ours.shape == exact.shape == (n, rows)
        if type_ == "q8_0":
            assert np.abs(ggml - ours).max() <= 1e-5 * np.abs(ggml).max(), (type_, rows, cols, n)
        rms = np.sqrt((exact ** 2).mean())
        ours_err, ggml_err = (np.sqrt(((y - exact) ** 2).mean()) / rms for y in (ours, ggml))
        assert ours_err <= 1e-2 and ours_err <= ggml_err * 1.001, (type_, rows, cols, n, ours_err, ggml_err)
    # shapes it does not take (rows not a multiple of 32, another type) fall back, and say so
    assert not _native_checks.compare_gemm_int8("q8_0", 33, 1024, 8)[0]
    assert not _native_checks.compare_gemm_int8("q4_k", 64, 1024, 8)[0]


def test_lanes_layout_matches_ggml_and_is_the_same_for_any_batch():
    """On the CPU the talker's and code predictor's q8_0 and q6_K matrices are rearranged at load so
    that 16 rows sit in a register's lanes (one instruction per 64 weights and a column). A column's
    result must not depend on what shares its launch: the columns in one launch and each alone are
    equal bit for bit. q8_0 matches ggml's product up to the order of the float sums; q6_K and q5_K
    (columns quantised to q8_0, not ggml's coarser q8_K) come out at least as close to the
    dequantised weights as ggml does, and q6_K equals the prompt GEMM."""
    for type_, rows, cols, n in [("q8_0", 16, 64, 1), ("q8_0", 48, 1024, 1), ("q8_0", 64, 1024, 3),
                                 ("q8_0", 1024, 3072, 1), ("q8_0", 2048, 1024, 4), ("q8_0", 3072, 1024, 8),
                                 ("q8_0", 1024, 1024, 67), ("q6_k", 16, 256, 1), ("q6_k", 48, 1024, 1),
                                 ("q6_k", 2048, 1024, 4), ("q6_k", 160, 512, 11), ("q6_k", 1024, 3072, 67),
                                 ("q5_k", 16, 256, 1), ("q5_k", 48, 1024, 1), ("q5_k", 2048, 1024, 4),
                                 ("q5_k", 160, 512, 11), ("q5_k", 1024, 3072, 67)]:
        applied, ggml, batch, alone = _native_checks.compare_lanes(type_, rows, cols, n, seed=rows + n)
        if not lanes_types():
            pytest.skip("the lanes layout needs AVX2" + at_cpu_level())
        assert applied == (type_ in lanes_types()), type_
        if not applied:
            continue
        assert ggml.shape == batch.shape == alone.shape == (n, rows)
        assert np.array_equal(batch, alone), (type_, rows, cols, n)
        if type_ == "q8_0":
            assert np.abs(ggml - batch).max() <= 1e-5 * np.abs(ggml).max(), (rows, cols, n)
            continue
        # the product with the weights dequantised to f32 (same seed: the same matrix and columns)
        gemm_applied, ggml_again, gemm, exact = _native_checks.compare_gemm_int8(type_, rows, cols, n, seed=rows + n)
        assert np.array_equal(ggml_again, ggml)
        if gemm_applied and type_ == "q6_k" and n >= 2 and rows % 32 == 0:
            assert np.array_equal(gemm, batch), (rows, cols, n)
        rms = np.sqrt((exact ** 2).mean())
        assert np.sqrt(((batch - exact) ** 2).mean()) <= np.sqrt(((ggml - exact) ** 2).mean()) * 1.001, (type_, rows, n)
        assert np.sqrt(((batch - exact) ** 2).mean()) < 0.02 * rms, (type_, rows, n)
    # a matrix it cannot take (rows not a multiple of 16) stays in the file's layout
    assert not _native_checks.compare_lanes("q8_0", 24, 1024, 2)[0]
    assert not _native_checks.compare_lanes("q4_k", 64, 1024, 2)[0]
    assert not _native_checks.compare_lanes("q5_k", 24, 1024, 2)[0]


def test_weights_sharing_one_launch_give_the_products_each_gives_alone():
    """A layer's q, k and v products (and gate and up) read the same input: with lanes weights of one
    type they share one launch, each thread streaming one run of all their panels. Every row must
    come out exactly as in its own product, for steps, batches and prompts."""
    for type_, rows, cols, n in [("q8_0", 64, 1024, 1), ("q8_0", 1024, 1024, 9), ("q6_k", 48, 256, 1),
                                 ("q6_k", 2048, 1024, 4), ("q6_k", 160, 512, 11), ("q5_k", 64, 512, 1),
                                 ("q5_k", 1024, 1024, 67)]:
        applied, one, split = _native_checks.compare_lanes_fused(type_, rows, cols, n, seed=rows + n)
        if not lanes_types():
            pytest.skip("the lanes layout needs AVX2" + at_cpu_level())
        assert applied == (type_ in lanes_types()), type_
        if not applied:
            continue
        assert one.shape == split.shape == (n, rows)
        assert np.array_equal(one, split), (type_, rows, cols, n)
        assert np.abs(one).max() > 0


@pytest.mark.parametrize("threads, panels, chunk", [(2, 64, 2), (3, 37, 3), (4, 130, 4), (2, 5, 8)])
def test_a_slowed_thread_leaves_its_panels_to_the_others(threads, panels, chunk):
    """Lanes products share their panels while they run: each thread starts on its own run, and a
    thread done early takes chunks from the back of the run with most left. Thread 0 is slowed (as
    by another process on its core): every panel is still computed exactly once, the others take
    most of its run, and the claims are back at zero for the next launch."""
    each_once, per_thread, reset = _native_checks.check_panel_claims(threads, panels, chunk, launches=3)
    assert each_once and reset and sum(per_thread) == 3 * panels
    if panels // threads > chunk:   # thread 0 had more than one chunk of its own
        assert per_thread[0] < 3 * panels // threads, per_thread


def test_panel_claims_past_their_limits_split_the_fixed_way():
    """More threads than the claims track: the fixed split, every panel once, shares as even as they go."""
    each_once, per_thread, reset = _native_checks.check_panel_claims(17, 40, 1, launches=1)
    assert each_once and reset and sorted(per_thread) == [2] * 11 + [3] * 6


def test_lanes_copies_in_huge_pages_or_not_give_the_same_products():
    """Lanes copies live in 2 MB-aligned chunks the kernel is asked to back with huge pages (fewer
    TLB misses over a gigabyte of weights a frame); KAZEIA_NO_HUGE_PAGES gives each its own buffer.
    Where the memory comes from must not change a bit of any product."""
    import os
    import subprocess
    import sys
    script = ("import sys, numpy as np; from kazeia import _native_checks; "
              "r = [_native_checks.compare_lanes(t, 64, 1024, 3, seed=5) for t in ('q8_0', 'q6_k', 'q5_k')]; "
              "sys.stdout.write(repr([bool(a) for a, *_ in r]) + '|' + "
              "'|'.join(np.ascontiguousarray(b).tobytes().hex() for _, _, b, _ in r))")
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                           env={**os.environ, **extra}) for extra in ({}, {"KAZEIA_NO_HUGE_PAGES": "1"})]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    if runs[0].stdout.startswith("[False, False, False]"):
        pytest.skip("the lanes layout needs AVX2" + at_cpu_level())
    assert runs[0].stdout == runs[1].stdout and len(runs[0].stdout) > 1000


def _lanes_products_at(level: str, types: tuple[str, ...], gemm: bool) -> str | None:
    """compare_lanes' products of `types` (a step, a batch and a prompt each), and with `gemm` the
    prompt GEMM's, in a process at KAZEIA_CPU=level, as hex; None where a kernel did not run."""
    import os
    import subprocess
    import sys
    script = ("import sys, numpy as np; from kazeia import _native_checks; "
              f"cases = [(t, r, k, n) for t in {types!r} for r, k, n in ((64, 1024, 1), (48, 512, 5), (96, 1024, 19))]; "
              "res = [_native_checks.compare_lanes(*c, seed=7) for c in cases]; "
              + ("res += [_native_checks.compare_gemm_int8('q8_0', 96, 1024, 19, seed=7), "
                 "_native_checks.compare_gemm_int8('q6_k', 64, 512, 9, seed=7)]; " if gemm else "") +
              "sys.stdout.write('-' if not all(r[0] for r in res) else "
              "'|'.join(np.ascontiguousarray(r[2]).tobytes().hex() for r in res))")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "KAZEIA_CPU": level})
    assert r.returncode == 0, r.stderr[-2000:]
    return None if r.stdout == "-" else r.stdout


def test_the_lanes_kernels_forms_give_the_same_numbers():
    """The lanes layout has a 512-bit form (AVX-512 VNNI) and 256-bit ones (AVX-VNNI; AVX2 alone)
    over the same bytes: a model laid out once must give the same numbers, bit for bit, whichever
    form a CPU runs, for steps, batches and prompts of every type, and the prompt GEMM's."""
    available = _native.cpu_level()["available"]
    top = available[0]
    if top == "avx2" or "avx2" not in available:
        pytest.skip("one lanes form at most on this CPU" + at_cpu_level())
    all_types = ("q8_0", "q6_k", "q5_k")
    wide = _lanes_products_at(top, all_types, gemm=True)
    if wide is None:
        pytest.skip(f"no VNNI lanes form at {top} on this CPU")
    for level in [lv for lv in ("avxvnni", "avx2") if lv in available and lv != top]:
        narrow = _lanes_products_at(level, all_types, gemm=True)
        assert narrow is not None and len(narrow) > 10000 and narrow == wide, level


def test_prefill_attention_matches_ggml():
    """A prompt's attention on the CPU runs as one op (keys and values transposed once per kv head,
    causal rows skip the keys they cannot see); it must give what ggml's two products and softmax
    give, for grouped-query heads, a prompt after earlier positions and head sizes of the models."""
    for head_dim, heads, kv_heads, n, pos0 in [(128, 16, 8, 67, 0), (16, 4, 2, 9, 0), (128, 16, 8, 5, 40),
                                               (64, 8, 8, 33, 3), (32, 4, 1, 130, 0)]:
        applied, ggml, ours = _native_checks.compare_prefill_attention(head_dim, heads, kv_heads, n, pos0, seed=n)
        if not applied:
            pytest.skip("the prefill attention needs AVX-512" + at_cpu_level())
        assert ggml.shape == ours.shape == (n, head_dim * heads)
        assert np.all(np.isfinite(ours))
        assert np.abs(ggml - ours).max() <= 1e-5 * np.abs(ggml).max(), (head_dim, heads, kv_heads, n, pos0)


def test_kernels_follow_the_cpu_level():
    """Each of Kazeia's kernels runs exactly where the CPU level in force (KAZEIA_CPU, capped at what
    the CPU has) allows it, and what `kazeia devices` says matches what the products do. CI runs
    this file at every level the CPU has (scripts/test.sh)."""
    level = _native.cpu_level()
    active = active_kernels(level)
    assert _native_checks.compare_gemv_q8_0(64, 1024, seed=1, avx2_only=True)[0] == ("gemv_q8_0" in active)
    for type_ in ("q6_k", "q5_k"):
        assert _native_checks.compare_gemv_k_quant(type_, 64, 1024, 1, seed=1)[0] == ("gemv_k_quants" in active)
    assert _native_checks.compare_gemm_int8("q8_0", 64, 1024, 16, seed=1)[0] == ("gemm_int8" in active)
    for type_ in ("q8_0", "q6_k", "q5_k"):
        assert _native_checks.compare_lanes(type_, 64, 1024, 2, seed=1)[0] == (type_ in lanes_types()), type_
    assert len(active & {"lanes", "lanes_avxvnni", "lanes_avx2"}) <= 1   # one form per process
    assert _native_checks.compare_gemm_bf16(64, 64, 4, seed=1)[0] == ("gemm_bf16" in active)
    assert _native_checks.compare_prefill_attention(64, 4, 2, 8, 0, seed=1)[0] == ("prefill_attention" in active)
    assert _native_checks.compare_gemm_fma("f16", 64, 64, 4, seed=1)[0] == f32_products_active(level)
    if level["level"] == "generic":
        assert not active
