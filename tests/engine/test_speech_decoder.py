"""Speech decoder vs the reference: every stage, the 300/25 chunked long decode, streaming that
is exact for any feeding pattern, f16 weights, bad codes."""
from __future__ import annotations


import numpy as np
import pytest

from kazeia import _native
from kazeia.engine import open_model
from kazeia.engine.accuracy import snr_db
from kazeia.engine.platform_info import active_kernels, at_cpu_level, f32_products_active
from kazeia.engine.synthesis.speech_decoder import SpeechDecoder

from support.goldens import GOLDEN

pytestmark = pytest.mark.levels   # (numbers compared across paths: run again at every lower CPU level)


STAGES = np.load(GOLDEN / "decoder_stages.npz")
LONG = np.load(GOLDEN / "decoder_long.npz")
TOL = 1e-4          # the bound against the reference (f32 weights)
STREAM_TOL = 1e-6   # streamed vs offline


@pytest.fixture(scope="module")
def model32(converted):
    return open_model(converted("custom_voice", "f32"))


def stage_codes():
    return STAGES["codes"][0].T.astype(np.int32)   # [frames, 16]


@pytest.mark.arm64
@pytest.mark.parity
def test_every_stage_matches_the_reference(model32, report):
    ours = SpeechDecoder(model32, threads=2).stages(stage_codes())
    names = [k for k in STAGES.files if k != "codes"]
    assert len(names) >= 15
    errors = []
    for name in names:
        ref = STAGES[name][0]
        ref = ref if name.startswith("pre_transformer") else ref.T   # ours: [time, channels]
        assert name in ours, name
        assert ours[name].shape == ref.shape, name
        err = float(np.abs(ours[name] - ref).max())
        errors.append(f"{name} {err:.1e}")
        assert err <= TOL * max(1.0, float(np.abs(ref).max())), name
    report("decoder stages vs reference (max abs): " + ", ".join(errors))


@pytest.mark.parity
def test_generated_case_waveforms(model32):
    for case in ("cv_vivian_english_nonstream", "cv_dylan_chinese_stream"):
        g = np.load(GOLDEN / f"{case}.npz")
        wav = SpeechDecoder(model32, threads=2).decode(g["codes"])
        assert wav.shape == g["wav"].shape
        assert float(np.abs(wav - g["wav"]).max()) <= TOL, case


@pytest.mark.parity
def test_long_decode_reproduces_reference_chunking(model32, report):
    """400 frames: the reference decodes 300-frame chunks restarted with 25 frames of context."""
    codes = LONG["codes"]
    chunked = SpeechDecoder(model32, threads=2).decode(codes)
    assert chunked.shape == LONG["wav_chunked"].shape == (400 * 1920,)
    err = float(np.abs(chunked - LONG["wav_chunked"]).max())
    assert err <= TOL
    one_pass = SpeechDecoder(model32, threads=2, reference_chunking=False).decode(codes)
    assert float(np.abs(one_pass - LONG["wav_full"]).max()) <= TOL
    # the chunking is really exercised: the two references differ after frame 300
    assert float(np.abs(LONG["wav_chunked"] - LONG["wav_full"])[300 * 1920:].max()) > 100 * TOL
    report(f"decoder 400 frames, 300/25 chunked, vs reference: max abs {err:.2e}")


def feed(stream, codes, sizes):
    out, i = [], 0
    for k in sizes:
        out.append(stream.push(codes[i:i + k]))
        i += k
    assert i == len(codes)
    return np.concatenate(out)


def patterns(n, seed, emulated=False):
    rng = np.random.default_rng(seed)
    random_sizes = []
    while sum(random_sizes) < n:
        random_sizes.append(int(min(rng.integers(1, 60), n - sum(random_sizes))))
    # (under emulation a push costs ~1 s: frames one by one where it matters, the first 24 and the
    # 20 across the 300-frame chunk restart: 44 pushes instead of 400)
    one_frame = [1] * 24 + [266] + [1] * 20 + [n - 310] if emulated else [1] * n
    return {"one_frame": one_frame, "random": random_sizes,
            "boundary_straddle": [299, 2, n - 301], "all_at_once": [n]}


