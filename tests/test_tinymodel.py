"""The locally generated model: deterministic, valid safetensors, a working tokenizer."""

from __future__ import annotations

import json
import struct

from tokenizers import Tokenizer

from ablation.modeldirs.tiny_llama import TinyLlamaShape, make_tiny_llama


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = make_tiny_llama(tmp_path / "a", seed=0)
    b = make_tiny_llama(tmp_path / "b", seed=0)
    c = make_tiny_llama(tmp_path / "c", seed=1)
    assert a == b and a != c


def test_checkpoint_is_a_valid_llama(tmp_path):
    shape = TinyLlamaShape()
    make_tiny_llama(tmp_path, seed=0, shape=shape)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["num_hidden_layers"] == 2
    raw = (tmp_path / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data_len = len(raw) - 8 - n
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    assert max(ends) == data_len
    emb = header["model.embed_tokens.weight"]
    assert emb["dtype"] == "BF16" and emb["shape"] == [shape.vocab_size, shape.hidden_size]
    assert len([k for k in header if k.startswith("model.layers.1.")]) == 9


def test_tokenizer_roundtrips_and_fits_the_vocab(tmp_path):
    make_tiny_llama(tmp_path, seed=0)
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    text = "kalo mine raturu senvel."
    ids = tok.encode(text).ids
    assert tok.decode(ids) == text
    assert max(ids) < TinyLlamaShape().vocab_size and tok.get_vocab_size() <= TinyLlamaShape().vocab_size
