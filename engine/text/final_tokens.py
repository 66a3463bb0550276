"""Text that arrives while it is being written (a language model's deltas, an operator typing) as the
tokens the whole text will have. The model reads one text token per frame, so a session can start on
the first tokens; but BPE and the split regex decide a token by what follows it (a word cut mid-way,
the space before the next word, a digit run, a combining accent), so only the tokens no later text
can change are handed out: everything before the last two pre-tokenized pieces of the text so far,
NFC-normalized as the tokenizer normalizes it. Whatever the split and timing of the deltas, the ids
handed out, then those at close, are exactly the whole text's (prompt.PromptBuilder's body)."""
from __future__ import annotations

import re
import unicodedata
from os.path import commonprefix

from ..model_files.text_tokenizer import SPLITS, TextTokenizer, _split

# what the prompt puts before and after the text (prompt.PromptBuilder.build: ids[3:-5])
_BEFORE, _AFTER = "<|im_start|>assistant\n", "<|im_end|>\n<|im_start|>assistant\n"
_ROLE_TOKENS, _END_TOKENS = 3, 5
_HELD_PIECES = 2   # the last piece may grow; the one before it may still take the next one's space


class FinalTokens:
    def __init__(self, tokenizer: TextTokenizer):
        self._tok = tokenizer
        self._split = _split(SPLITS[tokenizer.split])
        self.text = ""
        self.closed = False
        self._given: list[int] = []   # ids handed out so far
        self._stable = ""             # the normalized text they are the tokens of

    def push(self, delta: str) -> list[int]:
        """Adds `delta`; returns the ids it made final (often none: a word is final once the next
        has begun)."""
        if self.closed:
            raise ValueError("the text is closed: start a new one for the next turn")
        self.text += delta
        stable = self._stable_prefix(self.text)
        if len(stable) <= len(self._stable):   # (nothing new; the held pieces may have merged into one)
            return []
        self._stable = stable
        return self._hand_out(self._tok.encode(_BEFORE + stable)[_ROLE_TOKENS:])

    def offer(self, known: str, ahead: str) -> list[int]:
        """For a text whose end is not decided yet (a live take's chunk, engine/synthesis/live_take.py):
        it is `known` (which starts with what was known before), ended there or going on as `ahead`
        goes, ending anywhere in it or after it. Returns the ids final in every one of those."""
        if self.closed:
            raise ValueError("the text is closed: start a new one for the next turn")
        if not known:
            return []
        near = re.match(r"\s*\S*\s*\S*", ahead)[0]   # (two words on: enough to see known's last ids)
        endings = [self._ids(known + near[:j]) for j in range(len(near) + 1)]
        going_on = self._stable_prefix(known + near)
        endings.append(self._tok.encode(_BEFORE + going_on)[_ROLE_TOKENS:] if going_on else [])
        self.text = known   # (what close() speaks unless told more)
        final = commonprefix(endings)
        return self._hand_out(final) if len(final) > len(self._given) else []

    def close(self, text: str | None = None) -> list[int]:
        """The end of the text (`text`: all of it, for a text given by offer): every id not handed
        out yet."""
        if text is not None:
            self.text = text
        self.closed = True
        if not self.text:
            return []
        return self._hand_out(self._ids(self.text))

    def _ids(self, text: str) -> list[int]:
        """The ids of `text` as the whole of a prompt's text."""
        return self._tok.encode(_BEFORE + text + _AFTER)[_ROLE_TOKENS:-_END_TOKENS]

    @property
    def given(self) -> list[int]:
        return list(self._given)

    def _stable_prefix(self, text: str) -> str:
        """`text` normalized, up to the start of its last _HELD_PIECES pieces (what follows may
        still change how they split and merge; the boundary before them never moves)."""
        normalized = unicodedata.normalize("NFC", text)
        # (split as the prompt sees it: after "assistant\n", which can join the text's first newlines)
        lead = "assistant\n"
        pieces = self._split.pre_tokenize_str(lead + normalized)
        if len(pieces) <= _HELD_PIECES:
            return ""
        cut = pieces[-_HELD_PIECES][1][0] - len(lead)
        return normalized[:cut] if cut > 0 else ""

    def _hand_out(self, ids: list[int]) -> list[int]:
        n = len(self._given)
        if ids[:n] != self._given:   # (never: tests/text/test_final_tokens.py; a bug if it ever is)
            raise RuntimeError(f"streamed text changed tokens already spoken at {self.text!r}")
        new = ids[n:]
        self._given.extend(new)
        return new
