"""Audio as the bytes of a response format, encoded as the audio comes: `feed` gives what can be
sent now, `finish` the rest. pcm and wav are 16-bit samples (wav behind a streaming header whose sizes
say "unknown", as streamed WAV is sent); mp3, opus (in Ogg) and aac (ADTS) are FFmpeg's encoders
through PyAV, muxed to a sink that cannot seek, so nothing written is ever rewritten (libsndfile
rewrites MP3's info frame at close) and every Ogg page goes out as soon as it is full (20 ms pages).
FLAC is not streamed: a FLAC of unknown length is legal, but libsndfile (soundfile.read) cannot read
one, so it comes whole. A whole take (`encode_whole`: FLAC, or after a time-stretch) is written by
libsndfile (soundfile) where it has the format, with its true sizes and info frames."""
from __future__ import annotations

import io
import struct

import numpy as np

MEDIA_TYPES = {"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac",
               "wav": "audio/wav", "pcm": "audio/pcm"}
_FFMPEG = {"mp3": ("mp3", "libmp3lame"), "opus": ("ogg", "libopus"), "aac": ("adts", "aac"),
           "mulaw": ("mulaw", "pcm_mulaw"), "alaw": ("alaw", "pcm_alaw")}   # (G.711: telephony's 8-bit)
STREAMED = ("pcm", "wav", *_FFMPEG)
_SOUNDFILE = {"wav": ("WAV", "PCM_16"), "flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"),
              "opus": ("OGG", "OPUS")}
_UNKNOWN_SIZE = 0xFFFFFFFF


def pcm16(audio: np.ndarray) -> bytes:
    """float32 in [-1, 1] -> 16-bit little-endian samples (clipped, rounded)."""
    return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def wav_header(sample_rate: int, data_bytes: int = _UNKNOWN_SIZE) -> bytes:
    """A mono 16-bit WAV header; the default sizes say "until the stream ends"."""
    riff = _UNKNOWN_SIZE if data_bytes == _UNKNOWN_SIZE else 36 + data_bytes
    return (b"RIFF" + struct.pack("<I", riff) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, 2 * sample_rate, 2, 16) +
            b"data" + struct.pack("<I", data_bytes))


class Encoder:
    def feed(self, audio: np.ndarray) -> bytes:
        raise NotImplementedError

    def finish(self) -> bytes:
        return b""


class Pcm(Encoder):
    def feed(self, audio: np.ndarray) -> bytes:
        return pcm16(audio)


class Wav(Pcm):
    def __init__(self, sample_rate: int):
        self._header = wav_header(sample_rate)

    def feed(self, audio: np.ndarray) -> bytes:
        header, self._header = self._header, b""
        return header + pcm16(audio)


class _Sink(io.RawIOBase):
    """Where the muxer writes; `take` hands over what it has written since the last take."""

    def __init__(self):
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


class FFmpeg(Encoder):
    def __init__(self, fmt: str, sample_rate: int):
        import av
        container, codec = _FFMPEG[fmt]
        self._av = av
        self._rate = sample_rate
        self._sink = _Sink()
        options = {"page_duration": "20000"} if container == "ogg" else {}
        self._out = av.open(self._sink, "w", format=container, options=options)
        self._stream = self._out.add_stream(codec, rate=sample_rate)
        self._stream.layout = "mono"

    def feed(self, audio: np.ndarray) -> bytes:
        if len(audio):
            frame = self._av.AudioFrame.from_ndarray(np.ascontiguousarray(audio, np.float32)[None, :], format="flt",
                                                     layout="mono")
            frame.sample_rate = self._rate
            for packet in self._stream.encode(frame):
                self._out.mux(packet)
        return self._sink.take()

    def finish(self) -> bytes:
        for packet in self._stream.encode(None):
            self._out.mux(packet)
        self._out.close()
        return self._sink.take()


def encoder(fmt: str, sample_rate: int) -> Encoder:
    if fmt == "pcm":
        return Pcm()
    if fmt == "wav":
        return Wav(sample_rate)
    if fmt in _FFMPEG:
        return FFmpeg(fmt, sample_rate)
    raise ValueError(f"no streaming encoder for {fmt!r}; these stream: {', '.join(STREAMED)}")


def encode_whole(fmt: str, audio: np.ndarray, sample_rate: int) -> bytes:
    """A whole take in one file."""
    if fmt in _SOUNDFILE:
        import soundfile
        container, subtype = _SOUNDFILE[fmt]
        out = io.BytesIO()
        samples = np.frombuffer(pcm16(audio), "<i2") if subtype == "PCM_16" else np.clip(audio, -1.0, 1.0)
        soundfile.write(out, samples, sample_rate, format=container, subtype=subtype)   # (16-bit: pcm's samples)
        return out.getvalue()
    enc = encoder(fmt, sample_rate)
    return enc.feed(audio) + enc.finish()
