"""How much text Kazeia reads and plans, checked before the work (docs/security.md): a file's size
before it is read, a run of pauses and their total when the text is planned. Each is far above any
real use and low enough that a hostile input fails at once, in bounded memory, with a clear message."""
from __future__ import annotations

MIB = 1 << 20

# A text read from a file: `say --text-file`, a .txt or .md book, a render script. The longest novels
# are under 10 MiB of UTF-8; planning holds a few copies of the text.
MAX_TEXT_FILE_BYTES = 32 * MIB
# A lexicon file (.toml or .csv): tens of thousands of rules fit in a few MiB.
MAX_LEXICON_FILE_BYTES = 8 * MIB

# Silence between two chunks, however many pauses in a row make it: what text/join.py accepts.
MAX_PAUSE_RUN_MS = 600_000.0
# All the silence the markup of one text (a take, a chapter) asks for ([pause] tags, SSML breaks).
MAX_TOTAL_PAUSE_MS = 6 * 3600 * 1000.0
