"""docs/measurements/seed-report-runs.yaml: issue 28's combined report names every kept GPU run, or
says why not. The Llama 29/26 run was once left out of that report for two sessions unnoticed; this
test fails on any folder of GPU results in neither list."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from helpers import REPO

MEASUREMENTS = REPO / "docs" / "measurements"
LISTED = yaml.safe_load((MEASUREMENTS / "seed-report-runs.yaml").read_text())


def gpu_results() -> list[Path]:
    """Every results.json under docs/measurements that a GPU machine recorded."""
    out = []
    for f in MEASUREMENTS.rglob("results.json"):
        machine = json.loads(f.read_text()).get("machine") or {}
        if machine.get("gpus"):
            out.append(f)
    return out


def test_every_gpu_run_kept_is_in_the_report_or_says_why_not():
    runs = [REPO / r for r in LISTED["runs"]]
    others = {REPO / r: why for r, why in LISTED["not_included"].items()}
    for folder in [*runs, *others]:
        assert folder.is_dir() and any(folder.rglob("results.json")), f"{folder}: no results there"
    assert all(why.strip() for why in others.values())
    found = gpu_results()
    assert len(found) >= 30  # the H200/H100 runs of sessions 1-8
    placed = [f for f in found if any(f.is_relative_to(r) for r in runs)]
    excused = [f for f in found if any(f.is_relative_to(r) for r in others)]
    unplaced = [str(f.relative_to(REPO)) for f in found if f not in placed and f not in excused]
    assert not unplaced, f"GPU results in neither list of seed-report-runs.yaml: {unplaced}"
    assert not set(placed) & set(excused)
    assert not [r for r in runs if not any(f.is_relative_to(r) for f in found)], "a listed run holds no GPU result"


def test_make_seed_report_writes_the_seed_rows_over_every_listed_run(tmp_path):
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "seed-report"), str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "report.json").read_text())
    machines = {g["machine"] for g in data["groups"]}
    assert "NVIDIA H200 [766a72fb]" in machines  # the Llama 29/26 run
    rows = data["tables"]["seed-rows"]["rows"]
    assert len(rows) == 62
    md = (out / "REPORT.md").read_text()
    assert "/work/" not in md and str(REPO) not in md  # paths from the repository root, as the README's command


def test_only_the_newest_combined_report_keeps_its_html_json_and_plots():
    """Every device call carries the working tree, so each full combined report (about 1.3 MiB)
    made every later session's parts smaller; older ones keep REPORT.md only (docs/air-gapped-gpu.md)."""
    combined = sorted(p.parent for p in MEASUREMENTS.glob("*/report/REPORT.md")
                      if "### Seed rows: measured per comparison" in p.read_text())
    assert len(combined) >= 6  # sessions 9-15
    full = [d for d in combined if (d / "index.html").exists() or (d / "plots").exists() or (d / "report.json").exists()]
    assert full == combined[-1:], f"prune all but the newest: {[str(d.relative_to(REPO)) for d in full]}"
