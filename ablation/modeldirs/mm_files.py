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


# Gemma 4 (google/gemma-4-*). transformers src/transformers/models/gemma4/convert_gemma4_weights.py, which made
# the published checkpoints, saves Gemma4Processor(image_seq_length=280) with Gemma4ImageProcessor(
# image_seq_length=280, max_soft_tokens=280, do_normalize=False, pooling_kernel_size=3), a default
# Gemma4VideoProcessor and a default Gemma4AudioFeatureExtractor (also on text+vision checkpoints such as
# 26B-A4B, whose audio_config is null). The values below are those, with the class defaults of transformers
# 5.24.0 image_processing_gemma4.py / video_processing_gemma4.py / feature_extraction_gemma4.py written out
# (16-px patches, 3x3 pooling, mean 0 / std 1, rescale 1/255, bicubic; video 70 soft tokens per frame,
# 32 frames; audio 128 mel bins at 16 kHz, 20 ms frames, 10 ms hops, 0..8 kHz); patch size, pooling kernel
# and the image budget are read from config.json's vision_config when it states them (26B-A4B: 16, 3, 280).
GEMMA4_IMAGE = {
    "image_processor_type": "Gemma4ImageProcessor",
    "do_convert_rgb": True, "do_resize": True, "do_rescale": True, "do_normalize": False,
    "image_mean": [0.0, 0.0, 0.0], "image_std": [1.0, 1.0, 1.0],
    "rescale_factor": 0.00392156862745098, "resample": 3,
    "patch_size": 16, "pooling_kernel_size": 3, "max_soft_tokens": 280, "image_seq_length": 280,
}
GEMMA4_VIDEO = {
    "video_processor_type": "Gemma4VideoProcessor",
    "do_convert_rgb": True, "do_resize": True, "do_rescale": True, "do_normalize": True,
    "image_mean": [0.0, 0.0, 0.0], "image_std": [1.0, 1.0, 1.0],
    "rescale_factor": 0.00392156862745098, "resample": 3,
    "patch_size": 16, "pooling_kernel_size": 3, "max_soft_tokens": 70,
    "num_frames": 32, "do_sample_frames": True, "return_metadata": False,
}
GEMMA4_AUDIO = {
    "feature_extractor_type": "Gemma4AudioFeatureExtractor",
    "feature_size": 128, "sampling_rate": 16000, "padding_value": 0.0, "padding_side": "right",
    "return_attention_mask": True, "frame_length_ms": 20.0, "hop_length_ms": 10.0,
    "min_frequency": 0.0, "max_frequency": 8000.0, "preemphasis": 0.0, "preemphasis_htk_flavor": True,
    "fft_overdrive": False, "dither": 0.0, "input_scale_factor": 1.0, "mel_floor": 0.001,
    "per_bin_mean": None, "per_bin_stddev": None,
}
# The published tokenizer_config.json's named tokens (the converter's extra_special_tokens; only those whose
# ids mm_tokens.GEMMA4 establishes). Gemma4Processor reads image/boi/eoi and audio/boa/eoa from the tokenizer
# and adds <|video|> itself.
GEMMA4_NAMED_TOKENS = {
    "image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
    "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>",
    "sot_token": "<|turn>", "eot_token": "<turn|>",
}


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


def config_int(config: dict, dotted: str, default: int | None) -> int | None:
    """The positive integer at `dotted` ('vision_config.patch_size') of a config.json, `default` where
    it is absent or null; anything else is one error line naming the field (a config is user input)."""
    value: object = config
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AblationError(f"config.json: field '{dotted}': expected a positive integer, got {value!r:.60}")
    return value


def _vocab_size(config: dict) -> int | None:
    for dotted in ("vocab_size", "text_config.vocab_size", "thinker_config.text_config.vocab_size"):
        if (vocab := config_int(config, dotted, None)) is not None:
            return vocab
    return None


