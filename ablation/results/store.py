"""Read results.json files back: the comparer's only input.

A file that is not a usable record (not JSON, an unknown schema, a malformed field, a value that
is not a finite positive number, a task that never finished, a record in another leg's folder, a
duplicate) is never dropped silently and never used: it comes back as a warning naming the file
and the field, and as an InvalidRecord that the coverage table counts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from ablation.results import layout
from ablation.results.record import TaskRecord, UnknownSchema, WorkloadRecord, parse_record


@dataclass(frozen=True)
class WorkloadResult:
    name: str
    kind: str  # throughput | latency
    value: float  # tok/s for throughput, ms/tok for latency
    record: WorkloadRecord = field(compare=False, repr=False)


@dataclass(frozen=True)
class TaskResult:
    """A record as the comparer reads it: the validated TaskRecord and the file it came from.
    The fields are the record's own (no second declaration of the schema); `workloads` and
    `order` are the comparer's views of it, computed once."""
    path: Path
    record: TaskRecord = field(compare=False, repr=False)

    run_id = property(lambda self: self.record.run_id)
    leg = property(lambda self: self.record.leg)
    variant = property(lambda self: self.record.variant)
    model_id = property(lambda self: self.record.model_id)
    tp = property(lambda self: self.record.tp)
    repeat = property(lambda self: self.record.repeat)
    attempt = property(lambda self: self.record.attempt)
    status = property(lambda self: self.record.status)
    cause = property(lambda self: self.record.cause)
    skip_reason = property(lambda self: self.record.skip_reason)
    engine = property(lambda self: self.record.engine)
    scenario_sha256 = property(lambda self: self.record.scenario_table.sha256)
    # the venv it ran in, as tables name it: the leg's base venv or an override variant
    environment = property(lambda self: f"variant {self.variant}" if self.variant else "base venv")

    @cached_property
    def workloads(self) -> dict[str, WorkloadResult]:
        return {name: WorkloadResult(name, w.kind, w.value, w)
                for name, w in self.record.workloads.items()}

    @cached_property
    def order(self) -> tuple[int, tuple[str, ...]]:
        """Position in the scenario table, then the model's workload order: rows keep the table's order."""
        return self.record.model_index, tuple(self.record.model.spec.get("workloads", []))


@dataclass(frozen=True)
class InvalidRecord:
    """A results file that is not a usable record, and why: coverage counts it as invalid."""
    path: Path
    leg: str | None  # from the record if it parsed, else from its folder
    model: str | None
    reason: str


@dataclass
class ResultSet:
    results: list[TaskResult]
    warnings: list[str]
    invalid: list[InvalidRecord] = field(default_factory=list)
    # Outcomes of a (leg, model, machine) in another environment than the chosen run's: the leg's
    # base venv beside an override variant, or the reverse (canonical.select). Coverage and failure
    # attribution show them, labelled with the environment; no ratio, value or control uses them.
    others: list[TaskResult] = field(default_factory=list)

    def legs(self) -> list[str]:
        """Every leg with a result, usable or not (a leg whose every file is invalid still shows)."""
        return sort_legs({r.leg for r in self.results} | {i.leg for i in self.invalid if i.leg})

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
    return TaskResult(path, parse_record(data))


def _validation_summary(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first["loc"]) or "record"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"missing or malformed field '{where}': {first['msg']}{more}"


def _inconsistency(path: Path, r: TaskResult, in_layout: bool) -> str | None:
    """What makes a well-formed record unusable: it never finished, or it sits in another leg's or
    model's folder (a copied or hand-edited file would otherwise count for the wrong cell)."""
    if r.status == "RUNNING":
        return "field 'status': RUNNING (the task never finished)"
    if in_layout and (path.parent.name != r.record.model_slug or path.parent.parent.name != r.leg):
        return (f"field 'leg'/'model_slug': {r.leg}/{r.record.model_slug} differs from its folder "
                f"{path.parent.parent.name}/{path.parent.name}")
    return None


def load_results(paths: list[Path]) -> ResultSet:
    """Results from files or directories (searched recursively). A file that is not a usable
    record is never dropped silently: it becomes a warning naming the file and the field, and an
    InvalidRecord that coverage counts; it never contributes a number."""
    files: list[tuple[Path, bool]] = []  # (file, found in the results layout)
    warnings: list[str] = []
    for p in paths:
        if p.is_dir():
            files += [(f, True) for f in layout.result_files(p)]
        elif p.is_file():
            files.append((p, False))
        else:
            warnings.append(f"{p}: does not exist; counted as not run")
    results: list[TaskResult] = []
    invalid: list[InvalidRecord] = []
    seen: dict[tuple, Path] = {}

    def refuse(f: Path, reason: str, r: TaskResult | None = None) -> None:
        leg, model = (r.leg, r.model_id) if r else (f.parent.parent.name or None, None)
        invalid.append(InvalidRecord(f, leg, model, reason))
        warnings.append(f"{f}: {reason}; counted as invalid")

    read: set[Path] = set()
    for f, in_layout in files:
        if f.resolve() in read:  # the same file reached twice (overlapping paths given)
            continue
        read.add(f.resolve())
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            refuse(f, f"not valid JSON ({getattr(exc, 'msg', exc)})")
            continue
        except OSError as exc:
            refuse(f, f"unreadable ({exc.strerror})")
            continue
        try:
            r = parse_result(f, data)
        except UnknownSchema as exc:
            refuse(f, f"field 'schema': {exc}")
            continue
        except ValidationError as exc:
            refuse(f, _validation_summary(exc))
            continue
        problem = _inconsistency(f, r, in_layout)
        if problem:
            refuse(f, problem, r)
            continue
        key = (r.run_id, r.leg, r.model_id, r.repeat, r.attempt)
        if key in seen:
            refuse(f, f"duplicate of {seen[key]} (run {r.run_id}, repeat {r.repeat}, attempt {r.attempt})", r)
            continue
        seen[key] = f
        results.append(r)
    return ResultSet(results, warnings, invalid)
