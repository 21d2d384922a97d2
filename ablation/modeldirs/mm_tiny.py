"""Tiny multimodal models for the CPU tests: real families, real token-id space, tiny dimensions, no weights.

Each generator writes config.json (the real vocab size and special-token ids, 2 layers, hidden 128,
head_dim 32 because vLLM's CPU attention refuses 16) plus the synthesized tokenizer and processor
files (mm_files). There are no weights: the scenario must say `load_format: dummy`.
"""

from __future__ import annotations

import json
from pathlib import Path

from ablation.modeldirs.mm_files import synthesize
from ablation.modeldirs.mm_tokens import QWEN_OMNI, QWEN_VL, WHISPER

GENERATORS = ("tiny-qwen2-vl", "tiny-whisper", "tiny-qwen2.5-omni")
H = 128  # hidden size; 4 heads -> head_dim 32
QWEN_VOCAB = 152064  # Qwen2-VL-7B / Qwen2.5-Omni-7B config vocab_size
WHISPER_VOCAB = 51866  # whisper-large-v3


def _qwen2_vl() -> dict:
    ids = QWEN_VL.ids()
    text = {
        "model_type": "qwen2_vl_text", "vocab_size": QWEN_VOCAB, "hidden_size": H, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},  # sums to head_dim / 2
        "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2,
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }
    return {
        "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl",
        "text_config": text,
        **{k: v for k, v in text.items() if k != "model_type"},  # flat copies: older loaders read the top level
        "vision_config": {
            "model_type": "qwen2_vl_vision", "depth": 2, "embed_dim": 64, "hidden_size": H,
            "hidden_act": "quick_gelu", "mlp_ratio": 2, "num_heads": 4, "in_channels": 3, "in_chans": 3,
            "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
        },
        "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"],
        "vision_token_id": ids["<|vision_pad|>"],
    }


def _qwen25_omni() -> dict:
    ids = QWEN_OMNI.ids()
    text = {
        "model_type": "qwen2_5_omni_text", "vocab_size": QWEN_VOCAB, "hidden_size": H, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},
        "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }
    thinker = {
        "model_type": "qwen2_5_omni_thinker", "text_config": text,
        "audio_config": {
            "model_type": "qwen2_5_omni_audio_encoder", "num_mel_bins": 128, "encoder_layers": 2,
            "encoder_attention_heads": 4, "encoder_ffn_dim": 256, "d_model": H, "max_source_positions": 1500,
            "n_window": 100, "output_dim": H, "activation_function": "gelu", "scale_embedding": False,
        },
        "vision_config": {
            "model_type": "qwen2_5_omni_vision_encoder", "depth": 2, "hidden_size": H, "intermediate_size": 256,
            "hidden_act": "silu", "num_heads": 4, "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2,
            "temporal_patch_size": 2, "window_size": 112, "out_hidden_size": H, "fullatt_block_indexes": [1],
        },
        "audio_token_index": ids["<|AUDIO|>"], "image_token_index": ids["<|IMAGE|>"],
        "video_token_index": ids["<|VIDEO|>"],
        "audio_start_token_id": ids["<|audio_bos|>"], "audio_end_token_id": ids["<|audio_eos|>"],
        "vision_start_token_id": ids["<|vision_bos|>"], "vision_end_token_id": ids["<|vision_eos|>"],
        "vision_token_id": ids["<|vision_pad|>"],
        "position_id_per_seconds": 25, "seconds_per_chunk": 2, "user_token_id": 872,
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"], "torch_dtype": "bfloat16",
    }
    return {"architectures": ["Qwen2_5OmniModel"], "model_type": "qwen2_5_omni", "enable_audio_output": False,
            "thinker_config": thinker, "torch_dtype": "bfloat16"}


def _whisper() -> dict:
    ids = WHISPER.ids()
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    return {
        "architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper",
        "vocab_size": WHISPER_VOCAB, "num_mel_bins": 128, "d_model": H,
        "encoder_layers": 2, "encoder_attention_heads": 4, "encoder_ffn_dim": 256,
        "decoder_layers": 2, "decoder_attention_heads": 4, "decoder_ffn_dim": 256,
        "max_source_positions": 1500, "max_target_positions": 448,
        "activation_function": "gelu", "scale_embedding": False, "is_encoder_decoder": True,
        "bos_token_id": eot, "eos_token_id": eot, "pad_token_id": eot, "decoder_start_token_id": sot,
        "begin_suppress_tokens": [220, eot], "suppress_tokens": [], "tie_word_embeddings": True,
        "torch_dtype": "float32", "use_cache": True,
    }


_CONFIGS = {"tiny-qwen2-vl": _qwen2_vl, "tiny-whisper": _whisper, "tiny-qwen2.5-omni": _qwen25_omni}


def make_tiny_multimodal(kind: str, out_dir: Path, seed: int = 0) -> None:
    """Write the tiny model `kind` into out_dir (replacing its files)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.iterdir():
        if stale.is_file():
            stale.unlink()
    config = _CONFIGS[kind]()
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    synthesize(out_dir, config, seed)
    (out_dir / "ABLATION_TINY_MODEL.json").write_text(
        json.dumps({"generator": f"ablation.modeldirs.mm_tiny:{kind}", "seed": seed, "weights": "none (dummy)"},
                   indent=2))
