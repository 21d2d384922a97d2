"""`--stop-after`: leased machines end at a known time, so start no task that the longest task so
far (or `--expect-task`, where longer) says cannot finish in time; the rest is resumed later."""

from __future__ import annotations

from ablation.execution.local import RunContext, Task, TaskOutcome


def out_of_budget(stop_after_s: float | None, ctx: RunContext, elapsed: float, outcomes: list[TaskOutcome],
                  rest: list[Task], expect_task_s: float | None = None) -> bool:
    """Whether the next task must not start. Judged by the longest task so far in this invocation, or by
    `expect_task_s` where that is longer: a task the earlier ones do not predict (the first cold start of
    a slower leg or a larger model). Without either, the first task always starts."""
    if stop_after_s is None or (not outcomes and expect_task_s is None):
        return False
    longest = max((o.duration_s for o in outcomes), default=0.0)
    expected = max(longest, expect_task_s or 0.0)
    if elapsed + expected <= stop_after_s:
        return False
    left = sum(t.skip_reason is None for t in rest)  # the SKIPs among them are still recorded
    ctx.event("run_stopped", reason="stop-after", elapsed_s=round(elapsed, 1), longest_task_s=round(longest, 1),
              expect_task_s=expect_task_s, stop_after_s=stop_after_s, tasks_left=left)
    judged = (f"the longest task so far ({longest:.0f} s)" if longest == expected
              else f"--expect-task ({expect_task_s:.0f} s)")
    ctx.log(f"[run {ctx.run_id}] stopping before {left} task(s): {elapsed:.0f} s elapsed + {judged} "
            f"> --stop-after {stop_after_s:.0f} s; continue with `ablation run --resume {ctx.run_id}`")
    return True