@pytest.mark.arm64
@pytest.mark.parametrize("chunking", [True, False])
def test_streaming_equals_offline_for_any_feeding_pattern(model32, chunking, emulated):
    if emulated and not chunking:   # (its one difference from chunking: no restart at frame 300)
        pytest.skip("under emulation the reference chunking stands for both; x86-64 runs both")
    codes = LONG["codes"][:330] if emulated else LONG["codes"]   # (330: across the restart at 300)
    dec = SpeechDecoder(model32, threads=2, reference_chunking=chunking)
    offline = dec.decode(codes)
    for name, sizes in patterns(len(codes), seed=int(chunking), emulated=emulated).items():
        assert sum(sizes) == len(codes), name
        stream = dec.session()
        streamed = feed(stream, codes, sizes)
        assert stream.frames_decoded == len(codes)
        assert float(np.abs(streamed - offline).max()) <= STREAM_TOL, name


def test_stream_reset_starts_a_new_utterance(model32):
    codes = stage_codes()
    stream = SpeechDecoder(model32, threads=1).session()
    first = stream.push(codes)
    stream.push(codes[:5])
    stream.reset()
    assert stream.frames_decoded == 0
    assert np.array_equal(stream.push(codes), first)


def test_a_released_session_is_reused_like_a_new_one(model32):
    """A released session is handed out again (a new one allocates and first touches its buffers:
    milliseconds of time to first audio). Reused, it decodes exactly as a new one; one made for
    private compute, or one still in use, is never handed out."""
    codes = LONG["codes"][:40]
    dec = SpeechDecoder(model32, threads=2)
    first = dec.session(share_compute=True)
    feed(first, codes[::-1].copy(), [3, 17, 20])   # another utterance, left half-way through a chunk
    dec.release(first)
    dec.release(first)   # twice: still handed out once
    again = dec.session(share_compute=True)
    assert again is first and again.frames_decoded == 0
    fresh = dec.session(share_compute=True)
    assert fresh is not first
    assert np.array_equal(feed(again, codes, [1, 4, 4, 31]), feed(fresh, codes, [1, 4, 4, 31]))
    private = dec.session()
    dec.release(private)
    assert dec.session(share_compute=True) is not private


def test_sessions_sharing_a_runner_take_turns_from_any_thread(model32):
    """Sessions on one shared runner pushed from two threads at once: each decodes exactly what it
    decodes alone (the runner's launches take turns); a runner of another placement is refused."""
    import threading
    codes = LONG["codes"][:60]
    utterances = [codes, codes[::-1].copy()]
    dec = SpeechDecoder(model32, threads=1)
    alone = [dec.decode(u) for u in utterances]
    sessions = [dec.session(share_compute=True) for _ in utterances]
    assert sessions[0]._native is not sessions[1]._native
    got, start = [None, None], threading.Barrier(2)

    def run(i):
        start.wait()
        got[i] = feed(sessions[i], utterances[i], [1, 3, 8, 8, 40])
    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(np.array_equal(g, a) for g, a in zip(got, alone))
    with pytest.raises(ValueError, match="a decoder session needs a runner"):
        _native.SpeechDecoderSession(None)


