"""The runner <-> harness protocol, declared once. STANDARD LIBRARY ONLY.

The harness runs inside a leg's venv, where the runner's packages do not exist; so this module
is imported two ways: as `ablation.harness.protocol` by the runner, and as `protocol` by a
harness script beside it (Python puts a script's own directory first on sys.path).

    runner                                   harness (in the leg's venv)
    task_document(...) -> TASK.json   ---->  read_task(TASK.json)
                                             ... runs the workloads ...
    read_result(output_path)          <----  write_result(task, result_document(...))

Who speaks it: ablation/execution/local.py (writes tasks, reads results), ablation/harness/
vllm_harness.py (the real engine), tests/fault_harness.py (the fault-injection engine). A result
whose schema this runner does not know is refused by name (FAIL harness-error), never guessed at.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, TypedDict

TASK_SCHEMA = "vllm-ablation/task/1"
RESULT_SCHEMA = "vllm-ablation/harness/1"
MEASUREMENT_KINDS = ("throughput", "latency")  # tok/s (higher is better), ms/tok (lower is better)


class ModelTask(TypedDict):
    id: str
    path: str
    tp: int
    dtype: str
    load_format: str
    max_model_len: int | None
    engine_args: dict


class TaskDocument(TypedDict):
    schema: str
    task_id: str
    seed: int
    output_path: str  # where the harness writes its ResultDocument, atomically
    model: ModelTask
    workloads: list[dict]  # each: {"name": ..., "kind": ..., the scenario's workload fields}, in run order


class WorkloadResult(TypedDict, total=False):
    kind: str  # one of MEASUREMENT_KINDS
    metric: str
    unit: str
    value: float  # the measurement: finite and > 0
    total_output_tokens: int
    expected_output_tokens: int
    num_seqs: int
    warmup_s: float
    timed_s: float
    checks_failed: list[str]


class ResultDocument(TypedDict, total=False):
    schema: str
    task_id: str
    started_at: float
    finished_at: float
    vllm_version: str
    timings: dict  # import_s, load_s, workloads_s, total_s
    environment: dict
    engine: dict
    workloads: dict[str, WorkloadResult]
    checks: dict  # {"passed": bool, "failures": [str]}


class ProtocolError(ValueError):
    """A task or result file that does not follow this protocol."""


def task_document(task_id: str, seed: int, output_path: str, model: ModelTask, workloads: list[dict]) -> dict:
    doc: TaskDocument = {"schema": TASK_SCHEMA, "task_id": task_id, "seed": seed, "output_path": output_path,
                         "model": model, "workloads": workloads}
    problems = task_problems(doc)
    if problems:
        raise ProtocolError("; ".join(problems))
    return dict(doc)


def task_problems(doc: Any) -> list[str]:
    if not isinstance(doc, dict):
        return ["task is not a JSON object"]
    if doc.get("schema") != TASK_SCHEMA:
        return [f"task schema {doc.get('schema')!r} is not {TASK_SCHEMA!r}"]
    problems = [f"task lacks '{k}'" for k in TaskDocument.__annotations__ if k not in doc]
    model = doc.get("model")
    if isinstance(model, dict):
        problems += [f"task model lacks '{k}'" for k in ModelTask.__annotations__ if k not in model]
    elif "model" in doc:
        problems.append("task 'model' is not an object")
    for i, w in enumerate(doc.get("workloads") or []):
        if not isinstance(w, dict) or w.get("kind") not in MEASUREMENT_KINDS or not w.get("name"):
            problems.append(f"task workload {i} needs a name and a kind in {MEASUREMENT_KINDS}")
    return problems


def read_task(path: str) -> dict:
    with open(path) as f:
        doc = json.load(f)
    problems = task_problems(doc)
    if problems:
        raise ProtocolError(f"{path}: " + "; ".join(problems))
    return doc


def result_document(task: dict, workloads: dict[str, dict], checks_failed: list[str], **fields: Any) -> dict:
    """A harness's result: the schema, its task's id, the workloads, the checks, and anything else
    it measured (timings, environment, engine facts, vllm_version)."""
    return {"schema": RESULT_SCHEMA, "task_id": task["task_id"], **fields, "workloads": workloads,
            "checks": {"passed": not checks_failed, "failures": list(checks_failed)}}


def check_workload(r: dict) -> list[str]:
    """The harness's own checks of one workload; any failure makes the task FAIL even on exit 0."""
    problems = []
    media = r.get("media")
    if media and not media.get("distinct", True):
        problems.append(f"{media.get('items')} media items are not all distinct (the processor cache would hit)")
    if r.get("total_output_tokens") != r.get("expected_output_tokens"):
        problems.append(f"output tokens {r.get('total_output_tokens')} != requested {r.get('expected_output_tokens')}")
    if not _positive_finite(r.get("value")):
        problems.append(f"metric {r.get('metric')} is not a positive finite number: {r.get('value')}")
    return problems


def _positive_finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def result_problems(doc: Any, task_id: str | None = None) -> list[str]:
    """Why a result file cannot be used as a measurement ([] when it can)."""
    if not isinstance(doc, dict):
        return ["harness results are not a JSON object"]
    if doc.get("schema") != RESULT_SCHEMA:
        return [f"harness results have unknown schema {doc.get('schema')!r} (this runner reads {RESULT_SCHEMA!r})"]
    if not isinstance(doc.get("workloads"), dict) or not isinstance(doc.get("checks"), dict):
        return ["harness results lack 'workloads'/'checks'"]
    problems = []
    if task_id is not None and doc.get("task_id") != task_id:
        problems.append(f"harness results are for task {doc.get('task_id')!r}, not {task_id!r}")
    if not isinstance(doc["checks"].get("passed"), bool):
        problems.append("harness results: checks.passed is not true/false")
    for name, w in doc["workloads"].items():
        if not isinstance(w, dict) or w.get("kind") not in MEASUREMENT_KINDS:
            problems.append(f"harness results: workload {name} has no kind in {MEASUREMENT_KINDS}")
            continue
        value = w.get("value")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            problems.append(f"harness results: workload {name} has non-finite value {value!r}")
    return problems


def read_result(path: str, task_id: str | None = None) -> tuple[dict | None, str | None]:
    """(the result, None), or (None, why it is unusable: missing, not JSON, unknown schema, NaN, ...)."""
    if not os.path.isfile(path):
        return None, "harness wrote no results file"
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"harness results are not valid JSON: {exc}"
    problems = result_problems(doc, task_id)
    return (None, "; ".join(problems)) if problems else (doc, None)


def write_json_atomic(path: str, data: dict) -> None:
    """Write to a temp file beside `path`, fsync, rename: a reader sees all of it or none."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, allow_nan=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
