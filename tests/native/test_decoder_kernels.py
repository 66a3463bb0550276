"""The speech decoder's CPU kernels on random data: the bf16 GEMM and convolutions, the f32 products
of f16 and bf16 weights, and Winograd's forms of the convolutions and transposed convolutions, each
against ggml or the exact sums, and a launch over many frames equal to one launch per frame (so that
streaming stays exact). `kernels` tests: run at every KAZEIA_CPU level, x86-64 and ARM64."""
from __future__ import annotations

import platform

import numpy as np
import pytest

from kazeia import _native_checks
from kazeia.engine.accuracy import snr_db
from kazeia.engine.platform_info import active_kernels, at_cpu_level, f32_products_active

pytestmark = pytest.mark.kernels


def test_bf16_decoder_products_match_ggml_and_do_not_depend_on_the_column_count():
    """bf16 decoder weights on the CPU go through Kazeia's GEMM (64 rows in register lanes, each
    column read once per 64 rows). A stream decoded frame by frame must add up exactly like the whole
    utterance, so the columns of one launch equal each column alone, bit for bit; and the result is
    ggml's product up to the order of the float sums."""
    import numpy as np
    from kazeia import _native_checks
    for rows, cols, n in [(96, 672, 300), (192, 1344, 97), (768, 5376, 33), (16, 32, 1), (1024, 512, 4),
                          (48, 96, 7)]:
        applied, ggml, ours, alone = _native_checks.compare_gemm_bf16(rows, cols, n, seed=rows)
        if not applied:
            pytest.skip("the bf16 GEMM needs AVX-512 BF16" + at_cpu_level())
        assert ggml.shape == ours.shape == alone.shape == (n, rows)
        assert np.array_equal(ours, alone), (rows, cols, n)
        assert np.abs(ggml - ours).max() <= 1e-5 * np.abs(ggml).max(), (rows, cols, n)
    assert not _native_checks.compare_gemm_bf16(24, 64, 3)[0]   # rows not a multiple of 16: ggml's product


def test_bf16_convolutions_read_their_taps_in_place_with_the_same_sums():
    """The vocoder's bf16 convolutions skip im2col: one op reads each tap where it lies (f32 input
    converted a chunk at a time, or bf16 input written by the snake before it) and adds bias and
    residual as it stores. Equal bit for bit to im2col, the GEMM and separate adds, at the
    vocoder's shapes (dilations 1, 3, 9; 1x1 convs; transposed-conv phases)."""
    import numpy as np
    from kazeia import _native_checks
    for channels, rows, taps, dilation, n in [(96, 96, 7, 9, 300), (192, 192, 7, 1, 50), (768, 768, 7, 3, 5),
                                              (96, 96, 1, 1, 40), (32, 16, 7, 9, 20), (192, 576, 1, 1, 64)]:
        applied, separate, f32_in, bf16_in = _native_checks.compare_conv_bf16(channels, rows, taps, dilation, n, seed=rows)
        if not applied:
            pytest.skip("the bf16 GEMM needs AVX-512 BF16" + at_cpu_level())
        assert separate.shape == (taps * n - (taps - 1) * dilation, rows)
        assert np.abs(separate).max() > 1   # (a product, not zeros)
        assert np.array_equal(separate, f32_in) and np.array_equal(separate, bf16_in), (channels, taps, dilation)


@pytest.mark.parametrize("weights", ["f16", "bf16"])
def test_f32_products_match_ggml_and_do_not_depend_on_the_column_count(weights):
    """f16 decoder weights (and bf16 where the bf16 kernels do not run) go through Kazeia's f32-
    arithmetic GEMM: the columns stay f32, each output is one chain of multiply-adds in a fixed
    order, so the columns of one launch equal each column alone, bit for bit; ggml's product rounds
    its columns to f16 first (for bf16 weights: to bf16), so it is close, not equal."""
    for rows, cols, n in [(96, 672, 300), (192, 1344, 97), (768, 5376, 33), (16, 32, 1), (1024, 512, 4),
                          (48, 96, 7)]:
        applied, ggml, ours, alone = _native_checks.compare_gemm_fma(weights, rows, cols, n, seed=rows)
        assert applied == f32_products_active()
        if not applied:
            pytest.skip("the f32 products need AVX2 or NEON" + at_cpu_level())
        assert ggml.shape == ours.shape == alone.shape == (n, rows)
        assert np.array_equal(ours, alone), (rows, cols, n)
        # the columns' rounding in ggml's product; on ARM64 its f16 product also sums in f16 (1.6e-3 at
        # 672 values a row)
        bound = 1e-2 if weights == "bf16" or platform.machine() == "aarch64" else 1e-3
        assert np.abs(ggml - ours).max() <= bound * np.abs(ggml).max(), (rows, cols, n)
    assert not _native_checks.compare_gemm_fma(weights, 24, 64, 3)[0]   # rows not a multiple of 16: ggml's product
    for channels, rows, taps, dilation, n in [(96, 96, 7, 9, 300), (192, 192, 7, 1, 50), (768, 768, 7, 3, 5),
                                              (96, 96, 1, 1, 40), (32, 16, 7, 9, 20), (192, 576, 1, 1, 64)]:
        applied, separate, in_place, _ = _native_checks.compare_conv_fma(weights, channels, rows, taps, dilation, n, seed=rows)
        assert applied
        assert separate.shape == (taps * n - (taps - 1) * dilation, rows)
        assert np.abs(separate).max() > 1   # (a product, not zeros)
        assert np.array_equal(separate, in_place), (channels, taps, dilation)