@pytest.mark.slow
@pytest.mark.kernels
def test_f16_weights_stay_close(converted, model32, report):
    """f16 decoder weights: on a CPU with AVX2 Kazeia's f32-arithmetic products (the columns stay
    f32; only the weights are rounded) hold the f16-class gate against the f32 decoder, and stream
    exactly as they decode; below AVX2 ggml's f16 product (columns rounded to f16 too)."""
    codes = LONG["codes"][:120]
    ref = SpeechDecoder(model32, threads=2).decode(codes)
    dec = SpeechDecoder(open_model(converted("custom_voice", "f16")), threads=2)
    half = dec.decode(codes)
    err = float(np.abs(half - ref).max())
    ours = f32_products_active()
    snr = snr_db(ref, half)
    report(f"decoder f16 vs f32 weights, {'Kazeia f32 products' if ours else 'ggml f16 products'}{at_cpu_level()}: "
           f"SNR {snr:.1f} dB, max abs {err:.2e}, rms {float(np.sqrt(np.mean((half - ref) ** 2))):.2e}")
    assert snr >= (55 if ours else 45)
    for name, sizes in list(patterns(len(codes), seed=5).items())[:3]:
        assert np.array_equal(feed(dec.session(), codes, sizes), half), name
    assert err < 5e-2


def test_invalid_codes_are_rejected(model32):
    dec = SpeechDecoder(model32, threads=1)
    with pytest.raises(ValueError, match=r"shape \[frames, 16\]"):
        dec.decode(np.zeros((4, 15), np.int32))
    with pytest.raises(ValueError, match="outside"):
        dec.decode(np.full((2, 16), 2048))
    with pytest.raises(ValueError, match="outside"):
        dec.decode(np.full((2, 16), -1))
    with pytest.raises(ValueError, match="integers"):
        dec.decode(np.zeros((2, 16), np.float32))
    assert dec.decode(np.zeros((0, 16), np.int32)).shape == (0,)
    # the native layer checks too (defence in depth for callers that bypass Python checks)
    stream = dec.session()
    with pytest.raises(ValueError, match="outside"):
        stream._native.push(np.full((1, 16), 5000, np.int32))


def test_bf16_decoder_option(tmp_path, report):
    """bf16 decoder weights (fastest on CPUs with AVX512-BF16) load and stay recognisably close."""
    from kazeia.engine import convert
    from support.goldens import checkpoint_dir
    path = tmp_path / "bf16dec.gguf"
    convert(checkpoint_dir("custom_voice"), path, out_type="f32", decoder_type="bf16", progress=False)
    model = open_model(path)
    assert model.native.tensor_type("dec.voc.blk.0.tconv.weight") == "bf16"
    assert model.native.tensor_type("dec.voc.blk.0.snake.alpha") == "f32"
    codes = LONG["codes"][:60]
    ref = LONG["wav_chunked"][:60 * 1920]
    dec = SpeechDecoder(model, threads=2)
    wav = dec.decode(codes)
    snr = 10 * np.log10(np.mean(ref ** 2) / np.mean((wav - ref) ** 2))
    # without Kazeia's bf16 kernels (no AVX-512 BF16, or KAZEIA_CPU below it) the matrices are
    # re-laid as f16 at load: ggml's bf16 products are several times slower than its f16 ones there
    kernels = active_kernels()
    relaid = dec._native.bf16_relaid
    assert (relaid > 0) == ("gemm_bf16" not in kernels)
    how = f"re-laid as f16 ({relaid} matrices)" if relaid else "Kazeia's bf16 kernels"
    report(f"decoder bf16 weights, {how}{at_cpu_level()}: SNR {snr:.1f} dB vs the reference waveform")
    assert snr > 30
    for name, sizes in list(patterns(len(codes), seed=3).items())[:3]:   # and it streams exactly as it decodes
        assert float(np.abs(feed(dec.session(), codes, sizes) - wav).max()) <= STREAM_TOL, name


