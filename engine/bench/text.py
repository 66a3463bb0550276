"""What every pipeline bench speaks, and the seed of the checkpoint engines share."""

SHARED_SEED = 1234   # the Hugging Face checkpoint Kazeia and peer engines both read
BENCH_TEXT = ("Kazeia measures every stage of speech synthesis on random weights, so that the numbers "
              "match what the released models cost per frame.")


# `kazeia bench --long`: ~2,000 characters in four paragraphs, ordinary sentences of mixed length
LONG_TEXT = """\
Kazeia reads long texts the way a careful narrator would. It splits a chapter into sentences, packs \
them into chunks that the model speaks well, and joins the chunks into one take. Each chunk has a seed \
of its own, so one of them can be made again without touching the rest. The first chunk starts alone, \
and the others join it at the next frame.

The model was trained on utterances of moderate length. Very long prompts drift: the voice loses its \
colour, the pace wanders, and in the worst case the speech turns to noise. Short chunks keep every \
sentence close to what the model knows. They also let the engine work on several chunks at once, \
because every talker step reads the same weights for all of them.

Pauses come from the punctuation and from the markup. A sentence ends with a short breath, a \
paragraph with a longer one, and an explicit pause asks for exactly the silence it names. At every \
join the audio fades across a few milliseconds, so that no click marks the seam. Silence at the \
start and end of a chunk can be trimmed, without cutting a single sample of speech.

Names and rare words are a different problem. A pronunciation lexicon rewrites a term before it \
reaches the tokenizer, for one language or one voice, and every rewrite is kept with the take. An \
operator who hears a product name said wrongly adds a rule, makes the chunk again, and listens. \
Nothing else in the take changes, which is what makes the comparison fair.

Dialogue works the same way. Each line names its speaker, and the cast maps every name to a voice: \
a speaker of the model, a description of a voice, or a profile cloned from a recording. The turns \
run through the same batched engine as the chapter did, and the take keeps a list of its chunks, \
with the text, the voice, the seed and the place in the audio of each. A take made today can be made \
again tomorrow, sample for sample, from that list alone."""
