"""Synthesize the tokenizer and processor files a multimodal model's HF processor needs, with no hub.

The tokenizer is a byte-level BPE trained here on a seeded synthetic corpus, padded with
unreachable filler entries up to the family's first special id, then the family's real
added tokens at their real ids (mm_tokens). The processor configs carry the published
models' patch, merge, pixel-budget and audio feature-extractor values. Everything is
derived from fixed inputs, so two machines write byte-identical files.
"""

from __future__ import annotations

import json
from pathlib import Path

from ablation.errors import AblationError
from ablation.modeldirs.mm_tokens import FAMILY_BY_MODEL_TYPE, WHISPER_LANGUAGES, TokenFamily
from ablation.modeldirs.tiny_llama import synthetic_corpus

SYNTHESIS_VERSION = 1  # bump when what is written changes: cached copies are keyed by it
TRAINED_VOCAB = 1024  # learned merges; the rest up to the first special id are filler entries

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# Qwen2-VL-7B-Instruct / Qwen2.5-VL / Qwen2.5-Omni-7B preprocessor_config.json: 14-px patches, 2x2 merge,
# 2-frame temporal patches, 56*56 .. 28*28*16384 pixels.
QWEN2_VISION = {
    "min_pixels": 3136, "max_pixels": 12845056,
    "size": {"shortest_edge": 3136, "longest_edge": 12845056},
    "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": CLIP_MEAN, "image_std": CLIP_STD,
    "do_resize": True, "do_rescale": True, "do_normalize": True, "do_convert_rgb": True,
    "rescale_factor": 0.00392156862745098, "resample": 3,
}
# Qwen3-VL: 16-px patches, 2x2 merge; images 65,536 .. 16,777,216 px, video 4,096 .. 25,165,824 px at 2 fps.
QWEN3_IMAGE = {
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "do_resize": True, "do_rescale": True, "do_normalize": True, "do_convert_rgb": True,
    "rescale_factor": 0.00392156862745098, "resample": 3,
}
QWEN3_VIDEO = {**QWEN3_IMAGE, "size": {"shortest_edge": 4096, "longest_edge": 25165824},
               "fps": 2, "min_frames": 4, "max_frames": 768, "do_sample_frames": True}


def _whisper_features(feature_size: int, chunk_s: int) -> dict:
    """WhisperFeatureExtractor at 16 kHz, 25 ms windows, 10 ms hops (large-v3: 128 mel bins, 30 s)."""
    return {
        "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": feature_size,
        "sampling_rate": 16000, "hop_length": 160, "chunk_length": chunk_s, "n_fft": 400,
        "n_samples": chunk_s * 16000, "nb_max_frames": chunk_s * 100,
        "padding_side": "right", "padding_value": 0.0, "return_attention_mask": False, "dither": 0.0,
    }


def _model_type(config: dict) -> str:
    return str(config.get("model_type", ""))


def family_of(config: dict) -> TokenFamily | None:
    return FAMILY_BY_MODEL_TYPE.get(_model_type(config))


def _vocab_size(config: dict) -> int | None:
    for holder in (config, config.get("text_config") or {}, (config.get("thinker_config") or {}).get("text_config") or {}):
        if holder.get("vocab_size"):
            return int(holder["vocab_size"])
    return None


