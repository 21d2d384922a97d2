"""`--stop-after`: leased machines end at a known time, so start no task that the longest task so
far says cannot finish in time; the rest is resumed later."""

from __future__ import annotations

from ablation.execution.local import RunContext, Task, TaskOutcome


def out_of_budget(stop_after_s: float | None, ctx: RunContext, elapsed: float, outcomes: list[TaskOutcome],
                  rest: list[Task]) -> bool:
    if stop_after_s is None or not outcomes:
        return False
    longest = max(o.duration_s for o in outcomes)
    if elapsed + longest <= stop_after_s:
        return False
    left = sum(t.skip_reason is None for t in rest)  # the SKIPs among them are still recorded
    ctx.event("run_stopped", reason="stop-after", elapsed_s=round(elapsed, 1), longest_task_s=round(longest, 1),
              stop_after_s=stop_after_s, tasks_left=left)
    ctx.log(f"[run {ctx.run_id}] stopping before {left} task(s): {elapsed:.0f} s elapsed + the longest task "
             f"so far ({longest:.0f} s) > --stop-after {stop_after_s:.0f} s; continue with "
             f"`ablation run --resume {ctx.run_id}`")
    return True