def test_matrix_product_flops_are_counted_per_launch_and_per_stage(converted, tmp_path):
    """The bench's decoder GFLOP/s rest on these counts: every decoder-transformer matrix is applied to
    every frame, so a launch does at least 2 x those parameters x frames; the node-by-node profile
    counts the same launch's products."""
    from kazeia.engine.synthesis.speech_decoder import DecoderSession
    model = open_model(converted("custom_voice", "f32"))
    codes = np.random.default_rng(3).integers(0, 2048, (4, 16))
    dec = SpeechDecoder(model, threads=1)
    plain, profiled = DecoderSession(dec), DecoderSession(dec, profile=True)
    plain.push(codes)
    profiled.push(codes)
    launch_flops = plain.placement_report()["matmul_flops"]
    assert sum(f for _, f in profiled.profile().values()) == launch_flops
    transformer = sum(int(np.prod(s["shape"])) for s in model.native.tensor_specs()
                      if s["name"].startswith("dec.tfm.blk.") and len(s["shape"]) == 2)
    assert transformer > 0 and launch_flops >= 2 * transformer * len(codes)
    # f16 and bf16 weights (Kazeia's f32-arithmetic and bf16 products where they apply, ggml's
    # elsewhere) count the same products in the direct form, but for the transposed convolutions laid
    # out as two taps per phase (f16 through the f32 products), which skip the extra input column
    # the phase form multiplies per launch; f32 weights no fewer (its few-output convolutions, a
    # sliding dot, are not counted). Winograd's form counts the multiply-adds it does: fewer.
    import os
    import subprocess
    import sys
    from kazeia.engine import convert
    from support.goldens import checkpoint_dir
    count = ("import sys, numpy as np\n"
             "from kazeia.engine import open_model\n"
             "from kazeia.engine.synthesis.speech_decoder import SpeechDecoder, DecoderSession\n"
             "s = DecoderSession(SpeechDecoder(open_model(sys.argv[1]), threads=1))\n"
             "s.push(np.random.default_rng(3).integers(0, 2048, (4, 16)))\n"
             "print(s.placement_report()['matmul_flops'])\n")
    counts = {}
    for weights in ("f16", "bf16"):
        path = tmp_path / f"dec-{weights}.gguf"
        convert(checkpoint_dir("custom_voice"), path, out_type="f32", decoder_type=weights, progress=False)
        for form, env in (("", {}), (" direct", {"KAZEIA_NO_WINOGRAD": "1"})):
            r = subprocess.run([sys.executable, "-c", count, str(path)], env={**os.environ, **env}, capture_output=True,
                               text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-2000:]
            counts[weights + form] = float(r.stdout.split()[-1])
    kernels = active_kernels()
    bf16_in_winograd = "winograd_conv" in kernels and "gemm_bf16" not in kernels   # (bf16 re-laid as f16)
    tconvs = [s["shape"] for s in model.native.tensor_specs()
              if s["name"].startswith("dec.voc.blk.") and s["name"].endswith("tconv.weight")]   # [Cin, Cout, 2s]
    two_taps = [(c_in, c_out, k) for c_in, c_out, k in tconvs if c_out * k // 2 % 16 == 0 and 2 * c_in % 16 == 0]
    assert two_taps and len(two_taps) < len(tconvs)   # (the tiny checkpoint has both kinds)
    skipped = sum(2 * c_in * c_out * k for c_in, c_out, k in two_taps)   # one input column each, one launch
    f16_skips = skipped if "winograd_conv" in kernels else 0   # (the f32 products run)
    assert counts["f16 direct"] + f16_skips == counts["bf16 direct"] + (skipped if bf16_in_winograd else 0)
    assert counts["bf16 direct"] >= launch_flops
    assert counts["bf16"] == (counts["f16"] if bf16_in_winograd else counts["bf16 direct"])
    if "winograd_conv" in kernels:
        assert counts["f16"] < counts["f16 direct"], counts
    else:
        assert counts["f16"] == counts["f16 direct"], counts


@pytest.mark.kernels
def test_winograd_decoder_streams_exactly(converted):
    """The f16 decoder with its seven-tap convolutions in Winograd's form decodes the same audio
    streamed in any feeding pattern, and on one thread or two, as offline."""
    if "winograd_conv" not in active_kernels():
        pytest.skip("Winograd's form runs over the f32 products (AVX2 or NEON)" + at_cpu_level())
    codes = LONG["codes"][:90]
    model = open_model(converted("custom_voice", "f16"))
    offline = SpeechDecoder(model, threads=2).decode(codes)
    assert np.array_equal(SpeechDecoder(model, threads=1).decode(codes), offline)
    for name, sizes in patterns(len(codes), seed=9).items():
        if name == "boundary_straddle":
            sizes = [29, 2, len(codes) - 31]
        assert np.array_equal(feed(SpeechDecoder(model, threads=1).session(), codes, sizes), offline), name

F32_PRODUCTS_FORMS = """
import sys, numpy as np
from kazeia.engine import open_model
from kazeia.engine.accuracy import snr_db
from kazeia.engine.synthesis.speech_decoder import SpeechDecoder
codes = np.load(sys.argv[2])
dec = SpeechDecoder(open_model(sys.argv[1]), threads=2)
wav = dec.decode(codes)
s = dec.session()
streamed = np.concatenate([s.push(codes[:1]), s.push(codes[1:5]), s.push(codes[5:])])
np.save(sys.argv[3], np.stack([wav, streamed]))
"""


@pytest.mark.slow
@pytest.mark.kernels
def test_f32_products_give_the_same_audio_in_every_form(converted, tmp_path, report):
    """The f32 products read f16 weights laid out in panels at load (in place for a launch of few
    columns, widened first for one of many), or rearrange them at every launch
    (KAZEIA_NO_DECODER_PANELS), in 512-bit or 256-bit registers (KAZEIA_CPU=avx2): the same sums in
    the same order, so the same audio, offline and streamed, bit for bit. The seven-tap
    convolutions in Winograd's form (the default where the weights are laid out at load) give one
    audio in every form too, and the direct form (KAZEIA_NO_WINOGRAD, or no panels) another, close
    to it."""
    import os
    import subprocess
    import sys
    model = converted("custom_voice", "f16")
    codes = tmp_path / "codes.npy"
    np.save(codes, LONG["codes"][:40])
    groups = {"Winograd": {"panels at load": {}, "256-bit form": {"KAZEIA_CPU": "avx2"}},
              "direct": {"direct": {"KAZEIA_NO_WINOGRAD": "1"},
                         "rearranged per launch": {"KAZEIA_NO_DECODER_PANELS": "1"},
                         "direct, 256-bit form": {"KAZEIA_NO_WINOGRAD": "1", "KAZEIA_CPU": "avx2"}}}
    kernels = active_kernels()
    if not f32_products_active():
        pytest.skip("the f32 products need AVX2 or NEON" + at_cpu_level())
    assert "winograd_conv" in kernels
    if "gemm_fma" not in kernels:   # (the only form here: the first run's)
        for runs in groups.values():
            for name in [n for n in runs if "256-bit" in n]:
                runs.pop(name)
    audio = {}
    for group, runs in groups.items():
        for name, env in runs.items():
            out = tmp_path / f"{len(audio)}.npy"
            r = subprocess.run([sys.executable, "-c", F32_PRODUCTS_FORMS, str(model), str(codes), str(out)],
                               env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-2000:]
            audio[(group, name)] = np.load(out)
    for group, runs in groups.items():
        first = audio[(group, next(iter(runs)))]
        assert np.abs(first).max() > 0
        for name in runs:
            a = audio[(group, name)]
            assert np.array_equal(a[0], a[1]), f"{group}, {name}: streamed != offline"
            assert np.array_equal(a, first), (group, name)
    winograd, direct = (audio[(g, next(iter(groups[g])))][0] for g in groups)
    assert not np.array_equal(winograd, direct)   # (the form did run)
    snr = snr_db(direct, winograd)
    assert snr >= 60, snr
    report(f"decoder f16 weights, f32 products: {', '.join(groups['Winograd'])} give the same audio bit for bit "
           f"in Winograd's form, {', '.join(groups['direct'])} in the direct form; the two forms {snr:.1f} dB "
           f"apart{at_cpu_level()}")