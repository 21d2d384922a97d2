"""The result record: what one task attempt wrote to results.json. One model, one schema.

Every writer (the local executor, the Ray head's failure records) builds a
`TaskRecord`; every reader (the comparer, reports, canonical selection)
parses one. Unknown fields are kept (extra="allow"), so a record written by a
later schema version still loads and round-trips; a record that lacks a field
the comparer needs is refused with the field's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ablation.util.jsonio import write_json_atomic

RESULT_SCHEMA = "vllm-ablation/result/1"


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


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
    run_id: str
    task_id: str
    leg: str
    variant: str | None = None
    model_id: str
    model_slug: str
    model_index: int = 0  # position in the scenario table: report rows keep the table's order
    tp: int
    repeat: int = 1
    attempt: int = 1
    scenario_table: ScenarioRef
    model: ModelRef = Field(default_factory=ModelRef)
    machine: dict = Field(default_factory=dict)
    gpu_check: str = "not checked"
    stack: StackRef | None = None  # None for a task skipped before its venv was needed
    status: Literal["PASS", "FAIL", "SKIP", "RUNNING"] = "RUNNING"
    cause: dict | None = None  # {"class", "signature"} for a FAIL
    skip_reason: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    timed_out: bool | None = None
    timeout_s: float | None = None
    duration_s: float | None = None
    phases: dict[str, float] | None = None  # ablation.execution.phases: import, engine_init, warmup, timed, other (s)
    log: str | None = None  # run.log's name beside results.json
    executor: str | None = None  # "ray" when the Ray head wrote it
    engine: dict = Field(default_factory=dict)  # engine facts: harness-reported and parsed from the log
    workloads: dict[str, dict] = Field(default_factory=dict)  # name -> {kind, value, unit, samples, ...}
    harness: dict = Field(default_factory=dict)  # the harness's checks and environment

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def as_json(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)

    def write(self, path: Path) -> None:
        write_json_atomic(path, self.as_json())
