"""Where a run's files live. One place, so the executor and the comparer agree.

results/<run-id>/
  MANIFEST.json                     machine, legs (locks), scenario table hash
  run.jsonl                         append-only event stream of the run
  <leg>/<model>/results.json        repeat 1, attempt 1
  <leg>/<model>/run.log
  <leg>/<model>/results.r2a1.json   repeat 2 (or a later attempt): never overwrites
  <leg>/<model>/run.r2a1.log
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

EVENTS = "run.jsonl"
MANIFEST = "MANIFEST.json"
_SUFFIXED = re.compile(r"^(results|run|task)\.r(\d+)a(\d+)\.(json|log)$")


@dataclass(frozen=True)
class TaskFiles:
    directory: Path
    repeat: int
    attempt: int

    def _name(self, stem: str, ext: str) -> str:
        if self.repeat == 1 and self.attempt == 1:
            return f"{stem}.{ext}"
        return f"{stem}.r{self.repeat}a{self.attempt}.{ext}"

    @property
    def results(self) -> Path:
        return self.directory / self._name("results", "json")

    @property
    def log(self) -> Path:
        return self.directory / self._name("run", "log")

    @property
    def task(self) -> Path:
        return self.directory / self._name("task", "json")

    @property
    def harness_output(self) -> Path:
        return self.directory / f".harness.r{self.repeat}a{self.attempt}.json"


def events_file(run_dir: Path) -> Path:
    return run_dir / EVENTS


def manifest_file(run_dir: Path) -> Path:
    return run_dir / MANIFEST


def task_dir(run_dir: Path, leg: str, model_slug: str) -> Path:
    return run_dir / leg / model_slug


def attempts_used(directory: Path, repeat: int) -> int:
    """Highest attempt number that left any file for this repeat (0 if none)."""
    highest = 0
    if not directory.is_dir():
        return 0
    for p in directory.iterdir():
        if p.name in ("results.json", "run.log", "task.json"):
            if repeat == 1:
                highest = max(highest, 1)
            continue
        m = _SUFFIXED.match(p.name)
        if m and int(m.group(2)) == repeat:
            highest = max(highest, int(m.group(3)))
    return highest


def next_task_files(run_dir: Path, leg: str, model_slug: str, repeat: int) -> TaskFiles:
    d = task_dir(run_dir, leg, model_slug)
    return TaskFiles(d, repeat, attempts_used(d, repeat) + 1)


def result_files(root: Path) -> list[Path]:
    """Every results file under a directory (a run, or a tree of runs)."""
    return sorted(p for p in root.rglob("results*.json") if p.name == "results.json" or _SUFFIXED.match(p.name))
