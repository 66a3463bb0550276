"""Kazeia engine: model files, conversion, synthesis and the `kazeia` command line."""
from kazeia import _native

from .model_files.convert import ConversionReport, convert, converted_checkpoint
from .model_files.demo import demo_model_path, resolve_model
from .model_files.errors import ConversionError, ModelLoadError
from .model_files.model_file import ModelFile, ModelInfo, Speaker, open_model
from .synthesis.prompt import Voice
from .model_files.random_model import make_random_model
from .synthesis.requests import Chunk, Request, Result, SamplingParams, Timings
from .synthesis.prompt_stream import PromptStream
from .synthesis.chunked_take import ChunkedTake
from .synthesis.live_take import LiveTake
from .synthesis.long_text import LongResult, PlanError, TakePlan
from .synthesis.speech_decoder import DecoderSession, SpeechDecoder
from .synthesis.engine import Engine
from .voices.voice import create_voice, load_voice, save_voice, voice_profile_info


def devices() -> list[dict]:
    """ggml's devices with memory and capabilities."""
    return _native.devices()


__all__ = ["Chunk", "ChunkedTake", "ConversionError", "ConversionReport", "DecoderSession", "Engine",
           "LiveTake", "LongResult", "ModelFile", "ModelInfo", "ModelLoadError", "PlanError", "PromptStream",
           "Request", "Result", "SamplingParams", "Speaker", "SpeechDecoder", "TakePlan", "Timings", "Voice",
           "convert", "converted_checkpoint", "create_voice", "demo_model_path", "devices", "load_voice",
           "make_random_model", "open_model", "resolve_model", "save_voice", "voice_profile_info"]
