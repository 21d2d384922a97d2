"""The result record: what one task attempt wrote to results.json. One model, one schema.

Every writer (the local executor, the Ray head's failure records) builds a `TaskRecord`; every
reader (the comparer, reports, canonical selection) parses one through `parse_record`, which
knows every schema version ever written (`UPGRADES`) and refuses an unknown one by name.
Sub-records are typed (cause, machine, engine facts, workload results) and keep unknown fields
(extra="allow"), so a record written by a later minor version still loads and round-trips.

A measurement is only a number here if it is one: a workload's value must be a finite, positive
number below MAX_VALUE (not a boolean, a string, NaN or inf); a record that breaks this fails
validation with the field's path, and the loader counts it as invalid, never as a ratio's input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_serializer

from ablation.spec import identifiers
from ablation.util.jsonio import write_json_atomic

RESULT_SCHEMA = "vllm-ablation/result/1"
MAX_VALUE = 1e12  # tok/s or ms/tok beyond this is a broken record, not a measurement


def _upgrade_v1(data: dict) -> dict:
    return data  # the current shape


# Every schema id this reader has ever written -> the function that brings such a record to the
# current shape. A new schema version adds a line here; the files kept under docs/measurements
# are the golden files that must keep loading (tests/test_record.py).
UPGRADES: dict[str, Callable[[dict], dict]] = {RESULT_SCHEMA: _upgrade_v1}


class UnknownSchema(ValueError):
    pass


def _measurement(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"must be a number, got {type(v).__name__} {v!r}")
    if not math.isfinite(v) or v <= 0 or v > MAX_VALUE:
        raise ValueError(f"must be a finite number in (0, {MAX_VALUE:g}], got {v!r}")
    return float(v)


Measurement = Annotated[float, BeforeValidator(_measurement)]


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _Sub(_Part):
    """A sub-record writes back exactly the keys it was given: a field it declares but the file
    did not have is not added as null (old files round-trip unchanged)."""

    @model_serializer(mode="wrap")
    def _only_given(self, handler):
        data = handler(self)
        fields = type(self).model_fields
        given = {(fields[f].alias or f) if f in fields else f for f in self.model_fields_set} | set(self.model_extra or {})
        return {k: v for k, v in data.items() if k in given}


class Cause(_Sub):
    """Why a task failed: a class users filter on, and the signature read from its log."""
    cls: str = Field(alias="class")  # dependency | unsupported-model | oom | runtime-crash | timeout | ...
    signature: str

    @classmethod
    def of(cls, klass: str, signature: str) -> "Cause":
        return cls.model_validate({"class": klass, "signature": signature})


class GpuRecord(_Sub):
    index: int | None = None
    name: str | None = None
    compute_capability: float | None = None
    memory_total_mib: int | None = None
    clocks_locked: bool | None = None
    sm_clock_mhz: int | None = None
    uuid: str | None = None


class MachineRecord(_Sub):
    """The machine a task ran on, as `execution.machine.probe()` described it."""
    hostname: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_gib: float | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    gpus: list[GpuRecord] = Field(default_factory=list)
    platform: str | None = None


class EngineFacts(_Sub):
    """What the engine ran with: reported by the harness and parsed from vLLM's log."""
    kv_cache_tokens: int | None = None
    attention_backend: str | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enable_chunked_prefill: bool | None = None


class CacheState(_Sub):
    """The leg's compile and JIT caches when the task started (envs.caches.state): `carried` is
    the origin of an archive imported from another machine, None for caches made here."""
    files: int
    bytes: int
    carried: dict | None = None


class WorkloadRecord(_Sub):
    """One workload's measurement (the harness protocol's WorkloadResult, as kept)."""
    kind: Literal["throughput", "latency"]
    value: Measurement  # tok/s for throughput, ms/tok for latency
    label: Annotated[str, AfterValidator(identifiers.workload_name)] | None = None  # the name tables print
    unit: str | None = None
    total_output_tokens: int | None = None
    num_seqs: int | None = None
    samples: list[float] | None = None  # throughput: every timed pass in the process
    latencies: list[float] | None = None  # latency: every timed batch in the process


class ScenarioRef(_Part):
    """Which scenario table the task came from; its sha256 groups comparable results."""
    name: str
    path: str
    sha256: str


