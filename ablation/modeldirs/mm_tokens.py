"""The real special tokens of each multimodal model family, at their real ids.

Facts of the published tokenizers (Qwen2 family: 151,643 regular tokens, then the added
tokens below in this order; Whisper large-v3: 50,257 regular tokens, then <|endoftext|>,
<|startoftranscript|>, 100 language tokens, the task tokens and 1,501 timestamp tokens).
A synthesized tokenizer holds these strings at these ids, so token-id prompts, config ids
and processor look-ups agree with the real model's.
"""

from __future__ import annotations

from dataclasses import dataclass

# Qwen2 / Qwen2-VL / Qwen2.5-VL / Qwen3-VL: ids 151643.. in this order.
QWEN_VL_SPECIALS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>",
    "<|quad_start|>", "<|quad_end|>",
    "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
)
# Qwen2.5-Omni: the same ids, renamed (151646 <|AUDIO|>, 151652 <|vision_bos|>, 151655 <|IMAGE|> ...).
QWEN_OMNI_SPECIALS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>", "<|box_end|>",
    "<|quad_start|>", "<|quad_end|>",
    "<|vision_bos|>", "<|vision_eos|>", "<|vision_pad|>", "<|IMAGE|>", "<|VIDEO|>",
)
QWEN_FIRST_SPECIAL = 151643

# Whisper large-v3's 100 languages, in token order (50259 = <|en|> ... 50358 = <|yue|>).
WHISPER_LANGUAGES = (
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id",
    "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg",
    "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br",
    "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so",
    "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt",
    "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue",
)
WHISPER_SPECIALS = (
    ("<|endoftext|>", "<|startoftranscript|>")
    + tuple(f"<|{c}|>" for c in WHISPER_LANGUAGES)
    + ("<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>")
)
WHISPER_FIRST_SPECIAL = 50257
WHISPER_TIMESTAMPS = tuple(f"<|{i * 0.02:.2f}|>" for i in range(1501))  # <|0.00|> .. <|30.00|>


@dataclass(frozen=True)
class TokenFamily:
    """A model family's added tokens: `specials` from id `first` on, then `plain` (non-special added tokens)."""

    name: str
    first: int
    specials: tuple[str, ...]
    plain: tuple[str, ...] = ()

    def ids(self) -> dict[str, int]:
        return {s: self.first + i for i, s in enumerate(self.specials + self.plain)}

    @property
    def end(self) -> int:
        """One past the last added id: the smallest vocab that holds them."""
        return self.first + len(self.specials) + len(self.plain)


QWEN_VL = TokenFamily("qwen-vl", QWEN_FIRST_SPECIAL, QWEN_VL_SPECIALS)
QWEN_OMNI = TokenFamily("qwen-omni", QWEN_FIRST_SPECIAL, QWEN_OMNI_SPECIALS)
WHISPER = TokenFamily("whisper", WHISPER_FIRST_SPECIAL, WHISPER_SPECIALS, WHISPER_TIMESTAMPS)

# config.json model_type -> token family
FAMILY_BY_MODEL_TYPE = {
    "qwen2_vl": QWEN_VL,
    "qwen2_5_vl": QWEN_VL,
    "qwen3_vl": QWEN_VL,
    "qwen3_vl_moe": QWEN_VL,
    "qwen2_5_omni": QWEN_OMNI,
    "qwen2_5_omni_thinker": QWEN_OMNI,
    "whisper": WHISPER,
}

assert WHISPER.ids()["<|startoftranscript|>"] == 50258 and WHISPER.ids()["<|transcribe|>"] == 50360
assert WHISPER.ids()["<|notimestamps|>"] == 50364 and WHISPER.end == 51866
assert QWEN_VL.ids()["<|vision_start|>"] == 151652 and QWEN_VL.ids()["<|image_pad|>"] == 151655
assert QWEN_VL.ids()["<|video_pad|>"] == 151656 and QWEN_OMNI.ids()["<|AUDIO|>"] == 151646
