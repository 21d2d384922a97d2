"""A sweep: legs x scenario table x repeats, planned up front, executed serially.

Planning resolves everything that can fail on bad input (unknown leg, a cuda
leg on a CPU machine, a missing model directory) before the first task runs,
so a typo never costs a half-finished run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ablation.envs.builder import VenvBuilder
from ablation.errors import AblationError
from ablation.execution.hostlock import default_lock_path, host_lock
from ablation.execution.local import RunContext, Task, TaskOutcome, describe, finished_task_ids, run_task
from ablation.execution.machine import Machine, gpu_processes
from ablation.execution.phases import timed_share
from ablation.execution.progress import sweep_progress
from ablation.modeldirs.prepare import PreparedModel, prepare_model
from ablation.results import layout
from ablation.spec import identifiers
from ablation.spec.scenarios import ScenarioFile
from ablation.spec.stacks import StackDir, StackFile
from ablation.util.jsonio import read_jsonl, write_json_atomic
from ablation.util.timestamps import utc_stamp


@dataclass
class SweepOptions:
    legs: list[str]
    scenarios: ScenarioFile
    results_root: Path
    run_id: str | None = None
    resume: bool = False
    repeats: int = 1
    timeout_override_s: float | None = None
    wait_for_lock: bool = False
    lock_path: Path = field(default_factory=default_lock_path)
    harness: Path | None = None  # only for fault injection (tests/fault_harness.py)
    executor: str = "local"  # local | ray
    ray_address: str | None = None
    # Leased machines end at a known time: start no task that the longest task so far says
    # cannot finish before this many seconds from the sweep's start; the rest resumes later.
    stop_after_s: float | None = None
    # Ray only: run the table once per architecture the nodes advertise (["all"]: every one),
    # each into its own run directory `<run-id>@<arch>`, all at once on the cluster.
    archs: list[str] | None = None


@dataclass
class Resolved:
    """What validation found: the legs' stack files, skip reasons, prepared models.

    `machines` and `skip` are keyed by architecture (None: this machine, the local run): a
    scenario is SKIP where that architecture's machine cannot run it, wherever the head is."""

    stack_files: dict[str, StackFile]
    machines: dict[str | None, Machine]
    skip: dict[str | None, dict[str, str | None]]
    prepared: dict[str, PreparedModel]