class ModelRef(_Part):
    spec: dict = Field(default_factory=dict)  # the scenario table's model entry, as run
    path: str | None = None  # the prepared model directory
    digest: str | None = None


class StackRef(_Part):
    """The leg as built: from the venv's manifest, so the lock, not the stack file, is the truth."""
    file: str
    sha256: str
    lock_sha256: str
    venv: str
    variant_reason: str | None = None
    pins: dict[str, str] = Field(default_factory=dict)
    packages: dict[str, str] = Field(default_factory=dict)  # every installed distribution -> version
    excluded: dict[str, str] = Field(default_factory=dict)
    patches: list = Field(default_factory=list)
    python: str | None = None

    @classmethod
    def from_manifest(cls, man: dict, venv: Path) -> "StackRef":
        return cls(file=man["stack_file"], sha256=man["stack_sha256"], lock_sha256=man["lock_sha256"],
                   venv=str(venv), variant_reason=man.get("variant_reason"), pins=man["pins"],
                   packages=man["packages"], excluded=man["excluded"], patches=man["patches"],
                   python=man["python_version"])


class TaskRecord(_Part):
    schema_: str = Field(RESULT_SCHEMA, alias="schema")
    # Identifiers are checked as where they enter a run (ablation.spec.identifiers): a record from
    # elsewhere cannot put a '|', a newline or a path into a table cell or a folder name.
    run_id: Annotated[str, AfterValidator(identifiers.run_id)]
    task_id: str
    leg: Annotated[str, AfterValidator(identifiers.leg_name)]
    variant: str | None = None
    model_id: Annotated[str, AfterValidator(identifiers.model_id)]
    model_slug: str
    model_index: int = 0  # position in the scenario table: report rows keep the table's order
    tp: int
    repeat: int = 1
    attempt: int = 1
    scenario_table: ScenarioRef
    model: ModelRef = Field(default_factory=ModelRef)
    machine: MachineRecord = Field(default_factory=MachineRecord)
    gpu_check: str = "not checked"
    stack: StackRef | None = None  # None for a task skipped before its venv was needed
    status: Literal["PASS", "FAIL", "SKIP", "RUNNING"] = "RUNNING"
    cause: Cause | None = None  # for a FAIL
    skip_reason: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    timed_out: bool | None = None
    timeout_s: float | None = None
    duration_s: float | None = None
    phases: dict[str, float] | None = None  # execution.phases: import, engine_init, warmup, timed, other (s)
    log: str | None = None  # run.log's name beside results.json
    executor: str | None = None  # "ray" when the Ray head wrote it
    engine: EngineFacts = Field(default_factory=EngineFacts)
    caches: CacheState | None = None  # None: not recorded (before 2026-12-05, or a SKIP)
    workloads: dict[str, WorkloadRecord] = Field(default_factory=dict)  # name -> measurement
    harness: dict = Field(default_factory=dict)  # the harness's checks and environment

    @field_validator("workloads")
    @classmethod
    def _workload_names(cls, v: dict[str, WorkloadRecord]) -> dict[str, WorkloadRecord]:
        for name in v:
            identifiers.workload_name(name)
        return v

    def as_json(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)

    def updated(self, **fields: Any) -> "TaskRecord":
        """A copy with `fields` replaced, validated like a record read from disk (model_copy is not)."""
        return TaskRecord.model_validate({**self.as_json(), **{k: _jsonable(v) for k, v in fields.items()}})

    def write(self, path: Path) -> None:
        write_json_atomic(path, self.as_json())


def _jsonable(v: Any) -> Any:
    if isinstance(v, BaseModel):
        return v.model_dump(mode="json", by_alias=True)
    return v


def parse_record(data: Any) -> TaskRecord:
    """A record from a results.json's parsed JSON, brought to the current schema.
    Raises UnknownSchema (naming it) or pydantic's ValidationError (naming the field)."""
    if not isinstance(data, dict):
        raise UnknownSchema(f"a record is a JSON object, got {type(data).__name__}")
    schema = data.get("schema", RESULT_SCHEMA)
    if schema not in UPGRADES:
        raise UnknownSchema(f"unknown schema {schema!r} (this version reads {', '.join(UPGRADES)})")
    return TaskRecord.model_validate(UPGRADES[schema](data))