@pytest.mark.parametrize("weights", ["f16", "bf16"])
def test_winograd_convolutions_tile_every_frame_alike(weights):
    """The seven-tap convolutions in Winograd's F(4, 7) form: which outputs share a tile depends
    only on their place in their frame, so one launch over several frames equals one launch per
    frame bit for bit (streaming stays exact), and the steps done a group of tiles at a time in
    cache (small convolutions) equal the three separate ops; each convolution lands within ~20 dB
    of the direct f32 products' rounding and >= 100 dB from the exact sums of the same weights, at
    the vocoder's shapes (a frame is 4 columns at its input conv, 32 / 160 / 640 / 1920 in blocks
    1-4)."""
    active = "winograd_conv" in active_kernels()
    for channels, rows, dilation, period, frames in [(768, 768, 9, 32, 3), (384, 384, 3, 160, 2), (192, 192, 1, 640, 1),
                                                     (96, 96, 9, 1920, 1), (1024, 1536, 1, 4, 5), (48, 64, 1, 4, 9),
                                                     (32, 32, 9, 32, 4), (16, 16, 3, 160, 2)]:
        applied, direct, whole, by_frame, separate, exact = _native_checks.compare_conv_winograd(
            weights, channels, rows, dilation, period, frames, seed=rows + dilation)
        assert applied == active
        if not applied:
            pytest.skip("Winograd's form runs over the f32 products (AVX2 or NEON)" + at_cpu_level())
        assert whole.shape == by_frame.shape == direct.shape == separate.shape == exact.shape == (frames * period, rows)
        assert np.array_equal(whole, by_frame), (channels, dilation, period)
        assert np.array_equal(whole, separate), (channels, dilation, period)   # in cache or not: the same steps
        assert not np.array_equal(whole, direct)
        ours, theirs = snr_db(exact, whole), snr_db(exact, direct)
        assert ours >= 100 and theirs - ours <= 25, (channels, dilation, period, ours, theirs)
    assert not _native_checks.compare_conv_winograd(weights, 24, 32, 1, 4, 2)[0]   # channels not a multiple of 16: direct


@pytest.mark.parametrize("weights", ["f16", "bf16"])
def test_transposed_convolutions_in_pairs_tile_every_frame_alike(weights):
    """The vocoder's transposed convolutions as two taps per phase in Winograd's F(2, 2) (pairs of
    inputs from an even place): one launch over several frames equals one launch per frame bit for
    bit, and the form lands >= 120 dB from the exact sums and within 3 dB of the two taps in one
    chain, at the vocoder's shapes (blocks 2-4: inputs a frame 32 / 160 / 640, rows s x Cout). Block
    1 (U would be 113 MB as f32) keeps its two f16 taps."""
    active = "winograd_conv" in active_kernels()
    for c_in, rows, period, frames in [(768, 1920, 32, 3), (384, 768, 160, 2), (192, 288, 640, 1), (64, 256, 4, 5),
                                       (16, 32, 160, 2)]:
        applied, direct, whole, by_frame, exact = _native_checks.compare_tconv_pairs(weights, c_in, rows, period, frames,
                                                                              seed=rows)
        assert applied == active
        if not applied:
            pytest.skip("Winograd's form runs over the f32 products (AVX2 or NEON)" + at_cpu_level())
        assert whole.shape == by_frame.shape == direct.shape == exact.shape == (frames * period, rows)
        assert np.array_equal(whole, by_frame), (c_in, rows, period)
        assert not np.array_equal(whole, direct)
        ours, theirs = snr_db(exact, whole), snr_db(exact, direct)
        assert ours >= 120 and theirs - ours <= 3, (c_in, rows, ours, theirs)
    assert not _native_checks.compare_tconv_pairs(weights, 1536, 6144, 4, 2)[0]   # (U beyond 32 MB: two taps)
    assert not _native_checks.compare_tconv_pairs(weights, 24, 32, 4, 2)[0]   # channels not a multiple of 16
