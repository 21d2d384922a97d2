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

# Gemma 4 (google/gemma-4-*; model_type gemma4). Its ids are not contiguous. Sources:
#  - transformers src/transformers/models/gemma4/convert_gemma4_weights.py (the script that made the published
#    checkpoints): builds GemmaTokenizer(extra_special_tokens={"image_token": "<|image|>", "boi_token":
#    "<|image>", "eoi_token": "<image|>", "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token":
#    "<audio|>", "sot_token": "<|turn>", "eot_token": "<turn|>", ...}) from the 262,144-piece SentencePiece
#    model, says "<|image> (255999) and <|audio> (256000) ... <image|> (258882) and <audio|> (258883)", and
#    writes config.image_token_id / boi / eoi / audio / boa / eoa from tokenizer.convert_tokens_to_ids of
#    those names -- so each name below and the gemma-4 config.json id of the same role are one pair
#    (image_token_id 258880, audio_token_id 258881, boi 255999, eoi 258882, boa 256000, eoa 258883).
#    transformers 5.24.0 configuration_gemma4.py Gemma4Config has the same ids as its defaults (boi 255_999,
#    eoi 258_882, image 258_880, video 258_884, boa 256_000, eoa 258_883, audio 258_881).
#  - <|video|> at 258884: transformers 5.24.0 processing_gemma4.py adds "<|video|>" to the tokenizer as the
#    video token and takes its id from the tokenizer; config.json's video_token_id is 258884 (vLLM 0.29
#    gemma4_mm.py expands videos as "<boi><|video|>*N<eoi>" with processor.video_token_id).
#  - 0..4 <pad> <eos> <bos> <unk> <mask>: transformers 5.24.0 models/gemma/tokenization_gemma.py
#    (GemmaTokenizer's vocab order pad, eos, bos, unk, mask); config.json agrees (pad 0, eos 1, bos 2).
#  - 106 <turn|>, 105 <|turn>: the converter sets config.eos_token_id = [1, 106] for instruction-tuned
#    models ("<eos>" and the end-of-turn token) and generation eos = [eos, eot_token <turn|>, ...]. The
#    number 106 for "<turn|>" (and 105 for "<|turn>") is not written in transformers' or vLLM's code; it is
#    what independent projects pin against the real vocabulary (e.g. waybarrios/vllm-mlx
#    tests/test_output_router.py "turn_start=105,  # <|turn>" / "turn_end=106,  # <turn|>").
# Not synthesized (ids not established from primary sources): <|channel>, <channel|>, <|think|>, the tool
# tokens and <|"|>; third-party tests place them at 98..101 and 46..52.
GEMMA4_SPECIALS = (
    ("<pad>", 0), ("<eos>", 1), ("<bos>", 2), ("<unk>", 3), ("<mask>", 4),
    ("<|turn>", 105), ("<turn|>", 106),
    ("<|image>", 255999), ("<|audio>", 256000),
    ("<|image|>", 258880), ("<|audio|>", 258881), ("<image|>", 258882), ("<audio|>", 258883), ("<|video|>", 258884),
)


@dataclass(frozen=True)
class TokenFamily:
    """A model family's added tokens: `specials` from id `first` on, then `plain` (non-special added tokens).

    A family whose ids are not contiguous (Gemma 4) names them in `fixed_ids`, one per token of
    `specials + plain`; `fill_to_vocab` then asks the tokenizer to hold an entry at every id of the
    model's vocab, as the published one does. `style` is the tokenizer pipeline the family's
    tokenizer class rebuilds: "byte-level" (GPT-2/Qwen/Whisper) or "spm-byte-fallback" (Gemma's
    SentencePiece-converted BPE: spaces as U+2581, unknown characters as <0xNN> byte tokens).
    """

    name: str
    first: int
    specials: tuple[str, ...]
    plain: tuple[str, ...] = ()
    fixed_ids: tuple[int, ...] = ()
    fill_to_vocab: bool = False
    style: str = "byte-level"

    def ids(self) -> dict[str, int]:
        names = self.specials + self.plain
        if self.fixed_ids:
            if len(self.fixed_ids) != len(names) or len(set(self.fixed_ids)) != len(names):
                raise ValueError(f"{self.name}: fixed_ids must name one distinct id per token")
            return dict(zip(names, self.fixed_ids))
        return {s: self.first + i for i, s in enumerate(names)}

    @property
    def end(self) -> int:
        """One past the last added id: the smallest vocab that holds them."""
        if self.fixed_ids:
            return max(self.fixed_ids) + 1
        return self.first + len(self.specials) + len(self.plain)


QWEN_VL = TokenFamily("qwen-vl", QWEN_FIRST_SPECIAL, QWEN_VL_SPECIALS)
QWEN_OMNI = TokenFamily("qwen-omni", QWEN_FIRST_SPECIAL, QWEN_OMNI_SPECIALS)
WHISPER = TokenFamily("whisper", WHISPER_FIRST_SPECIAL, WHISPER_SPECIALS, WHISPER_TIMESTAMPS)
GEMMA4 = TokenFamily("gemma4", 0, tuple(s for s, _ in GEMMA4_SPECIALS), fixed_ids=tuple(i for _, i in GEMMA4_SPECIALS),
                     fill_to_vocab=True, style="spm-byte-fallback")

# config.json model_type -> token family
FAMILY_BY_MODEL_TYPE = {
    "qwen2_vl": QWEN_VL,
    "qwen2_5_vl": QWEN_VL,
    "qwen3_vl": QWEN_VL,
    "qwen3_vl_moe": QWEN_VL,
    "qwen2_5_omni": QWEN_OMNI,
    "qwen2_5_omni_thinker": QWEN_OMNI,
    "whisper": WHISPER,
    "gemma4": GEMMA4,
}

assert WHISPER.ids()["<|startoftranscript|>"] == 50258 and WHISPER.ids()["<|transcribe|>"] == 50360
assert WHISPER.ids()["<|notimestamps|>"] == 50364 and WHISPER.end == 51866
assert QWEN_VL.ids()["<|vision_start|>"] == 151652 and QWEN_VL.ids()["<|image_pad|>"] == 151655
assert QWEN_VL.ids()["<|video_pad|>"] == 151656 and QWEN_OMNI.ids()["<|AUDIO|>"] == 151646
assert GEMMA4.ids()["<|image|>"] == 258880 and GEMMA4.ids()["<|video|>"] == 258884 and GEMMA4.ids()["<turn|>"] == 106
assert GEMMA4.end == 258885
