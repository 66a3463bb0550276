"""Kazeia engine: model files, conversion, synthesis and the `kazeia` command line."""
from kazeia import _native

from .convert import ConversionReport, convert
from .demo import demo_model_path, resolve_model
from .errors import ConversionError, ModelLoadError
from .model_file import ModelFile, ModelInfo, Speaker, open_model
from .random_model import make_random_model


def devices() -> list[dict]:
    """ggml's devices with memory and capabilities."""
    return _native.devices()


__all__ = ["ConversionError", "ConversionReport", "ModelFile", "ModelInfo", "ModelLoadError", "Speaker",
           "convert", "demo_model_path", "devices", "make_random_model", "open_model", "resolve_model"]