def write_tokenizer(out: Path, family: TokenFamily, vocab_size: int, seed: int = 0) -> None:
    """tokenizer.json with `family`'s added tokens at their real ids; fails if the vocab cannot hold them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < family.end:
        raise AblationError(f"{out}: vocab_size {vocab_size} cannot hold {family.name}'s special ids "
                            f"(up to {family.end - 1})")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(synthetic_corpus(seed), trainer=trainers.BpeTrainer(
        vocab_size=TRAINED_VOCAB, special_tokens=[], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    n = len(vocab)
    # unreachable filler entries (no merge produces them) so that ids run contiguously to `first`
    for i in range(n, family.first):
        vocab[f"<fill{i}>"] = i
    data["added_tokens"] = [
        {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": s in family.specials}
        for s, i in family.ids().items()
    ]
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    check = Tokenizer.from_str(text)
    for s, i in family.ids().items():
        if check.token_to_id(s) != i:
            raise AblationError(f"synthesized tokenizer puts {s} at {check.token_to_id(s)}, not {i}")
    (out / "tokenizer.json").write_text(text)


def _qwen_tokenizer_config(family: TokenFamily, extra: dict | None = None) -> dict:
    cfg = {
        "tokenizer_class": "Qwen2TokenizerFast",
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
        "model_max_length": 131072, "clean_up_tokenization_spaces": False, "split_special_tokens": False,
        "errors": "replace",
    }
    if extra:
        cfg["extra_special_tokens"] = extra
    return cfg


def write_processor_files(out: Path, config: dict) -> list[str]:
    """The tokenizer_config and processor configs for `config`'s family; returns the files written."""
    mt = _model_type(config)
    files: dict[str, dict] = {}
    if mt in ("qwen2_vl", "qwen2_5_vl"):
        proc = "Qwen2VLProcessor" if mt == "qwen2_vl" else "Qwen2_5_VLProcessor"
        files["tokenizer_config.json"] = _qwen_tokenizer_config(FAMILY_BY_MODEL_TYPE[mt])
        files["preprocessor_config.json"] = {**QWEN2_VISION, "image_processor_type": "Qwen2VLImageProcessor",
                                             "processor_class": proc}
        files["video_preprocessor_config.json"] = {**QWEN2_VISION, "video_processor_type": "Qwen2VLVideoProcessor",
                                                   "processor_class": proc, "do_sample_frames": False}
    elif mt in ("qwen3_vl", "qwen3_vl_moe"):
        files["tokenizer_config.json"] = _qwen_tokenizer_config(FAMILY_BY_MODEL_TYPE[mt])
        files["preprocessor_config.json"] = {**QWEN3_IMAGE, "image_processor_type": "Qwen2VLImageProcessorFast",
                                             "processor_class": "Qwen3VLProcessor"}
        files["video_preprocessor_config.json"] = {**QWEN3_VIDEO, "video_processor_type": "Qwen3VLVideoProcessor",
                                                   "processor_class": "Qwen3VLProcessor"}
    elif mt in ("qwen2_5_omni", "qwen2_5_omni_thinker"):
        # transformers 5 reads these as tokenizer.image_token etc. (Qwen2_5OmniProcessor needs them)
        files["tokenizer_config.json"] = _qwen_tokenizer_config(FAMILY_BY_MODEL_TYPE[mt], {
            "image_token": "<|IMAGE|>", "audio_token": "<|AUDIO|>", "video_token": "<|VIDEO|>",
            "vision_bos_token": "<|vision_bos|>", "vision_eos_token": "<|vision_eos|>",
            "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>"})
        # one file for both: the omni processor's image processor and its WhisperFeatureExtractor (300 s window)
        files["preprocessor_config.json"] = {**QWEN2_VISION, "image_processor_type": "Qwen2VLImageProcessor",
                                             "processor_class": "Qwen2_5OmniProcessor",
                                             **_whisper_features(128, 300), "return_attention_mask": True}
        files["video_preprocessor_config.json"] = {**QWEN2_VISION, "video_processor_type": "Qwen2VLVideoProcessor",
                                                   "processor_class": "Qwen2_5OmniProcessor", "do_sample_frames": False}
    elif mt == "whisper":
        files["tokenizer_config.json"] = {
            "tokenizer_class": "WhisperTokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
            "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "model_max_length": 1024,
            "clean_up_tokenization_spaces": False, "errors": "replace", "add_prefix_space": False}
        files["preprocessor_config.json"] = {**_whisper_features(int(config.get("num_mel_bins", 128)), 30),
                                             "processor_class": "WhisperProcessor"}
    else:
        raise AblationError(f"no tokenizer/processor synthesis for model_type '{mt}'")
    for name, data in files.items():
        (out / name).write_text(json.dumps(data, indent=2, sort_keys=True))
    return sorted(files)


def whisper_generation_config(config: dict) -> dict:
    ids = FAMILY_BY_MODEL_TYPE["whisper"].ids()
    return {
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"], "decoder_start_token_id": ids["<|startoftranscript|>"],
        "no_timestamps_token_id": ids["<|notimestamps|>"], "max_length": int(config.get("max_target_positions", 448)),
        "lang_to_id": {f"<|{c}|>": ids[f"<|{c}|>"] for c in WHISPER_LANGUAGES},
        "task_to_id": {"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]},
        "is_multilingual": True,
    }


def synthesize(out: Path, config: dict, seed: int = 0) -> list[str]:
    """Write tokenizer + processor files for `config` (a known multimodal family) into `out`."""
    family = family_of(config)
    if family is None:
        raise AblationError(f"no tokenizer/processor synthesis for model_type '{_model_type(config)}'")
    vocab = _vocab_size(config)
    if vocab is None:
        raise AblationError(f"{out}: config.json states no vocab_size")
    write_tokenizer(out, family, vocab, seed)
    written = ["tokenizer.json", *write_processor_files(out, config)]
    if _model_type(config) == "whisper" and not (out / "generation_config.json").exists():
        (out / "generation_config.json").write_text(json.dumps(whisper_generation_config(config), indent=2))
        written.append("generation_config.json")
    return written
