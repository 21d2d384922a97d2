"""Read results.json files back: the comparer's only input.

A file that is missing pieces or is not JSON is never dropped silently: it
comes back as a warning naming the file, and its task counts as "not run".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ablation.results import layout
from ablation.results.record import TaskRecord


@dataclass(frozen=True)
class WorkloadResult:
    name: str
    kind: str  # throughput | latency
    value: float  # tok/s for throughput, ms/tok for latency
    raw: dict = field(compare=False, repr=False)


@dataclass(frozen=True)
class TaskResult:
    path: Path
    run_id: str
    leg: str
    variant: str | None
    model_id: str
    tp: int
    repeat: int
    attempt: int
    status: str
    cause: dict | None
    skip_reason: str | None
    scenario_sha256: str
    workloads: dict[str, WorkloadResult]
    engine: dict
    order: tuple[int, tuple[str, ...]]  # position in the scenario table, workload order
    record: TaskRecord = field(compare=False, repr=False)


@dataclass
class ResultSet:
    results: list[TaskResult]
    warnings: list[str]

    def legs(self) -> list[str]:
        return sort_legs({r.leg for r in self.results})

    def scenario_hashes(self) -> set[str]:
        return {r.scenario_sha256 for r in self.results}


def leg_sort_key(leg: str) -> tuple:
    """Version order: 0.9 < 0.18 < 0.26-cpu (numeric parts compared as numbers)."""
    parts = re.findall(r"\d+|[^\d.]+", leg)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts)


def sort_legs(legs) -> list[str]:
    return sorted(legs, key=leg_sort_key)


def parse_result(path: Path, data: dict) -> TaskResult:
    """The comparer's view of one record; the record itself parses and validates the file."""
    rec = TaskRecord.model_validate(data)
    workloads = {name: WorkloadResult(name, w["kind"], float(w["value"]), w) for name, w in rec.workloads.items()}
    return TaskResult(
        path=path, run_id=rec.run_id, leg=rec.leg, variant=rec.variant, model_id=rec.model_id, tp=rec.tp,
        repeat=rec.repeat, attempt=rec.attempt, status=rec.status, cause=rec.cause, skip_reason=rec.skip_reason,
        scenario_sha256=rec.scenario_table.sha256, workloads=workloads, engine=rec.engine,
        order=(rec.model_index, tuple(rec.model.spec.get("workloads", []))), record=rec,
    )


def _validation_summary(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first["loc"]) or "record"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"'{where}': {first['msg']}{more}"


def load_results(paths: list[Path]) -> ResultSet:
    """Results from files or directories (searched recursively)."""
    files: list[Path] = []
    warnings: list[str] = []
    for p in paths:
        if p.is_dir():
            files += layout.result_files(p)
        elif p.is_file():
            files.append(p)
        else:
            warnings.append(f"{p}: does not exist; counted as not run")
    results = []
    for f in files:
        try:
            data = json.loads(f.read_text())
            results.append(parse_result(f, data))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            warnings.append(f"{f}: not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc}); counted as not run")
        except ValidationError as exc:
            warnings.append(f"{f}: missing or malformed field {_validation_summary(exc)}; counted as not run")
        except (KeyError, TypeError, ValueError) as exc:
            warnings.append(f"{f}: missing or malformed field {exc}; counted as not run")
    return ResultSet(results, warnings)
