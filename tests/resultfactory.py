"""Hand-made results.json files with known numbers, for the comparer's tests."""

from __future__ import annotations

from pathlib import Path

from ablation.results import layout
from ablation.results.record import ModelRef, ScenarioRef, TaskRecord


def write_result(run_dir: Path, leg: str, model: str, values: dict[str, float], *, tp: int = 1,
                 status: str = "PASS", repeat: int = 1, attempt: int = 1, sha: str = "table-sha",
                 cause: dict | None = None, skip_reason: str | None = None, engine: dict | None = None,
                 model_index: int = 0, machine: dict | None = None, variant: str | None = None,
                 spec: dict | None = None, workload_extra: dict | None = None, harness: dict | None = None,
                 started_at: float | None = None, caches: dict | None = None) -> Path:
    """values: workload -> number; a workload whose name contains 'single' or 'batch' is latency.
    spec: more fields of the model's table entry (load_format, ...); workload_extra: more fields of
    every workload's record (num_requests, media, ...); harness: the harness's own record; caches: the
    leg's compile/JIT caches at the start ({files, bytes, carried}; None: not recorded)."""
    workloads = {}
    for name, v in values.items():
        kind = "latency" if ("single" in name or "batch" in name) else "throughput"
        workloads[name] = {"kind": kind, "value": v, "unit": "ms/tok" if kind == "latency" else "tok/s",
                           **(workload_extra or {})}
    slug = model.replace("/", "__")
    files = layout.TaskFiles(layout.task_dir(run_dir, leg, slug), repeat, attempt)
    files.directory.mkdir(parents=True, exist_ok=True)
    # Built as the executor builds it, so a fixture can never drift from the schema.
    TaskRecord(
        run_id=run_dir.name, task_id=f"{leg}/{slug}/r{repeat}", leg=leg, model_id=model, model_slug=slug,
        model_index=model_index, tp=tp, repeat=repeat, attempt=attempt, status=status, cause=cause,
        skip_reason=skip_reason, scenario_table=ScenarioRef(name="t", path="t.yaml", sha256=sha),
        model=ModelRef(spec={"workloads": list(values), **(spec or {})}), variant=variant,
        harness=harness or {}, started_at=started_at, caches=caches,
        workloads=workloads if status == "PASS" else {}, engine=engine or {},
        machine=machine if machine is not None else {"cpu_model": "fixture CPU"},
    ).write(files.results)
    return files.results
