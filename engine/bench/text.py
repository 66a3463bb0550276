"""What every pipeline bench speaks, and the seed of the checkpoint engines share."""

SHARED_SEED = 1234   # the Hugging Face checkpoint Kazeia and peer engines both read
BENCH_TEXT = ("Kazeia measures every stage of speech synthesis on random weights, so that the numbers "
              "match what the released models cost per frame.")

