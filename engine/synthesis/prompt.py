"""Prompt assembly, exactly as the reference wrapper builds the talker's prefill (spec section 4).

The result is a plan of rows (text id + codec id + optional frame codes or speaker vector per row)
and the trailing text ids fed one per generated frame; the native side computes the embeddings.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model_files.model_file import ModelFile
from ..model_files.text_tokenizer import TextTokenizer

NONE = -1


@dataclass
class Voice:
    """A cloned voice for Base models: an x-vector, optionally with reference codes and their
    transcript (in-context cloning)."""
    x_vector: np.ndarray
    ref_codes: np.ndarray | None = None   # [frames, 16]
    ref_text: str | None = None


@dataclass
class PromptPlan:
    text_ids: list[int] = field(default_factory=list)
    codec_ids: list[int] = field(default_factory=list)
    frame_codes: list[list[int]] = field(default_factory=list)   # codebooks 1..15 per row, NONE if absent
    vectors: dict[int, np.ndarray] = field(default_factory=dict)  # row -> speaker vector
    trailing_text_ids: list[int] = field(default_factory=list)
    body_tokens: int = 0   # text tokens to speak (sizes the runaway guard)

    def add(self, text: int = NONE, codec: int = NONE, frame: list[int] | None = None,
            vector: np.ndarray | None = None) -> None:
        if vector is not None:
            self.vectors[len(self.text_ids)] = vector
        self.text_ids.append(text)
        self.codec_ids.append(codec)
        self.frame_codes.append(list(frame) if frame is not None else [NONE] * 15)

    def __len__(self) -> int:
        return len(self.text_ids)

    def arrays(self, hidden: int) -> dict:
        """Arguments for the native engine."""
        frames = np.asarray(self.frame_codes, np.int32)
        vectors = None
        if self.vectors:
            vectors = np.zeros((len(self), hidden), np.float32)
            for row, v in self.vectors.items():
                vectors[row] = v
        return dict(text_ids=np.asarray(self.text_ids, np.int32), codec_ids=np.asarray(self.codec_ids, np.int32),
                    frame_codes=frames if (frames != NONE).any() else None, vectors=vectors)


class PromptBuilder:
    """Builds prompts for one model file: its tokenizer, special ids, speakers and languages."""

    def __init__(self, model: ModelFile, split: str = "qwen2"):
        self.info = model.info
        self.tok: TextTokenizer = model.text_tokenizer(split)
        self.text = model.special_text_ids()
        self.codec = model.codec_ids()
        self.speakers = {s.name: s for s in self.info.speakers}
        self.hidden = self.info.hparams["talker"]["hidden_size"]

    # -- validation ------------------------------------------------------------------------------
    def language_id(self, language: str | None, speaker: str | None) -> int | None:
        lang = (language or "auto").strip().lower()
        if lang != "auto" and lang not in self.info.languages:
            raise ValueError(f"unknown language {language!r}; choose one of: auto, {', '.join(self.info.languages)}")
        dialect = self.speakers[speaker].dialect if speaker else None
        if dialect and lang in ("auto", "chinese"):
            return self.info.language_ids[dialect]   # the speaker's dialect replaces Chinese / auto
        return None if lang == "auto" else self.info.language_ids[lang]

    def check_speaker(self, speaker: str | None) -> str | None:
        if speaker is None:
            return None
        name = speaker.strip().lower()
        if not self.speakers:
            raise ValueError(f"this {self.info.variant} model has no named speakers "
                             f"({'use a voice profile' if self.info.variant == 'base' else 'describe the voice with an instruction'})")
        if name not in self.speakers:
            raise ValueError(f"unknown speaker {speaker!r}; choose one of: {', '.join(self.speakers)}")
        return name

    # -- assembly --------------------------------------------------------------------------------
    def build(self, text: str, *, speaker: str | None = None, language: str | None = "auto",
              instruct: str | None = None, voice: Voice | None = None, streaming_text: bool | None = None,
              first_ids: list[int] | None = None) -> PromptPlan:
        """first_ids: a text still being written (text.final_tokens), by its first final ids (text
        unused): the prompt reads the first, the trailing text holds the rest and no tts_eos yet; the
        session gets the ids that follow, then tts_eos, as they come."""
        variant = self.info.variant
        if first_ids is None and (not text or not text.strip()):
            raise ValueError("text is empty")
        speaker = self.check_speaker(speaker)
        if variant == "custom_voice" and speaker is None:
            raise ValueError(f"a CustomVoice model needs a speaker; choose one of: {', '.join(self.speakers)}")
        if variant == "base" and voice is None:
            raise ValueError("a Base model speaks with a cloned voice: pass a voice profile")
        if variant != "base" and voice is not None:
            raise ValueError(f"voice profiles need a Base model; this one is {variant}")
        if variant == "voice_design" and not (instruct and instruct.strip()):
            raise ValueError("a VoiceDesign model needs an instruction describing the voice")
        if streaming_text is None:
            streaming_text = variant == "base"   # the reference wrapper's defaults
        lang_id = self.language_id(language, speaker)

        if first_ids is not None:
            if not streaming_text:
                raise ValueError("a text still being written is read while speaking: streaming_text")
            if voice is not None and voice.ref_codes is not None:
                raise ValueError("an in-context voice reads the whole text with its reference: give the text whole")
            role, body = self.tok.encode("<|im_start|>assistant\n"), list(first_ids)
        else:
            ids = self.tok.encode(f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n")
            role, body = ids[:3], ids[3:-5]
        if not body:
            raise ValueError("text has no tokens to speak")
        t = self.text
        c = self.codec
        plan = PromptPlan(body_tokens=len(body))

        # D: the instruction precedes everything (the reference drops it for 0.6B CustomVoice)
        if instruct and instruct.strip() and variant != "base" and not (variant == "custom_voice" and self.info.size == "0b6"):
            for i in self.tok.encode(f"<|im_start|>user\n{instruct}<|im_end|>\n"):
                plan.add(text=i)

        # A: codec tags: thinking form with a language, then speaker, pad, bos
        tags: list[tuple[int, np.ndarray | None]] = (
            [(c["nothink"], None), (c["think_bos"], None), (c["think_eos"], None)] if lang_id is None else
            [(c["think"], None), (c["think_bos"], None), (lang_id, None), (c["think_eos"], None)])
        if speaker is not None:
            tags.append((self.speakers[speaker].codec_id, None))
        elif voice is not None:
            x = np.asarray(voice.x_vector, np.float32).reshape(-1)
            if x.shape[0] != self.hidden:
                raise ValueError(f"voice x-vector has {x.shape[0]} values, this model needs {self.hidden}")
            tags.append((NONE, x))
        tags += [(c["pad"], None), (c["bos"], None)]

        # B: role prefix, then every tag but the last with tts_pad text (tts_bos on the last one)
        for i in role:
            plan.add(text=i)
        n = len(tags)
        for k, (codec, vector) in enumerate(tags[:-1]):
            plan.add(text=t["tts_bos"] if k == n - 2 else t["tts_pad"], codec=codec, vector=vector)

        if voice is not None and voice.ref_codes is not None:
            self._icl_rows(plan, voice, body, streaming_text)
        elif streaming_text:
            plan.add(text=body[0], codec=c["bos"])
            plan.trailing_text_ids = body[1:] + ([] if first_ids is not None else [t["tts_eos"]])
        else:
            for i in body:
                plan.add(text=i, codec=c["pad"])
            plan.add(text=t["tts_eos"], codec=c["pad"])
            plan.add(text=t["tts_pad"], codec=c["bos"])
            plan.trailing_text_ids = [t["tts_pad"]]
        return plan

    def _icl_rows(self, plan: PromptPlan, voice: Voice, body: list[int], streaming_text: bool) -> None:
        """C': reference transcript + target text against bos + the reference frames."""
        if not voice.ref_text:
            raise ValueError("in-context cloning needs the reference audio's transcript")
        codes = np.asarray(voice.ref_codes)
        if codes.ndim != 2 or codes.shape[1] != 16 or len(codes) == 0:
            raise ValueError(f"reference codes must have shape [frames, 16], got {list(codes.shape)}")
        t, c = self.text, self.codec
        ref = self.tok.encode(f"<|im_start|>assistant\n{voice.ref_text}<|im_end|>\n")[3:-2]
        te = ref + body + [t["tts_eos"]]
        cd = [(c["bos"], None)] + [(int(f[0]), [int(x) for x in f[1:]]) for f in codes]
        if not streaming_text:
            for i in te:
                plan.add(text=i, codec=c["pad"])
            for codec, frame in cd:
                plan.add(text=t["tts_pad"], codec=codec, frame=frame)
            plan.trailing_text_ids = [t["tts_pad"]]
        elif len(te) > len(cd):
            for i, (codec, frame) in zip(te, cd):
                plan.add(text=i, codec=codec, frame=frame)
            plan.trailing_text_ids = te[len(cd):]
        else:
            padded = te + [t["tts_pad"]] * (len(cd) - len(te))
            for i, (codec, frame) in zip(padded, cd):
                plan.add(text=i, codec=codec, frame=frame)
            plan.trailing_text_ids = [t["tts_pad"]]
