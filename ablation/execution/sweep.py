"""A sweep: legs x scenario table x repeats, planned up front (plan.py), then run under the host lock
by an executor (executors.py), each run with its manifest and append-only events (run_record.py)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from ablation.envs.builder import VenvBuilder
from ablation.errors import AblationError
from ablation.execution.executors import Executor, LocalExecutor, OpenRun, RayExecutor
from ablation.execution.hostlock import host_lock
from ablation.execution.local import RunContext, Task, TaskOutcome, finished_tasks
from ablation.execution.machine import Machine
from ablation.execution.orphans import kill_orphans
from ablation.execution.phases import timed_share
from ablation.execution.plan import Planner, Resolved, SweepOptions, leg_order, new_run_id
from ablation.execution.progress import sweep_progress
from ablation.execution.run_record import check_resume_matches, environment_warnings, write_manifest
from ablation.results import layout
from ablation.spec import identifiers
from ablation.spec.stacks import StackDir

__all__ = ["Sweep", "SweepOptions", "leg_order"]


class Sweep:
    def __init__(self, stacks: StackDir, builder: VenvBuilder, models_root: Path, machine: Machine, log=print):
        self.planner = Planner(stacks, builder, models_root, machine)
        self.machine = machine
        self.log = log

    def validate(self, opts: SweepOptions, machines: dict[str | None, list[Machine]] | None = None) -> Resolved:
        return self.planner.validate(opts, machines)

    def plan(self, opts: SweepOptions, resolved: Resolved | None = None) -> dict[str | None, list[Task]]:
        return self.planner.plan(opts, resolved)

    def run(self, opts: SweepOptions) -> tuple[Path, list[TaskOutcome]]:
        """Run (or resume) the sweep; returns its run directory (for several architectures, the
        results root that holds their `<run-id>@<arch>` directories) and every outcome."""
        run_id = opts.run_id or new_run_id()
        identifiers.check(identifiers.run_id, run_id, "--resume" if opts.resume else "--run-id")
        runs = self._run_dirs(opts, run_id)
        self._check_run_dirs(opts, run_id, runs)  # cheap checks first: nothing is prepared for a run that cannot start
        machines = None
        if opts.archs:  # judge `requires` on each architecture's own nodes, not on the head
            from ablation.execution.ray_cluster import arch_machines

            machines = arch_machines(opts.ray_address, [arch for _, _, arch in runs])
        resolved = self.validate(opts, machines)
        opts = replace(opts, legs=list(resolved.stack_files))  # leg names from here on, never paths
        if opts.resume:
            for _, run_dir, _ in runs:
                check_resume_matches(run_dir, opts)
        with host_lock(opts.lock_path, run_id, opts.wait_for_lock, log=self.log):
            # Again under the lock: a second sweep with the same --run-id that waited behind the
            # first would otherwise pass the check above and re-run every task into its directory.
            self._check_run_dirs(opts, run_id, runs)
            started = time.monotonic()
            outcomes = self._run_locked(opts, runs, resolved)
            share = timed_share([o.phases for o in outcomes], time.monotonic() - started)
            self.log(f"[run {run_id}] {share} (venv checks, engine starts, warm-ups and teardown are the rest)")
            return (runs[0][1] if len(runs) == 1 and not opts.archs else opts.results_root), outcomes

    @staticmethod
    def _check_run_dirs(opts: SweepOptions, run_id: str, runs: list[tuple[str, Path, str | None]]) -> None:
        for rid, run_dir, _ in runs:
            identifiers.check(identifiers.run_id, rid, "--run-id")
            if opts.resume and not layout.events_file(run_dir).is_file():
                raise AblationError(f"cannot resume run '{rid}': {layout.events_file(run_dir)} does not exist")
            if not opts.resume and layout.events_file(run_dir).exists():
                raise AblationError(f"run '{rid}' already exists in {run_dir}; pass --resume {run_id} to continue it")

    def _run_dirs(self, opts: SweepOptions, run_id: str) -> list[tuple[str, Path, str | None]]:
        """(run id, run dir, architecture or None) of each run this sweep writes: one, or one per
        architecture."""
        if not opts.archs:
            return [(run_id, opts.results_root / run_id, None)]
        if opts.executor != "ray":
            raise AblationError("--arch places tasks on Ray nodes by architecture; it needs --executor ray")
        from ablation.execution.ray_cluster import cluster_archs

        have = cluster_archs(opts.ray_address)
        archs = have if opts.archs == ["all"] else opts.archs
        unknown = [a for a in archs if a not in have]
        if unknown or not archs:
            raise AblationError(f"--arch: {', '.join(unknown) or 'all'}: no node advertises "
                                f"{'it' if unknown else 'an architecture'} (nodes advertise: {', '.join(have) or 'none'}; "
                                "start them with --resources \"$(ablation node-resources)\")")
        return [(f"{run_id}@{a}", opts.results_root / f"{run_id}@{a}", a) for a in archs]

    def _open_run(self, opts: SweepOptions, run_id: str, run_dir: Path, tasks: list[Task],
                  machine: Machine, arch: str | None) -> OpenRun:
        """The run's context, its manifest and start event; returns the tasks it still has to do.
        `machine`: what the run's tasks run on (one of its architecture's nodes under --arch)."""
        ctx = RunContext(run_id, run_dir, opts.scenarios, machine,
                         timeout_override_s=opts.timeout_override_s, log=self.log)
        if opts.harness:
            ctx.harness = opts.harness
        done = finished_tasks(run_dir) if opts.resume else {}
        run_dir.mkdir(parents=True, exist_ok=True)
        if opts.resume:
            kill_orphans(ctx, self.log)
        warnings = environment_warnings(machine)
        for w in warnings:
            self.log(f"warning: {w}")
        write_manifest(run_dir, opts, tasks, warnings, machine)
        todo = [t for t in tasks if t.task_id not in done]
        ctx.event("run_start" if not opts.resume else "run_resume", argv=sys.argv, legs=opts.legs,
                  scenario_sha256=opts.scenarios.sha256, tasks=len(tasks), already_done=len(done),
                  todo=[t.task_id for t in todo], warnings=warnings)
        return OpenRun(ctx, todo, arch, done)

    def _executor(self, opts: SweepOptions) -> Executor:
        if opts.executor == "ray":
            return RayExecutor(opts.ray_address)
        return LocalExecutor(self.machine, opts.stop_after_s, opts.expect_task_s)

    def _run_locked(self, opts: SweepOptions, runs: list[tuple[str, Path, str | None]],
                    resolved: Resolved) -> list[TaskOutcome]:
        plans = self.plan(opts, resolved)
        opened = [self._open_run(opts, rid, run_dir, plans[arch], resolved.machines[arch], arch)
                  for rid, run_dir, arch in runs]
        with sweep_progress(self.log) as progress:
            outcomes = self._executor(opts).run(opened, progress)
        for run in opened:
            mine = [o for o in outcomes if o.results_path.is_relative_to(run.ctx.run_dir)]
            run.ctx.event("run_end", counts={s: sum(o.status == s for o in mine) for s in ("PASS", "FAIL", "SKIP")})
        return outcomes
