"""Pipecat's own Deepgram TTS service, unchanged, its address pointed at a Kazeia server (run in
Pipecat's venv by tests/serve/test_live_sockets.py): replies written as a language model writes them
(LLMTextFrame deltas between LLMFullResponseStart and End frames, what Pipecat's LLM services push);
each reply's audio written to OUT/replyN.pcm.

    python pipecat_client.py WS_BASE_URL KEY OUT REPLIES_JSON
"""
import asyncio
import json
import sys

from pipecat.frames.frames import (EndFrame, LLMFullResponseEndFrame, LLMFullResponseStartFrame, LLMTextFrame,
                                   TTSAudioRawFrame, TTSStoppedFrame)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.deepgram.tts import DeepgramTTSService


class Replies(FrameProcessor):
    """The audio after the TTS service, a reply per TTSStoppedFrame (sent when Kazeia says Flushed)."""

    def __init__(self):
        super().__init__()
        self.audio, self._current, self.ended = [], bytearray(), asyncio.Event()

    async def process_frame(self, frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            if frame.sample_rate != 24000 or frame.num_channels != 1:
                raise ValueError(f"audio at {frame.sample_rate} Hz, {frame.num_channels} channels")
            self._current += frame.audio
        elif isinstance(frame, TTSStoppedFrame):
            self.audio.append(bytes(self._current))
            self._current = bytearray()
            self.ended.set()
        await self.push_frame(frame, direction)


async def main(base_url: str, key: str, out: str, replies: list[list[str]]) -> None:
    tts = DeepgramTTSService(api_key=key, base_url=base_url, sample_rate=24000,
                             settings=DeepgramTTSService.Settings(voice="vivian"))
    collected = Replies()
    task = PipelineTask(Pipeline([tts, collected]), params=PipelineParams(audio_out_sample_rate=24000))

    async def write():
        for deltas in replies:
            collected.ended.clear()
            await task.queue_frame(LLMFullResponseStartFrame())
            for delta in deltas:
                await task.queue_frame(LLMTextFrame(delta))
                await asyncio.sleep(0.02)
            await task.queue_frame(LLMFullResponseEndFrame())
            await asyncio.wait_for(collected.ended.wait(), 120)
        await task.queue_frame(EndFrame())
    await asyncio.wait_for(asyncio.gather(PipelineRunner(handle_sigint=False).run(task), write()), 240)
    for i, audio in enumerate(collected.audio):
        with open(f"{out}/reply{i}.pcm", "wb") as f:
            f.write(audio)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))
