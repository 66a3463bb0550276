"""Voice cloning (x-vector): the reference's mel features and x-vector, reference audio of any
format checked, voice profiles that know their model, and greedy codes equal to the reference."""
from __future__ import annotations


import numpy as np
import pytest
import soundfile

from kazeia.engine import Engine, Request, SamplingParams, create_voice, load_voice, open_model, save_voice
from kazeia.engine.voices.voice import check_reference_audio, log_mel, speaker_embedding

from support.commands import kazeia
from support.goldens import GOLDEN

pytestmark = pytest.mark.levels   # (numbers compared across paths: run again at every lower CPU level)


XVEC = np.load(GOLDEN / "base_xvec_stream.npz")


@pytest.mark.parity
def test_mel_and_x_vector_match_reference(converted, report):
    mel = log_mel(XVEC["ref_wav"])
    assert mel.shape == XVEC["ref_mel"].shape
    mel_err = float(np.abs(mel - XVEC["ref_mel"]).max())
    x = speaker_embedding(open_model(converted("base")), XVEC["ref_wav"])
    x_err = float(np.abs(x - XVEC["ref_spk_embedding"]).max())
    assert mel_err <= 1e-4 and x_err <= 1e-4
    report(f"speaker encoder: log-mel max abs {mel_err:.1e}, x-vector max abs {x_err:.1e}")


@pytest.mark.parity
def test_profile_round_trip_gives_reference_codes(converted, tmp_path):
    model = open_model(converted("base"))
    wav = tmp_path / "ref.flac"
    soundfile.write(wav, XVEC["ref_wav"], 24000, subtype="PCM_24")
    voice = create_voice(model, wav)
    path = save_voice(voice, tmp_path / "me.kzvoice", model)
    loaded = load_voice(path, model)
    assert float(np.abs(loaded.x_vector - XVEC["ref_spk_embedding"]).max()) <= 1e-4
    engine = Engine(model, threads=2)
    sampling = SamplingParams.from_model(model.info, max_frames=len(XVEC["codes"])).greedy()
    from support.goldens import MANIFEST
    st = MANIFEST["cases"]["base_xvec_stream"]["settings"]
    result = engine.take(Request(st["text"], language=st["language"], voice=loaded, sampling=sampling,
                                 streaming_text=not st["non_streaming_mode"]))
    # 24-bit FLAC rounding of the reference audio moves the x-vector by ~1e-6: the codes stay put
    assert np.array_equal(result.codes, XVEC["codes"])


def test_audio_of_any_rate_and_channels(converted, tmp_path):
    model = open_model(converted("base"))
    t = np.arange(int(2.0 * 44100)) / 44100
    stereo = np.stack([0.3 * np.sin(2 * np.pi * 200 * t), 0.2 * np.sin(2 * np.pi * 330 * t)], axis=1)
    path = tmp_path / "stereo44k.wav"
    soundfile.write(path, stereo.astype(np.float32), 44100)
    voice = create_voice(model, path)
    assert voice.x_vector.shape == (64,) and np.isfinite(voice.x_vector).all()


