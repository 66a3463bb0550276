"""The bundled demo model: random weights, but audio at a listenable level (not full-scale noise)."""
from __future__ import annotations

import numpy as np
import pytest

from kazeia.engine import Engine, Request, SamplingParams, make_random_model, open_model
from kazeia.engine.model_files.demo import DEMO_RECIPE, demo_model_path
from kazeia.engine.model_files.random_model import OUTPUT_LAYER


@pytest.fixture(scope="module")
def demo():
    return Engine.load(demo_model_path(), threads=2)


@pytest.mark.parametrize("seed", [0, 1])
def test_demo_audio_is_at_a_sane_level(demo, seed, report):
    sampling = SamplingParams.from_model(demo.info, seed=seed, max_frames=40)
    r = demo.take(Request("Hello from Kazeia, the local speech workbench.", speaker=demo.info.speakers[0].name,
                          sampling=sampling))
    audio = r.audio.astype(np.float64)
    assert r.codes.shape[0] > 0 and audio.size == r.codes.shape[0] * 1920
    assert len(np.unique(r.codes[:, 0])) > r.codes.shape[0] // 4   # the codes still vary: real pipeline, not silence
    rms_db = 20 * np.log10(np.sqrt(np.mean(audio ** 2)))
    peak = float(np.abs(audio).max())
    report(f"demo audio seed {seed}: {r.codes.shape[0]} frames, RMS {rms_db:.1f} dBFS, peak {peak:.3f}")
    assert -26.0 <= rms_db <= -16.0
    assert peak <= 0.5


def test_demo_recipe_scales_only_the_output_layer(tmp_path):
    """The demo's output gain changes the vocoder's final conv and nothing else: same tensors,
    shapes and types as the plain recipe, every other value identical."""
    gain = DEMO_RECIPE["output_gain"]
    assert 0 < gain < 1
    plain = open_model(make_random_model(tmp_path / "plain.gguf", progress=False, **dict(DEMO_RECIPE, output_gain=1.0)))
    demo = open_model(make_random_model(tmp_path / "demo.gguf", progress=False, **DEMO_RECIPE))
    specs = plain.native.tensor_specs()
    assert specs == demo.native.tensor_specs()
    for spec in specs:
        name = spec["name"]
        assert demo.native.tensor_type(name) == plain.native.tensor_type(name), name
        want = plain.native.tensor_f32(name)
        if name in OUTPUT_LAYER:
            assert demo.native.tensor_type(name) == "f32"
            np.testing.assert_allclose(demo.native.tensor_f32(name), np.float32(gain) * want, rtol=1e-6)
        else:
            np.testing.assert_array_equal(demo.native.tensor_f32(name), want, err_msg=name)
    assert demo.native.get_float("qwen3tts.random_output_gain") == pytest.approx(gain)
    assert not plain.native.has_key("qwen3tts.random_output_gain")


@pytest.mark.parametrize("variant", ["custom_voice", "base"])
def test_output_gain_default_leaves_random_models_unchanged(tmp_path, variant):
    """Bench and test models keep the plain recipe: output_gain=1.0 (the default) writes the very
    same bytes as leaving it out, and any other gain does change the file."""
    kw = dict(size="tiny", variant=variant, seed=0, out_type="f32", progress=False)
    default = make_random_model(tmp_path / "default.gguf", **kw).read_bytes()
    unity = make_random_model(tmp_path / "unity.gguf", output_gain=1.0, **kw).read_bytes()
    scaled = make_random_model(tmp_path / "scaled.gguf", output_gain=0.5, **kw).read_bytes()
    assert default == unity
    assert scaled != default


def test_output_gain_must_be_positive(tmp_path):
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="output_gain"):
            make_random_model(tmp_path / "x.gguf", progress=False, output_gain=bad)
