"""`--stop-after`: leased machines end at a known time, so start no task that the longest task so
far (or `--expect-task`, where longer, for a task that starts cold) says cannot finish in time; the
rest is resumed later."""

from __future__ import annotations

from ablation.envs import caches
from ablation.execution.local import RunContext, Task, TaskOutcome


def _kind(task_id: str) -> str:
    """A task id without its repeat: the leg and model ("0.26-h200/openai__whisper-large-v3")."""
    return task_id.rsplit("/", 1)[0]


def starts_cold(task: Task, earlier: set[str]) -> bool:
    """Whether the task's process will compile its engine from nothing, as the tasks before it did not:
    no earlier task of this run ran its leg and model (`earlier`: task ids finished before, in this
    invocation or an earlier one of the run), or its leg's compile and JIT caches are empty now (a fresh
    machine, a resumed run included)."""
    if _kind(task.task_id) not in {_kind(i) for i in earlier}:
        return True
    return task.env is None or caches.state(task.env.path)["files"] == 0


def out_of_budget(stop_after_s: float | None, ctx: RunContext, elapsed: float, outcomes: list[TaskOutcome],
                  rest: list[Task], expect_task_s: float | None = None, done: set[str] | None = None) -> bool:
    """Whether the next task (`rest[0]`) must not start. Judged by the longest task so far in this
    invocation, or by `expect_task_s` where that is longer and the next task starts cold (`starts_cold`):
    a task the earlier ones do not predict, such as the first cold start of a slower leg or a larger
    model. A warm repeat is judged by the longest task so far only. Without a judgement (no task so far,
    and no `expect_task_s` that applies), the task starts."""
    if stop_after_s is None:
        return False
    cold = expect_task_s is not None and starts_cold(rest[0], (done or set()) | {o.task_id for o in outcomes})
    if not outcomes and not cold:
        return False
    longest = max((o.duration_s for o in outcomes), default=0.0)
    expected = max(longest, expect_task_s) if cold else longest
    if elapsed + expected <= stop_after_s:
        return False
    left = sum(t.skip_reason is None for t in rest)  # the SKIPs among them are still recorded
    ctx.event("run_stopped", reason="stop-after", elapsed_s=round(elapsed, 1), longest_task_s=round(longest, 1),
              expect_task_s=expect_task_s, next_task=rest[0].task_id, expect_task_applies=cold,
              stop_after_s=stop_after_s, tasks_left=left)
    judged = (f"the longest task so far ({longest:.0f} s)" if longest == expected
              else f"--expect-task ({expect_task_s:.0f} s) for {rest[0].task_id}, which starts cold")
    ctx.log(f"[run {ctx.run_id}] stopping before {left} task(s): {elapsed:.0f} s elapsed + {judged} "
            f"> --stop-after {stop_after_s:.0f} s; continue with `ablation run --resume {ctx.run_id}`")
    return True