def new_run_id() -> str:
    return utc_stamp("id")


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

    @staticmethod
    def _check_platform(sf: StackFile, machine: Machine, arch: str | None) -> None:
        if sf.stack.platform == "cuda" and machine.platform != "cuda":
            if arch:
                raise AblationError(f"{sf.path}: field 'platform': leg {sf.leg} needs CUDA GPUs and the nodes of "
                                    f"architecture {arch} have none; pass --arch with GPU architectures only")
            raise AblationError(
                f"{sf.path}: field 'platform': leg {sf.leg} needs CUDA GPUs and this machine has none; "
                "run it on a GPU machine or pick a -cpu leg"
            )

    @staticmethod
    def _skip_reasons(table, arch: str | None, machines: list[Machine]) -> dict[str, str | None]:
        """model id -> why the architecture's machines cannot run it (None: they can). Nodes that
        advertise one architecture must agree, or a task's SKIP/PASS would depend on placement."""
        skip = {}
        for m in table.models:
            reasons = {machine.unmet(m.requires) for machine in machines}
            if len(reasons) > 1:
                raise AblationError(f"--arch {arch}: its nodes differ on model {m.id} ("
                                    + "; ".join(sorted(r or "can run it" for r in reasons))
                                    + "); start unlike nodes with different `ablation node-resources --arch` names")
            skip[m.id] = reasons.pop()
        return skip

    def validate(self, opts: SweepOptions, machines: dict[str | None, list[Machine]] | None = None) -> Resolved:
        """Everything bad input can break, checked before the host lock is awaited or a venv is built.
        `machines`: each architecture's nodes (Ray `--arch`); by default this machine alone."""
        machines = machines or {None: [self.machine]}
        empty = [a for a, ms in machines.items() if not ms]
        if empty:
            raise AblationError(f"--arch: {', '.join(empty)}: no live node of it answered; check `ray status`")
        if not opts.legs:
            raise AblationError("no legs given; pass --leg (known legs: " + ", ".join(self.stacks.legs()) + ")")
        stack_files: dict[str, StackFile] = {}
        for given in opts.legs:  # keyed by the leg's own name: a path given as --leg runs as that leg
            sf = self.stacks.load(given)
            if sf.leg in stack_files:
                raise AblationError(f"--leg: leg '{sf.leg}' given twice ({stack_files[sf.leg].path}, {sf.path})")
            stack_files[sf.leg] = sf
        table = opts.scenarios.table
        for sf in stack_files.values():
            for arch, ms in machines.items():
                self._check_platform(sf, ms[0], arch)
            for m in table.models:
                clash = sorted(k for k, v in m.engine_env.items() if sf.stack.env.get(k, v) != v)
                if clash:
                    raise AblationError(f"{opts.scenarios.path}: field 'engine_env' of {m.id}: {', '.join(clash)} "
                                        f"also set differently by {sf.path} ('env'); set it in one place")
        skip = {arch: self._skip_reasons(table, arch, ms) for arch, ms in machines.items()}
        runnable = [m for m in table.models if any(not s[m.id] for s in skip.values())]
        prepared = {m.id: prepare_model(m, opts.scenarios, self.models_root) for m in runnable}
        return Resolved(stack_files, {a: ms[0] for a, ms in machines.items()}, skip, prepared)

    def plan(self, opts: SweepOptions, resolved: Resolved | None = None) -> dict[str | None, list[Task]]:
        """Each architecture's tasks in run order (key None: the local run); builds (or reuses)
        the venvs they need, once for all architectures."""
        resolved = resolved or self.validate(opts)
        envs = {}
        plans: dict[str | None, list[Task]] = {arch: [] for arch in resolved.skip}
        for repeat, legs in leg_order(list(resolved.stack_files), opts.repeats):
            for leg in legs:
                sf = resolved.stack_files[leg]
                for m in opts.scenarios.table.models:
                    for arch, skip in resolved.skip.items():
                        if skip[m.id]:
                            plans[arch].append(Task(leg, m, repeat, None, None, skip_reason=skip[m.id]))
                            continue
                        override = sf.stack.override_for(m.id)
                        variant = override.name if override else None
                        if (leg, variant) not in envs:
                            envs[(leg, variant)] = self.builder.ensure(sf, variant)
                        plans[arch].append(Task(leg, m, repeat, envs[(leg, variant)], resolved.prepared[m.id],
                                                stack_env=sf.stack.env, stack_file=sf,
                                                patches_dir=self.builder.patches_dir))
        return plans

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
                self._check_resume_matches(run_dir, opts)
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
                  machine: Machine) -> tuple[RunContext, list[Task]]:
        """The run's context, its manifest and start event; returns the tasks it still has to do.
        `machine`: what the run's tasks run on (one of its architecture's nodes under --arch)."""
        ctx = RunContext(run_id, run_dir, opts.scenarios, machine,
                         timeout_override_s=opts.timeout_override_s, log=self.log)
        if opts.harness:
            ctx.harness = opts.harness
        done = finished_task_ids(run_dir) if opts.resume else set()
        run_dir.mkdir(parents=True, exist_ok=True)
        if opts.resume:
            self._kill_orphans(ctx)
        warnings = self._environment_warnings(machine)
        for w in warnings:
            self.log(f"warning: {w}")
        self._write_manifest(run_dir, opts, tasks, warnings, machine)
        todo = [t for t in tasks if t.task_id not in done]
        ctx.event("run_start" if not opts.resume else "run_resume", argv=sys.argv, legs=opts.legs,
                  scenario_sha256=opts.scenarios.sha256, tasks=len(tasks), already_done=len(done),
                  todo=[t.task_id for t in todo], warnings=warnings)
        return ctx, todo

    def _run_locked(self, opts: SweepOptions, runs: list[tuple[str, Path, str | None]],
                    resolved: Resolved) -> list[TaskOutcome]:
        plans = self.plan(opts, resolved)
        opened = [(*self._open_run(opts, rid, run_dir, plans[arch], resolved.machines[arch]), arch)
                  for rid, run_dir, arch in runs]
        outcomes: list[TaskOutcome] = []
        with sweep_progress(self.log) as progress:
            if opts.executor == "ray":
                from ablation.execution.ray_cluster import RayJob, run_on_ray

                jobs = [RayJob(t, ctx, arch) for ctx, todo, arch in opened for t in todo]
                progress.start(len(jobs), f"run {', '.join(rid for rid, _, _ in runs)} on Ray at {opts.ray_address}")
                outcomes = run_on_ray(jobs, opts.ray_address, progress)
            else:
                ctx, todo, _ = opened[0]
                progress.start(len(todo), f"run {ctx.run_id}")
                clock, stopped = time.monotonic(), False
                for i, task in enumerate(todo, 1):
                    # A SKIP costs nothing and is recorded even past the budget: never "not run".
                    if task.skip_reason is None and (stopped or self._out_of_budget(
                            opts, ctx, time.monotonic() - clock, outcomes, todo[i - 1:])):
                        stopped = True
                        continue
                    ctx.gpu_check = self._check_gpus_free()
                    progress.task_started(i, task.task_id)
                    outcome = run_task(task, ctx)
                    progress.task_finished(i, describe(outcome))
                    outcomes.append(outcome)
        for ctx, _, _ in opened:
            mine = [o for o in outcomes if o.results_path.is_relative_to(ctx.run_dir)]
            ctx.event("run_end", counts={s: sum(o.status == s for o in mine) for s in ("PASS", "FAIL", "SKIP")})
        return outcomes

    def _out_of_budget(self, opts: SweepOptions, ctx: RunContext, elapsed: float, outcomes: list[TaskOutcome],
                       rest: list[Task]) -> bool:
        if opts.stop_after_s is None or not outcomes:
            return False
        longest = max(o.duration_s for o in outcomes)
        if elapsed + longest <= opts.stop_after_s:
            return False
        left = sum(t.skip_reason is None for t in rest)  # the SKIPs among them are still recorded
        ctx.event("run_stopped", reason="stop-after", elapsed_s=round(elapsed, 1), longest_task_s=round(longest, 1),
                  stop_after_s=opts.stop_after_s, tasks_left=left)
        self.log(f"[run {ctx.run_id}] stopping before {left} task(s): {elapsed:.0f} s elapsed + the longest task "
                 f"so far ({longest:.0f} s) > --stop-after {opts.stop_after_s:.0f} s; continue with "
                 f"`ablation run --resume {ctx.run_id}`")
        return True

    @staticmethod
    def _check_resume_matches(run_dir: Path, opts: SweepOptions) -> None:
        """A resumed run must run the same table on the same legs, or its ratios would mix two studies."""
        manifest_path = layout.manifest_file(run_dir)
        if not manifest_path.is_file():
            return
        manifest = json.loads(manifest_path.read_text())
        recorded = manifest.get("scenario_table", {}).get("sha256")
        if recorded and recorded != opts.scenarios.sha256:
            raise AblationError(f"{opts.scenarios.path}: its sha256 {opts.scenarios.sha256[:12]} is not the table run "
                                f"'{run_dir.name}' started with ({recorded[:12]}); resume with that exact file")
        if manifest.get("legs") and sorted(manifest["legs"]) != sorted(opts.legs):
            raise AblationError(f"--leg: run '{run_dir.name}' was started with legs {', '.join(manifest['legs'])}; "
                                "resume with the same legs")

    @staticmethod
    def _environment_warnings(machine: Machine) -> list[str]:
        """Conditions that make numbers less comparable; recorded, not fatal."""
        unlocked = [g.index for g in machine.gpus if not g.clocks_locked]
        if unlocked:
            return [f"GPU clocks not locked on GPU {', '.join(map(str, unlocked))}: expect more run-to-run noise "
                    "(lock them with `nvidia-smi -lgc` for publication runs)"]
        return []

    def _check_gpus_free(self) -> str:
        """Between our tasks nothing of ours holds a GPU: any compute process is foreign."""
        if not self.machine.gpus:
            return "no GPU"
        busy = gpu_processes([g.index for g in self.machine.gpus])
        if busy:
            held = ", ".join(f"GPU {i} by pid {pid}" for i, pid in busy)
            raise AblationError(f"GPUs busy ({held}); stop those processes, then `ablation run --resume`")
        return f"GPU {', '.join(str(g.index) for g in self.machine.gpus)} free"

    def _kill_orphans(self, ctx: RunContext) -> None:
        """A runner killed mid-task takes its harness with it (die_with_parent), but not what the
        harness started (vLLM's engine and workers, in the harness's process group): end those
        before redoing the task."""
        events = read_jsonl(ctx.events)
        ended = {(e["task_id"], e.get("attempt")) for e in events if e.get("event") == "task_end"}
        for e in events:
            if e.get("event") != "task_pid" or (e["task_id"], e.get("attempt")) in ended:
                continue
            if e.get("node"):
                continue  # a Ray node's pid, on another machine: not ours to signal from here
            pgid = e["pid"]
            members = _task_group_members(pgid)
            if not members:
                continue  # gone, or the id was reused by something that is not a task of ours
            try:
                os.killpg(pgid, signal.SIGKILL)
                ctx.event("orphan_killed", task_id=e["task_id"], attempt=e.get("attempt"), pid=pgid, members=members)
                self.log(f"[run {ctx.run_id}] killed orphaned task {e['task_id']} (process group {pgid}: "
                         f"{len(members)} process(es))")
            except ProcessLookupError:
                pass

    def _write_manifest(self, run_dir: Path, opts: SweepOptions, tasks: list[Task], warnings: list[str],
                        machine: Machine) -> None:
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
            "created_at": utc_stamp(),
            "argv": sys.argv,
            "legs": opts.legs,
            "repeats": opts.repeats,
            "scenario_table": {"path": str(opts.scenarios.path), "sha256": opts.scenarios.sha256,
                               "name": opts.scenarios.table.name},
            "machine": machine.as_dict(),
            "environments": legs,
            "warnings": warnings,
        }
        path = layout.manifest_file(run_dir)
        n = 1
        while path.exists():
            path = run_dir / f"MANIFEST.resume-{n}.json"
            n += 1
        write_json_atomic(path, manifest)


def _task_group_members(pgid: int) -> list[int]:
    """Live processes of process group `pgid` that a task of ours started (they inherited
    ABLATION_RUNNER_PID from the harness's environment); [] when there are none."""
    members = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            # pgrp is the 3rd field after the parenthesised command name (which may hold spaces)
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            if b"ABLATION_RUNNER_PID=" in (proc / "environ").read_bytes():
                members.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return sorted(members)
