"""The Qwen2 byte-level BPE text tokenizer, built from the released vocab.json / merges.txt /
tokenizer_config.json and stored in the model file as `tokenizer.huggingface.json`."""
from __future__ import annotations

import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from .errors import ConversionError

# The split regex Qwen2 was trained with (the default).
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# transformers 4.57.3 swaps in this regex when the reference loads a local folder whose config.json
# names a transformers_version newer than 4.57.2 (`fix_mistral_regex=True`); offered only to
# reproduce such a reference run token for token.
MISTRAL_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                 r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLITS = {"qwen2": QWEN2_SPLIT, "mistral": MISTRAL_SPLIT}


def _split(pattern: str) -> pre_tokenizers.Split:
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)


def build_tokenizer(vocab: dict[str, int], merges: list[tuple[str, str]],
                    added: list[tuple[int, str, bool]]) -> Tokenizer:
    """Byte-level BPE as Qwen2TokenizerFast builds it: NFC, split regex, ByteLevel without prefix
    space, no BOS/EOS; `added` holds (id, content, special) of the added tokens."""
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, continuing_subword_prefix="",
                               end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        _split(QWEN2_SPLIT), pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    for token_id, content, special in sorted(added):
        tok.add_tokens([AddedToken(content, special=special, normalized=not special, single_word=False,
                                   lstrip=False, rstrip=False)])
        got = tok.token_to_id(content)
        if got != token_id:
            raise ConversionError(f"added token {content!r} should have id {token_id} but got {got}; "
                                  "added tokens must follow the vocabulary without gaps")
    return tok


def tokenizer_json_from_files(vocab_json: Path, merges_txt: Path, tokenizer_config_json: Path) -> str:
    """tokenizer.json text for the released tokenizer files."""
    with open(vocab_json, encoding="utf-8") as f:
        vocab = json.load(f)
    merges = []
    with open(merges_txt, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#version"):
                continue
            parts = line.split(" ")
            if len(parts) != 2:
                raise ConversionError(f"{merges_txt}: malformed merge line {line!r}")
            merges.append((parts[0], parts[1]))
    with open(tokenizer_config_json, encoding="utf-8") as f:
        cfg = json.load(f)
    added = [(int(i), t["content"], bool(t.get("special", False)))
             for i, t in cfg.get("added_tokens_decoder", {}).items()]
    return build_tokenizer(vocab, merges, added).to_str()


class TextTokenizer:
    """Encodes text with the tokenizer stored in a model file."""

    def __init__(self, tokenizer_json: str, split: str = "qwen2"):
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
        self._tok = Tokenizer.from_str(tokenizer_json)
        self.split = split
        if split != "qwen2":
            self._tok.pre_tokenizer = pre_tokenizers.Sequence([
                _split(SPLITS[split]),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=False)

    def token_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)
