"""Where a sweep's tasks run, behind one interface: serially on this machine, or on a Ray cluster.

Both take the runs the sweep opened (each its context and the tasks it still has to do) and return
every outcome; both run a task the same way (`local.run_task`: own process group, timeout, checks).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from ablation.errors import AblationError
from ablation.execution.budget import out_of_budget
from ablation.execution.local import RunContext, Task, TaskOutcome, describe, run_task
from ablation.execution.machine import Machine, gpu_processes


@dataclass
class OpenRun:
    ctx: RunContext
    todo: list[Task]
    arch: str | None = None  # Ray --arch: the architecture whose nodes run it
    # Tasks finished by earlier invocations (--resume), in the order they ended: id -> seconds (None: a SKIP).
    done: dict[str, float | None] = field(default_factory=dict)


class Executor(Protocol):
    def run(self, runs: list[OpenRun], progress) -> list[TaskOutcome]: ...


class LocalExecutor:
    """One task at a time on this machine, each only when no foreign process holds a GPU."""

    def __init__(self, machine: Machine, stop_after_s: float | None = None, expect_task_s: float | None = None):
        self.machine = machine
        self.stop_after_s = stop_after_s
        self.expect_task_s = expect_task_s

    def run(self, runs: list[OpenRun], progress) -> list[TaskOutcome]:
        (run,) = runs  # a local sweep is one run
        ctx, todo = run.ctx, run.todo
        progress.start(len(todo), f"run {ctx.run_id}")
        clock, stopped, outcomes = time.monotonic(), False, []
        for i, task in enumerate(todo, 1):
            # A SKIP costs nothing and is recorded even past the budget: never "not run".
            if task.skip_reason is None and (stopped or out_of_budget(
                    self.stop_after_s, ctx, time.monotonic() - clock, outcomes, todo[i - 1:], self.expect_task_s,
                    run.done)):
                stopped = True
                continue
            ctx.gpu_check = self._check_gpus_free()
            progress.task_started(i, task.task_id)
            outcome = run_task(task, ctx)
            progress.task_finished(i, describe(outcome))
            outcomes.append(outcome)
        return outcomes

    def _check_gpus_free(self) -> str:
        """Between our tasks nothing of ours holds a GPU: any compute process is foreign."""
        if not self.machine.gpus:
            return "no GPU"
        busy = gpu_processes([g.index for g in self.machine.gpus])
        if busy:
            held = ", ".join(f"GPU {i} by pid {pid}" for i, pid in busy)
            raise AblationError(f"GPUs busy ({held}); stop those processes, then `ablation run --resume`")
        return f"GPU {', '.join(str(g.index) for g in self.machine.gpus)} free"


class RayExecutor:
    """Every run's tasks on an existing Ray cluster at once, one task per node at a time."""

    def __init__(self, address: str):
        self.address = address

    def run(self, runs: list[OpenRun], progress) -> list[TaskOutcome]:
        from ablation.execution.ray_cluster import RayJob, run_on_ray

        jobs = [RayJob(t, r.ctx, r.arch) for r in runs for t in r.todo]
        progress.start(len(jobs), f"run {', '.join(r.ctx.run_id for r in runs)} on Ray at {self.address}")
        return run_on_ray(jobs, self.address, progress)
