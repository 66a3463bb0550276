"""What every pipeline bench speaks, how it warms an engine up, and the seed of the checkpoint
engines share."""

SHARED_SEED = 1234   # the Hugging Face checkpoint Kazeia and peer engines both read
BENCH_TEXT = ("Kazeia measures every stage of speech synthesis on random weights, so that the numbers "
              "match what the released models cost per frame.")


def warm_up(engine, speaker: str = "vivian", **request) -> None:
    """A short stream on other text before the timed runs: the runs' first-time costs (the streaming
    decoder's graphs and state, the prompt's buffers) are paid here, as the runs would pay them."""
    from ..engine import SamplingParams
    for _ in engine.stream("Warm up.", speaker=speaker, sampling=SamplingParams.from_model(engine.info, max_frames=6),
                           **request):
        pass
