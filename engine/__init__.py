"""Kazeia engine: model files, conversion, synthesis and the `kazeia` command line."""
from kazeia import _native

from .audio_stream import AudioStream
from .convert import ConversionReport, convert, converted_checkpoint
from .demo import demo_model_path, resolve_model
from .errors import ConversionError, ModelLoadError
from .model_file import ModelFile, ModelInfo, Speaker, open_model
from .prompt import Voice
from .random_model import make_random_model
from .requests import Chunk, Request, Result, SamplingParams, Timings
from .speech_decoder import DecoderSession, SpeechDecoder
from .synthesis import Engine
from .voice import create_voice, load_voice, save_voice, voice_profile_info


def devices() -> list[dict]:
    """ggml's devices with memory and capabilities."""
    return _native.devices()


__all__ = ["AudioStream", "Chunk", "ConversionError", "ConversionReport", "DecoderSession", "Engine", "ModelFile",
           "ModelInfo", "ModelLoadError", "Request", "Result", "SamplingParams", "Speaker", "SpeechDecoder", "Timings", "Voice",
           "convert", "converted_checkpoint", "create_voice", "demo_model_path", "devices", "load_voice", "make_random_model", "open_model",
           "resolve_model", "save_voice", "voice_profile_info"]
