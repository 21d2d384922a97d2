"""The executor against real process faults, using the FAULT-INJECTION harness.

Real subprocesses, real signals, real timeouts; only the engine is fake.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from helpers import FAULT_HARNESS

from ablation.envs.builder import LegEnv
from ablation.execution.local import RunContext, Task, run_task
from ablation.execution.machine import probe
from ablation.modeldirs.prepare import prepare_model
from ablation.spec.scenarios import load_scenarios
from ablation.util.jsonio import read_jsonl

MODES = ["ok", "segfault", "hang", "garbage", "failed-checks", "nan", "cutlass", "oom", "exit0-nothing", "env-dump",
         "unknown-schema"]


@pytest.fixture
def scenario_file(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    models = "\n".join(
        f"  - {{id: fault/{m}, source: {{path: model}}, workloads: [mixed]"
        + (", engine_env: {VLLM_ENABLE_V1_MULTIPROCESSING: '0'}" if m == "env-dump" else "") + "}" for m in MODES)
    path = tmp_path / "faults.yaml"
    path.write_text(
        "name: faults\ntimeout_s: 600\nworkloads:\n"
        "  mixed: {kind: throughput, num_prompts: 1, input_len: {min: 1, max: 1}, output_len: 1}\n"
        f"models:\n{models}\n")
    return load_scenarios(path)


def fake_env(tmp_path) -> LegEnv:
    """The runner's own interpreter stands in for a leg venv: the fault harness is stdlib only."""
    manifest = {"stack_file": "n/a", "stack_sha256": "0", "lock_sha256": "lock-of-" + str(tmp_path), "pins": {}, "packages": {},
                "excluded": {}, "patches": [], "python_version": "3", "variant_reason": None}
    return LegEnv("fault-leg", None, tmp_path / "venv", Path(sys.executable), manifest)


def run_mode(mode, tmp_path, scenario_file, timeout=None, stack_env=None):
    ctx = RunContext("r1", tmp_path / "results" / "r1", scenario_file, probe(), harness=FAULT_HARNESS,
                     timeout_override_s=timeout, log=lambda m: None)
    spec = scenario_file.table.model(f"fault/{mode}")
    task = Task("fault-leg", spec, 1, fake_env(tmp_path), prepare_model(spec, scenario_file, tmp_path),
                stack_env=stack_env or {})
    outcome = run_task(task, ctx)
    return outcome, json.loads(outcome.results_path.read_text()), ctx


@pytest.mark.parametrize("mode, cls, signature", [
    ("segfault", "runtime-crash", "killed by SIGSEGV"),
    ("garbage", "harness-error", "not valid JSON"),
    ("failed-checks", "check-failed", "output tokens 3 != requested 4"),
    ("nan", "harness-error", "non-finite value nan"),
    ("cutlass", "dependency", "AttributeError: module 'cutlass.cute.core' has no attribute 'ThrMma'"),
    ("oom", "oom", "torch.OutOfMemoryError: CUDA out of memory"),
    ("exit0-nothing", "harness-error", "harness wrote no results file"),
    ("unknown-schema", "harness-error", "unknown schema 'vllm-ablation/harness/99'"),
])
def test_fault_is_fail_with_attributed_cause(mode, cls, signature, tmp_path, scenario_file):
    outcome, record, ctx = run_mode(mode, tmp_path, scenario_file)
    assert outcome.status == record["status"] == "FAIL"
    assert record["cause"]["class"] == cls
    assert signature in record["cause"]["signature"]
    assert record["workloads"] == {}, "a failed task must not contribute numbers"
    ends = [e for e in read_jsonl(ctx.events) if e["event"] == "task_end"]
    assert ends[-1]["status"] == "FAIL" and ends[-1]["cause"]["class"] == cls


def test_ok_is_pass_and_records_hashes(tmp_path, scenario_file):
    outcome, record, _ = run_mode("ok", tmp_path, scenario_file)
    assert outcome.status == "PASS" and record["exit_code"] == 0
    assert record["scenario_table"]["sha256"] == scenario_file.sha256
    # the record names the environment that ran it (its venv and lock), not some other leg's
    env = fake_env(tmp_path)
    assert record["stack"]["venv"] == str(env.path) and record["stack"]["lock_sha256"] == env.lock_sha256
    assert record["workloads"]["mixed"]["value"] == 100.0 and record["harness"]["schema"] == "vllm-ablation/harness/1"


def test_timeout_kills_the_whole_process_group(tmp_path, scenario_file):
    started = time.monotonic()
    outcome, record, _ = run_mode("hang", tmp_path, scenario_file, timeout=3)
    assert time.monotonic() - started < 30
    assert record["status"] == "FAIL" and record["cause"]["class"] == "timeout" and record["timed_out"]
    child = int((outcome.results_path.parent / "child.pid").read_text())
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the worker-like grandchild died with the group


def test_rerun_is_a_new_attempt_never_an_overwrite(tmp_path, scenario_file):
    first, rec1, _ = run_mode("ok", tmp_path, scenario_file)
    second, rec2, _ = run_mode("segfault", tmp_path, scenario_file)  # different model dir
    third, rec3, _ = run_mode("ok", tmp_path, scenario_file)
    # the crash went to its own model's directory: a first attempt there, and it did not touch the first's files
    assert second.status == "FAIL" and rec2["cause"]["class"] == "runtime-crash"
    assert second.results_path.name == "results.json" and second.results_path.parent != first.results_path.parent
    assert first.results_path.name == "results.json" and third.results_path.name == "results.r1a2.json"
    assert json.loads(first.results_path.read_text()) == rec1
    assert rec3["attempt"] == 2 and (third.results_path.parent / "run.r1a2.log").is_file()


def test_stack_env_and_per_leg_caches_reach_the_workers(tmp_path, scenario_file, monkeypatch):
    """NVLink multicast must stay off in vLLM's workers too (the GPU machines require it), and
    compile/JIT caches must be the leg's own, not ~/.cache shared by every leg."""
    monkeypatch.setenv("PYTHONPATH", "/runner/only")
    multicast_off = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    outcome, record, ctx = run_mode("env-dump", tmp_path, scenario_file, stack_env=multicast_off)
    assert outcome.status == "PASS"
    dumped = json.loads((outcome.results_path.parent / "env.json").read_text())
    venv = str(tmp_path / "venv")
    for who in ("harness", "worker"):
        env = dumped[who]
        assert {k: env.get(k) for k in multicast_off} == multicast_off, who
        for var in ("VLLM_CACHE_ROOT", "FLASHINFER_WORKSPACE_BASE", "TRITON_CACHE_DIR", "CUDA_CACHE_PATH"):
            assert env[var].startswith(venv), (who, var, env[var])
        assert "PYTHONPATH" not in env, who
        assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0", who  # the table's engine_env, on every leg
