"""Generate a tiny Llama checkpoint and tokenizer locally, with no hub access.

The model is a real `LlamaForCausalLM` checkpoint (config.json + safetensors +
a byte-level BPE tokenizer trained here on a seeded synthetic corpus), so every
vLLM leg loads it through its normal loading path. Everything is derived from
a seed, so two machines that run the generator produce byte-identical files;
the content hash is recorded in every result as the model's identity.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

from ablation.errors import AblationError


@dataclass(frozen=True)
class TinyLlamaShape:
    """Dimensions of the generated model; small enough to build in a second."""

    hidden_size: int = 128
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    vocab_size: int = 1024
    max_position_embeddings: int = 4096


SPECIAL_TOKENS = ("<unk>", "<s>", "</s>")
MARKER = "ABLATION_TINY_MODEL.json"  # written last: the directory is a complete model of ours
# Every file the generator writes, and the only ones it ever replaces or removes.
OWN_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
             "tokenizer_config.json", "special_tokens_map.json", MARKER)


def _config(shape: TinyLlamaShape) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_act": "silu",
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.num_hidden_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "head_dim": shape.hidden_size // shape.num_attention_heads,
        "vocab_size": shape.vocab_size,
        "max_position_embeddings": shape.max_position_embeddings,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "initializer_range": 0.02,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }


def _tensor_shapes(shape: TinyLlamaShape) -> dict[str, tuple[int, ...]]:
    h, i, v = shape.hidden_size, shape.intermediate_size, shape.vocab_size
    head_dim = h // shape.num_attention_heads
    kv = shape.num_key_value_heads * head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (v, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (v, h),
    }
    for layer in range(shape.num_hidden_layers):
        p = f"model.layers.{layer}."
        shapes.update(
            {
                p + "input_layernorm.weight": (h,),
                p + "post_attention_layernorm.weight": (h,),
                p + "self_attn.q_proj.weight": (h, h),
                p + "self_attn.k_proj.weight": (kv, h),
                p + "self_attn.v_proj.weight": (kv, h),
                p + "self_attn.o_proj.weight": (h, h),
                p + "mlp.gate_proj.weight": (i, h),
                p + "mlp.up_proj.weight": (i, h),
                p + "mlp.down_proj.weight": (h, i),
            }
        )
    return shapes


def _bf16_bytes(values: list[float]) -> bytes:
    """Pack floats as bfloat16 (the top half of each float32, round-to-nearest-even)."""
    raw = struct.pack(f"<{len(values)}f", *values)
    words = struct.unpack(f"<{len(values)}I", raw)
    halves = [((w + 0x7FFF + ((w >> 16) & 1)) >> 16) & 0xFFFF for w in words]
    return struct.pack(f"<{len(halves)}H", *halves)


def write_safetensors(path: Path, tensors: dict[str, tuple[tuple[int, ...], bytes]]) -> None:
    """Write the safetensors format by hand: u64 header length, JSON header, data."""
    header: dict[str, dict] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in sorted(tensors):
        shape, data = tensors[name]
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the format asks for 8-byte alignment of the data
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name in sorted(tensors):
            f.write(tensors[name][1])


def _weights(shape: TinyLlamaShape, seed: int) -> dict[str, tuple[tuple[int, ...], bytes]]:
    rng = random.Random(seed)
    out = {}
    for name, dims in sorted(_tensor_shapes(shape).items()):
        n = 1
        for d in dims:
            n *= d
        if name.endswith("norm.weight"):
            values = [1.0] * n
        else:
            values = [rng.gauss(0.0, 0.02) for _ in range(n)]
        out[name] = (dims, _bf16_bytes(values))
    return out


def synthetic_corpus(seed: int, lines: int = 4000) -> list[str]:
    """Seeded pseudo-English text: enough structure for BPE to learn merges."""
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ra", "tu", "sen", "dor", "vel", "pri", "qua", "ish", "th", "er", "on"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(600)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 20))) + "." for _ in range(lines)]


def _train_tokenizer(out_dir: Path, shape: TinyLlamaShape, seed: int) -> None:
    # Imported here: only this command needs it, and it keeps `ablation --help` fast.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=shape.vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(synthetic_corpus(seed), trainer=trainer)
    if tok.get_vocab_size() > shape.vocab_size:
        raise AblationError(f"tokenizer vocab {tok.get_vocab_size()} exceeds model vocab {shape.vocab_size}")
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": shape.max_position_embeddings,
                "clean_up_tokenization_spaces": False,
            },
            indent=2,
        )
    )
    (out_dir / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, indent=2)
    )


def model_digest(model_dir: Path) -> str:
    """sha256 over every file's name and content: the model's identity in results."""
    h = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        h.update(path.relative_to(model_dir).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def _check_target(out_dir: Path, tool_owned: bool) -> None:
    """The generator writes into a new or empty directory, or one it wrote before (its marker, and
    no file of anyone else's). Anything else is refused: it never deletes a file it did not write.
    `tool_owned`: a folder of the tool's own models root, where a generator killed mid-write may
    have left some of its files and no marker."""
    if out_dir.exists() and not out_dir.is_dir():
        raise AblationError(f"{out_dir}: is a file; give a directory for the model")
    if not out_dir.is_dir():
        return
    names = sorted(p.name for p in out_dir.iterdir())
    if not names:
        return
    foreign = [n for n in names if n not in OWN_FILES]
    if not (out_dir / MARKER).is_file() and not (tool_owned and not foreign):
        raise AblationError(f"{out_dir}: not empty and holds no {MARKER}, so make-tiny-model did not write it; "
                            "give a new or empty directory (nothing was changed)")
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise AblationError(f"{out_dir}: holds files make-tiny-model did not write ({shown}); move them away "
                            "or give another directory (nothing was changed)")


def make_tiny_llama(out_dir: Path, seed: int = 0, shape: TinyLlamaShape = TinyLlamaShape(),
                    tool_owned: bool = False) -> str:
    """Write the checkpoint into out_dir and return its digest. The files are made in a staging
    folder beside it and moved in (the marker last); only the generator's own files are replaced."""
    _check_target(out_dir, tool_owned)
    target = out_dir.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tiny-model-tmp-{os.getpid()}"
    staging.mkdir()
    try:
        (staging / "config.json").write_text(json.dumps(_config(shape), indent=2, sort_keys=True))
        (staging / "generation_config.json").write_text(
            json.dumps({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}, indent=2)
        )
        write_safetensors(staging / "model.safetensors", _weights(shape, seed))
        _train_tokenizer(staging, shape, seed)
        (staging / MARKER).write_text(
            json.dumps({"generator": "ablation.tinymodel", "seed": seed, "shape": asdict(shape)}, indent=2)
        )
        target.mkdir(exist_ok=True)
        (target / MARKER).unlink(missing_ok=True)  # until the new one is in, the directory is incomplete
        for name in OWN_FILES:  # the marker last: a directory with it is complete
            if (staging / name).is_file():
                os.replace(staging / name, target / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # the staging folder this call made, nothing else
    return model_digest(target)