def write_tokenizer(out: Path, family: TokenFamily, vocab_size: int, seed: int = 0) -> None:
    """tokenizer.json with `family`'s added tokens at their real ids; fails if the vocab cannot hold them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < family.end:
        raise AblationError(f"config.json: field 'vocab_size': {vocab_size} cannot hold {family.name}'s special ids "
                            f"(up to {family.end - 1})")
    if family.style == "spm-byte-fallback":
        _write_text_checked(out, family, _spm_tokenizer_data(family, vocab_size, seed))
        return
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
    _write_text_checked(out, family, data)


def _write_text_checked(out: Path, family: TokenFamily, data: dict) -> None:
    from tokenizers import Tokenizer

    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    check = Tokenizer.from_str(text)
    for s, i in family.ids().items():
        if check.token_to_id(s) != i:
            raise AblationError(f"synthesized tokenizer puts {s} at {check.token_to_id(s)}, not {i}")
    (out / "tokenizer.json").write_text(text)


def _spm_tokenizer_data(family: TokenFamily, vocab_size: int, seed: int) -> dict:
    """Gemma's tokenizer shape: a SentencePiece-converted BPE (spaces as U+2581, byte fallback to the 256
    <0xNN> pieces, <unk> for the rest), the pipeline transformers' GemmaTokenizer rebuilds from the file's
    vocab and merges. Merges are learned on the synthetic corpus; the learned pieces and the byte pieces take
    the free ids from 0 up, skipping the family's real ids; with `fill_to_vocab` unreachable filler entries
    take every id left below vocab_size, so every id the model can emit decodes, as in the published
    262,144-entry vocabulary."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    # training only: merges stay inside words (GemmaTokenizer's own pre-tokenizer is set below)
    tok.pre_tokenizer = pre_tokenizers.Split("\u2581", "merged_with_next")
    tok.train_from_iterator(synthetic_corpus(seed), trainer=trainers.BpeTrainer(
        vocab_size=TRAINED_VOCAB, special_tokens=[], show_progress=False))
    data = json.loads(tok.to_str())
    learned = [t for t, _ in sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])]
    pieces = [f"<0x{b:02X}>" for b in range(256)] + learned
    reserved = family.ids()
    taken = set(reserved.values())
    limit = vocab_size if family.fill_to_vocab else family.end
    free = (i for i in range(limit) if i not in taken)
    vocab: dict[str, int] = {}
    for piece in pieces:
        i = next(free, None)
        if i is None:
            raise AblationError(f"config.json: field 'vocab_size': {vocab_size} cannot hold {family.name}'s tokens and "
                                "the learned pieces")
        vocab[piece] = i
    for i in free:
        vocab[f"<fill{i}>"] = i
    vocab.update(reserved)
    data["model"]["vocab"] = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    # the pipeline GemmaTokenizer (transformers 5) builds, so the file alone and the class agree
    data["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    data["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                             "invert": False}
    data["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    data["added_tokens"] = [
        {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": s in family.specials}
        for s, i in sorted(reserved.items(), key=lambda kv: kv[1])
    ]
    return data


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


def _gemma4_files(config: dict) -> dict[str, dict]:
    patch = config_int(config, "vision_config.patch_size", 16)
    pool = config_int(config, "vision_config.pooling_kernel_size", 3)
    budget = config_int(config, "vision_soft_tokens_per_image",
                        config_int(config, "vision_config.default_output_length", 280))
    image = {**GEMMA4_IMAGE, "patch_size": patch, "pooling_kernel_size": pool, "max_soft_tokens": budget,
             "image_seq_length": budget}
    video = {**GEMMA4_VIDEO, "patch_size": patch, "pooling_kernel_size": pool}
    tokenizer = {
        "tokenizer_class": "GemmaTokenizer", "processor_class": "Gemma4Processor",
        "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
        "mask_token": "<mask>", "padding_side": "left", "clean_up_tokenization_spaces": False,
        "extra_special_tokens": dict(GEMMA4_NAMED_TOKENS),
    }
    # transformers 5 reads the three sub-processors from processor_config.json (the published layout)
    processor = {"processor_class": "Gemma4Processor", "image_seq_length": budget, "audio_seq_length": 750,
                 "audio_ms_per_token": 40, "image_processor": image, "video_processor": video,
                 "feature_extractor": GEMMA4_AUDIO}
    return {"tokenizer_config.json": tokenizer, "processor_config.json": processor}


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
        files["preprocessor_config.json"] = {**_whisper_features(config_int(config, "num_mel_bins", 128), 30),
                                             "processor_class": "WhisperProcessor"}
    elif mt == "gemma4":
        files.update(_gemma4_files(config))
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
        "no_timestamps_token_id": ids["<|notimestamps|>"], "max_length": config_int(config, "max_target_positions", 448),
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
        raise AblationError("config.json: field 'vocab_size': absent (nor in text_config or thinker_config.text_config)")
    write_tokenizer(out, family, vocab, seed)
    written = ["tokenizer.json", *write_processor_files(out, config)]
    if _model_type(config) == "whisper" and not (out / "generation_config.json").exists():
        (out / "generation_config.json").write_text(json.dumps(whisper_generation_config(config), indent=2))
        written.append("generation_config.json")
    return written
