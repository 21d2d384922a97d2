"""Shared helpers: run the real CLI in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_cli(*args: str, env: dict | None = None, timeout: float = 1800) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ablation.cli", *args],
        capture_output=True, text=True, env=full_env, cwd=REPO, timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The CLI's contract for bad input: exit 2, one `error:` line (the last), no traceback.

    Progress lines ("[stacks] building ...") may precede it on stderr."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1] == errors[0]
    assert "Traceback" not in proc.stderr
    return errors[0]
