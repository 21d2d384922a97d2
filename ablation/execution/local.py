"""Run tasks serially, one (leg, model, repeat) at a time, each in its leg's venv.

A task is one harness process in its own process group with a timeout; on
timeout the whole group (vLLM's engine and worker processes included) is
killed. Status is PASS only if the process exited 0 AND the harness's own
checks passed; a FAIL carries the error signature from its log. Every event
is appended to run.jsonl, every result written atomically, nothing recorded
is overwritten: a repeated or retried task gets new file names.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ablation.envs import caches
from ablation.envs.builder import LegEnv
from ablation.envs.environment import task_env
from ablation.execution.logparse import attribute_failure, engine_facts_from_log
from ablation.execution.machine import Machine
from ablation.execution.phases import breakdown_line, task_phases
from ablation.harness import protocol
from ablation.modeldirs.prepare import PreparedModel
from ablation.results import layout
from ablation.results.record import CacheState, Cause, ModelRef, ScenarioRef, StackRef, TaskRecord
from ablation.spec.scenarios import ModelSpec, ScenarioFile
from ablation.spec.stacks import StackFile
from ablation.util.jsonio import append_jsonl, read_jsonl, write_json_atomic

HARNESS = Path(__file__).parent.parent / "harness" / "vllm_harness.py"
DIE_WITH_PARENT = Path(__file__).parent.parent / "harness" / "die_with_parent.py"  # execs the harness
KILL_GRACE_S = 10.0


@dataclass
class Task:
    leg: str
    model: ModelSpec
    repeat: int
    env: LegEnv | None  # None when the task is skipped before any venv is needed
    prepared: PreparedModel | None
    skip_reason: str | None = None
    stack_env: dict[str, str] = field(default_factory=dict)
    # Where the leg comes from, so a machine that lacks the venv (a Ray node) can build the
    # same one: same stack file, same patches, same fingerprint and lock check.
    stack_file: StackFile | None = None
    patches_dir: Path | None = None

    @property
    def task_id(self) -> str:
        return f"{self.leg}/{self.model.slug}/r{self.repeat}"


@dataclass
class TaskOutcome:
    task_id: str
    status: str
    cause: Cause | None
    results_path: Path
    duration_s: float
    phases: dict[str, float] | None = None


@dataclass
class RunContext:
    run_id: str
    run_dir: Path
    scenarios: ScenarioFile
    machine: Machine
    harness: Path = HARNESS
    timeout_override_s: float | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    log: object = print
    gpu_check: str = "not checked"
    event_sink: object = None  # also called with every event as it happens (a Ray node streams to the head)

    @property
    def events(self) -> Path:
        return layout.events_file(self.run_dir)

    def event(self, kind: str, **fields) -> None:
        record = {"event": kind, "ts": time.time(), "run_id": self.run_id, **fields}
        append_jsonl(self.events, record)
        if self.event_sink is not None:
            self.event_sink(record)


def finished_tasks(run_dir: Path) -> dict[str, float | None]:
    """Tasks with a task_end event whose results file is on disk: what a resumed run must not redo,
    in the order they ended, each with its duration in seconds (None for a SKIP, which runs nothing).

    A Ray node's task_end streams to the head before the task's files come back; a head killed
    in between has the event and no result, and that task is redone, not lost."""
    done: dict[str, float | None] = {}
    for e in read_jsonl(layout.events_file(run_dir)):
        if e.get("event") != "task_end":
            continue
        leg, slug, rep = e["task_id"].rsplit("/", 2)
        files = layout.TaskFiles(layout.task_dir(run_dir, leg, slug), int(rep.removeprefix("r")), e.get("attempt") or 1)
        if files.results.is_file():
            done.pop(e["task_id"], None)  # a redone task counts where it last ended
            done[e["task_id"]] = e.get("duration_s")
    return done


def _kill_group(pgid: int) -> None:
    """SIGTERM the group, then SIGKILL whatever is left after a grace period."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def base_record(task: Task, ctx: RunContext, files: layout.TaskFiles) -> TaskRecord:
    """What is known of a task before it runs: identity, table, model, machine, stack."""
    m = task.model
    return TaskRecord(
        run_id=ctx.run_id, task_id=task.task_id, leg=task.leg,
        variant=task.env.variant if task.env else None,
        model_id=m.id, model_slug=m.slug, model_index=ctx.scenarios.table.models.index(m), tp=m.tp,
        repeat=task.repeat, attempt=files.attempt,
        scenario_table=ScenarioRef(name=ctx.scenarios.table.name, path=str(ctx.scenarios.path),
                                   sha256=ctx.scenarios.sha256),
        model=ModelRef(spec=m.model_dump(mode="json"),
                       path=str(task.prepared.path) if task.prepared else None,
                       digest=task.prepared.digest if task.prepared else None),
        machine=ctx.machine.as_dict(), gpu_check=ctx.gpu_check,
        stack=StackRef.from_manifest(task.env.manifest, task.env.path) if task.env else None,
    )


