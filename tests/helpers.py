"""Helpers the tests share: run the real CLI in a subprocess, as a user would; fault-injection projects."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_cli(*args: str, env: dict | None = None, timeout: float = 1800) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ablation.cli", *args],
        capture_output=True, text=True, env=full_env, cwd=REPO, timeout=timeout,
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The CLI's contract for bad input: exit 2, one `error:` line (the last), no traceback.

    Progress lines ("[stacks] building ...") may precede it on stderr."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1] == errors[0]
    assert "Traceback" not in proc.stderr
    return errors[0]


FAULT_HARNESS = Path(__file__).parent / "fault_harness.py"
SIX_STACK = 'leg: "{leg}"\nplatform: cpu\npython: "3.11"\nengine: six\npackages:\n  six: "{version}"\n'
ONE_TOKEN = "{kind: throughput, num_prompts: 1, input_len: {min: 1, max: 1}, output_len: 1}"


def fault_project(root: Path, legs: dict[str, str], models: list[str]) -> Path:
    """A project for sweeps driven by the FAULT-INJECTION harness: real small stacks (six,
    built by uv), a model directory, and a table of `models` (YAML flow mappings)."""
    (root / "stacks").mkdir()
    (root / "patches").mkdir()
    for leg, version in legs.items():
        (root / "stacks" / f"{leg}.yaml").write_text(SIX_STACK.format(leg=leg, version=version))
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text("{}")
    (root / "table.yaml").write_text(
        f"name: faults\nworkloads:\n  mixed: {ONE_TOKEN}\n  other: {ONE_TOKEN}\nmodels:\n"
        + "".join(f"  - {m}\n" for m in models))
    return root


def project_argv(project: Path, *args: str) -> list[str]:
    """`ablation` with the project's stacks, patches and venvs, then args."""
    return [sys.executable, "-m", "ablation.cli", "--stacks-dir", str(project / "stacks"),
            "--patches-dir", str(project / "patches"), "--venv-root", str(project / "venvs"), *args]


def fault_env(project: Path, **fault_vars: str) -> dict:
    """Environment for a fault-injection sweep: its own host lock, FAULT_* knobs."""
    return {**os.environ, "ABLATION_LOCK_FILE": str(project / "host.lock"),
            **{f"FAULT_{k.upper()}": str(v) for k, v in fault_vars.items()}}