def test_bad_references_are_refused(converted, tmp_path):
    sr = 24000
    with pytest.raises(ValueError, match="at least"):
        check_reference_audio(np.full(sr // 2, 0.1, np.float32))
    with pytest.raises(ValueError, match="silent"):
        check_reference_audio(np.zeros(3 * sr, np.float32))
    with pytest.raises(ValueError, match="clipped"):
        check_reference_audio(np.sign(np.sin(np.arange(3 * sr) / 5)).astype(np.float32))
    with pytest.raises(ValueError, match="at most"):
        check_reference_audio(np.full(61 * sr, 0.1, np.float32))
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not audio at all")
    with pytest.raises(ValueError, match="cannot read audio"):
        create_voice(open_model(converted("base")), junk)
    with pytest.raises(ValueError, match="needs a Base model"):
        speaker_embedding(open_model(converted("custom_voice")), XVEC["ref_wav"])


def test_profiles_know_their_model(converted, tmp_path):
    base = open_model(converted("base"))
    path = save_voice(create_voice(base, _ref_file(tmp_path)), tmp_path / "v.kzvoice", base)
    from kazeia.engine import make_random_model
    assert load_voice(path, base).x_vector.shape == (64,)
    other = open_model(make_random_model(tmp_path / "other.gguf", size="tiny", variant="base", progress=False))
    with pytest.raises(ValueError, match=r"made for tiny-base \(1b7\), not kazeia-random-tiny-base-seed0 \(tiny\)"):
        load_voice(path, other)
    with pytest.raises(ValueError, match="not a Kazeia voice profile"):
        load_voice(_ref_file(tmp_path), base)


def _ref_file(tmp_path):
    path = tmp_path / "ref.wav"
    soundfile.write(path, XVEC["ref_wav"], 24000, subtype="FLOAT")
    return path


def test_cli_voice_create_and_say(converted, tmp_path):
    model = converted("base")
    ref = _ref_file(tmp_path)
    r = kazeia("voice", "create", "--model", model, "--audio", ref, "-o", tmp_path / "me.kzvoice")
    assert r.returncode == 0, r.stderr
    r = kazeia("say", "--model", model, "--voice", tmp_path / "me.kzvoice", "--text", "Cloned.", "--max-frames", "4",
               "-o", tmp_path / "out.wav", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert soundfile.info(tmp_path / "out.wav").frames == 4 * 1920
    r = kazeia("voice", "create", "--model", converted("custom_voice"), "--audio", ref, "-o", tmp_path / "x.kzvoice")
    assert r.returncode == 2 and "needs a Base model" in r.stderr


@pytest.mark.parity
def test_audio_encoder_codes_match_reference(converted, report):
    from kazeia.engine.voices.voice import reference_codes
    model = open_model(converted("base"))
    for case in ("base_icl_stream", "base_icl_nonstream"):
        g = np.load(GOLDEN / f"{case}.npz")
        codes = reference_codes(model, g["ref_wav"])
        assert codes.shape == g["ref_code"].shape and np.array_equal(codes, g["ref_code"]), case
    report(f"audio encoder: reference codes identical ({codes.shape[0]} frames x 16)")


@pytest.mark.parity
@pytest.mark.parametrize("case", ["base_icl_stream", "base_icl_nonstream"])
def test_in_context_profile_gives_reference_codes(converted, tmp_path, case):
    from support.goldens import MANIFEST
    g = np.load(GOLDEN / f"{case}.npz")
    st = MANIFEST["cases"][case]["settings"]
    model = open_model(converted("base"))
    wav = tmp_path / "ref.wav"
    soundfile.write(wav, g["ref_wav"], 24000, subtype="FLOAT")
    voice = load_voice(save_voice(create_voice(model, wav, text=st["ref_text"]), tmp_path / "icl.kzvoice", model), model)
    assert voice.ref_text == st["ref_text"] and np.array_equal(voice.ref_codes, g["ref_code"])
    engine = Engine(model, threads=2)
    sampling = SamplingParams.from_model(model.info, max_frames=len(g["codes"])).greedy()
    result = engine.take(Request(st["text"], language=st["language"], voice=voice, sampling=sampling,
                                 streaming_text=not st["non_streaming_mode"]))
    assert np.array_equal(result.codes, g["codes"])
    assert float(np.abs(result.audio - g["wav"]).max()) <= 1e-4


def test_silent_edges_are_trimmed():
    from kazeia.engine.voices.voice import trim_silence
    sr = 24000
    speech = (0.2 * np.sin(np.arange(2 * sr) / 7)).astype(np.float32)
    padded = np.concatenate([np.zeros(sr, np.float32), speech, np.zeros(sr // 2, np.float32)])
    trimmed = trim_silence(padded)
    assert 2 * sr <= len(trimmed) <= 2 * sr + int(0.12 * sr)
    assert np.array_equal(trim_silence(speech), speech)


def test_half_precision_encoders_run(converted):
    """f16 files keep the audio encoder's convolutions in f16 (the path full-size models take)."""
    from kazeia.engine.voices.voice import reference_codes
    model = open_model(converted("base", "f16"))
    assert model.native.tensor_type("enc.conv_in.weight") == "f16"
    g = np.load(GOLDEN / "base_icl_stream.npz")
    codes = reference_codes(model, g["ref_wav"])
    assert codes.shape == g["ref_code"].shape and codes.min() >= 0 and codes.max() < 2048
    assert (codes == g["ref_code"]).mean() > 0.5   # f16 rounding may flip a few near-ties, not most codes
    x = speaker_embedding(model, g["ref_wav"])
    assert float(np.abs(x - g["ref_spk_embedding"]).max()) <= 1e-4   # the speaker encoder stays f32