def _task_document(task: Task, ctx: RunContext, files: layout.TaskFiles) -> dict:
    table = ctx.scenarios.table
    m = task.model
    model: protocol.ModelTask = {"id": m.id, "path": str(task.prepared.path), "tp": m.tp, "dtype": m.dtype,
                                 "load_format": m.load_format, "max_model_len": m.max_model_len,
                                 "engine_args": m.engine_args}
    # A list, not a mapping: the scenario's order is the order they run in, on every leg.
    workloads = [{"name": w, **table.workloads[w].model_dump(mode="json")} for w in m.workloads]
    return protocol.task_document(task.task_id, table.seed, str(files.harness_output), model, workloads)


def _decide(exit_code: int | None, timed_out: bool, harness: dict | None, problem: str | None, log_text: str):
    """(status, cause): PASS needs exit 0, a valid result file and passing checks."""
    if timed_out or exit_code != 0:
        return "FAIL", attribute_failure(log_text, exit_code, timed_out)
    if problem:
        return "FAIL", Cause.of("harness-error", problem)
    if not harness["checks"].get("passed"):
        failures = "; ".join(harness["checks"].get("failures", [])) or "checks not passed"
        return "FAIL", Cause.of("check-failed", failures[:300])
    return "PASS", None


def run_task(task: Task, ctx: RunContext, attempt: int | None = None) -> TaskOutcome:
    """Run one task; `attempt` is given when another process (the Ray head) numbers attempts."""
    if attempt is None:
        files = layout.next_task_files(ctx.run_dir, task.leg, task.model.slug, task.repeat)
    else:
        files = layout.TaskFiles(layout.task_dir(ctx.run_dir, task.leg, task.model.slug), task.repeat, attempt)
    files.directory.mkdir(parents=True, exist_ok=True)
    record = base_record(task, ctx, files)
    started = time.time()
    record.started_at = started
    ctx.event("task_start", task_id=task.task_id, attempt=files.attempt, results=str(files.results))

    if task.skip_reason:
        record.status, record.skip_reason, record.finished_at = "SKIP", task.skip_reason, time.time()
        record.write(files.results)
        ctx.event("task_end", task_id=task.task_id, attempt=files.attempt, status="SKIP", reason=task.skip_reason)
        return TaskOutcome(task.task_id, "SKIP", None, files.results, 0.0)

    write_json_atomic(files.task, _task_document(task, ctx, files))
    record.caches = CacheState(**caches.state(task.env.path))  # made here, or carried (disclosed)
    timeout = ctx.timeout_override_s or task.model.timeout_s or ctx.scenarios.table.timeout_s
    argv = [str(task.env.python), str(DIE_WITH_PARENT), str(ctx.harness), str(files.task)]
    timed_out = False
    with open(files.log, "ab") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=task_env(os.environ, task.stack_env, ctx.extra_env, task.model.engine_env, task.env.path), start_new_session=True,
        )
        ctx.event("task_pid", task_id=task.task_id, attempt=files.attempt, pid=proc.pid)
        try:
            exit_code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            exit_code = proc.wait()
        finally:
            # vLLM's workers may outlive the harness; nothing of a task survives it.
            _kill_group(proc.pid)
    duration = time.time() - started
    log_text = files.log.read_text(errors="replace")
    harness, problem = protocol.read_result(str(files.harness_output), task.task_id)
    status, cause = _decide(exit_code, timed_out, harness, problem, log_text)
    facts = engine_facts_from_log(log_text)
    phases = task_phases(duration, harness, (harness or {}).get("workloads"))
    record = record.updated(
        status=status,
        cause=cause,
        exit_code=exit_code,
        timed_out=timed_out,
        timeout_s=timeout,
        duration_s=round(duration, 2),
        phases=phases,
        finished_at=time.time(),
        log=files.log.name,
        engine={**(harness or {}).get("engine", {}), **facts},
        workloads=(harness or {}).get("workloads", {}) if status == "PASS" else {},
        harness={k: v for k, v in (harness or {}).items() if k not in ("workloads", "engine")},
    )
    record.write(files.results)
    files.harness_output.unlink(missing_ok=True)
    ctx.event("task_end", task_id=task.task_id, attempt=files.attempt, status=status, cause=_json(cause),
              duration_s=round(duration, 2), phases=phases)
    return TaskOutcome(task.task_id, status, cause, files.results, duration, phases)


def _json(cause: Cause | None) -> dict | None:
    return cause.model_dump(by_alias=True) if cause else None


def describe(outcome: TaskOutcome) -> str:
    line = f"{outcome.status:4} {outcome.task_id} ({outcome.duration_s:.0f} s"
    line += f": {breakdown_line(outcome.phases)})" if outcome.phases else ")"
    if outcome.cause:
        line += f" [{outcome.cause.cls}] {outcome.cause.signature}"
    return line
