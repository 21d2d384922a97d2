"""A sweep: legs x scenario table x repeats, planned up front, executed serially.

Planning resolves everything that can fail on bad input (unknown leg, a cuda
leg on a CPU machine, a missing model directory) before the first task runs,
so a typo never costs a half-finished run.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ablation.errors import AblationError
from ablation.executor import RunContext, Task, TaskOutcome, describe, finished_task_ids, run_task
from ablation.jsonio import write_json_atomic
from ablation.machine import Machine
from ablation.models import prepare_model
from ablation.scenarios import ScenarioFile
from ablation.stacks import StackDir, StackFile
from ablation.venvs import VenvBuilder


@dataclass
class SweepOptions:
    legs: list[str]
    scenarios: ScenarioFile
    results_root: Path
    run_id: str | None = None
    resume: bool = False
    repeats: int = 1
    timeout_override_s: float | None = None


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime())


def leg_order(legs: list[str], repeats: int) -> list[tuple[int, list[str]]]:
    """Rounds of legs, reversed every other round (A B C, C B A, ...) to cancel drift."""
    return [(r + 1, legs if r % 2 == 0 else list(reversed(legs))) for r in range(repeats)]


class Sweep:
    def __init__(self, stacks: StackDir, builder: VenvBuilder, models_root: Path, machine: Machine, log=print):
        self.stacks = stacks
        self.builder = builder
        self.models_root = models_root
        self.machine = machine
        self.log = log

    def _check_platform(self, sf: StackFile) -> None:
        if sf.stack.platform == "cuda" and self.machine.platform != "cuda":
            raise AblationError(
                f"{sf.path}: field 'platform': leg {sf.leg} needs CUDA GPUs and this machine has none; "
                "run it on a GPU machine or pick a -cpu leg"
            )

    def plan(self, opts: SweepOptions) -> list[Task]:
        if not opts.legs:
            raise AblationError("no legs given; pass --leg (known legs: " + ", ".join(self.stacks.legs()) + ")")
        stack_files = {leg: self.stacks.load(leg) for leg in opts.legs}
        for sf in stack_files.values():
            self._check_platform(sf)
        table = opts.scenarios.table
        prepared = {}
        skip = {m.id: self.machine.unmet(m.requires) for m in table.models}
        for m in table.models:
            if not skip[m.id]:
                prepared[m.id] = prepare_model(m, opts.scenarios, self.models_root)
        envs = {}
        tasks = []
        for repeat, legs in leg_order(opts.legs, opts.repeats):
            for leg in legs:
                sf = stack_files[leg]
                for m in table.models:
                    if skip[m.id]:
                        tasks.append(Task(leg, m, repeat, None, None, skip_reason=skip[m.id]))
                        continue
                    override = sf.stack.override_for(m.id)
                    variant = override.name if override else None
                    if (leg, variant) not in envs:
                        envs[(leg, variant)] = self.builder.ensure(sf, variant)
                    tasks.append(Task(leg, m, repeat, envs[(leg, variant)], prepared[m.id], stack_env=sf.stack.env))
        return tasks

    def run(self, opts: SweepOptions, ctx_extra: dict | None = None) -> tuple[Path, list[TaskOutcome]]:
        run_id = opts.run_id or new_run_id()
        run_dir = opts.results_root / run_id
        if opts.resume and not (run_dir / "run.jsonl").is_file():
            raise AblationError(f"cannot resume run '{run_id}': {run_dir / 'run.jsonl'} does not exist")
        if not opts.resume and (run_dir / "run.jsonl").exists():
            raise AblationError(f"run '{run_id}' already exists in {run_dir}; pass --resume to continue it")
        tasks = self.plan(opts)
        ctx = RunContext(run_id, run_dir, opts.scenarios, self.machine,
                         timeout_override_s=opts.timeout_override_s, log=self.log, **(ctx_extra or {}))
        done = finished_task_ids(run_dir) if opts.resume else set()
        run_dir.mkdir(parents=True, exist_ok=True)
        self._write_manifest(run_dir, opts, tasks)
        ctx.event("run_start" if not opts.resume else "run_resume", argv=sys.argv, legs=opts.legs,
                  scenario_sha256=opts.scenarios.sha256, tasks=len(tasks), already_done=len(done))
        outcomes = []
        todo = [t for t in tasks if t.task_id not in done]
        for i, task in enumerate(todo, 1):
            self.log(f"[run {run_id}] task {i}/{len(todo)}: {task.task_id}")
            outcome = run_task(task, ctx)
            self.log(f"[run {run_id}] {describe(outcome)}")
            outcomes.append(outcome)
        ctx.event("run_end", counts={s: sum(o.status == s for o in outcomes) for s in ("PASS", "FAIL", "SKIP")})
        return run_dir, outcomes

    def _write_manifest(self, run_dir: Path, opts: SweepOptions, tasks: list[Task]) -> None:
        """Run-level MANIFEST: written once; a resumed run adds MANIFEST.resume-N.json beside it."""
        legs = {}
        for t in tasks:
            if t.env:
                key = t.env.path.name
                legs[key] = {k: t.env.manifest[k] for k in ("leg", "variant", "stack_file", "stack_sha256",
                                                             "lock_sha256", "python_version", "pins", "packages",
                                                             "excluded", "patches", "installer_version")}
        manifest = {
            "schema": "vllm-ablation/manifest/1",
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "argv": sys.argv,
            "legs": opts.legs,
            "repeats": opts.repeats,
            "scenario_table": {"path": str(opts.scenarios.path), "sha256": opts.scenarios.sha256,
                               "name": opts.scenarios.table.name},
            "machine": self.machine.as_dict(),
            "environments": legs,
        }
        path = run_dir / "MANIFEST.json"
        n = 1
        while path.exists():
            path = run_dir / f"MANIFEST.resume-{n}.json"
            n += 1
        write_json_atomic(path, manifest)
