"""`--stop-after`: leased machines end at a known time, so start no task that, as predicted from the
tasks before it, cannot finish in time; the rest is resumed later.

The prediction for the next task is the longest of:
- the longest task so far in this invocation;
- for a task that starts warm, the longest warm task of its own leg and model in this run, in this
  invocation or an earlier one (one leg's warm start-up can be slower than another's); where its own
  leg has run no warm task of the model yet, the longest warm task of the same model on the run's other
  legs (session 18: a warm 0.26 task started unjudged while 0.29's warm one had taken 138 s);
- for a task that starts cold, `--expect-task`: a cold start that the tasks before it do not predict
  (a slower leg's, or a larger model's)."""

from __future__ import annotations

from ablation.envs import caches
from ablation.execution.local import RunContext, Task, TaskOutcome


def _kind(task_id: str) -> str:
    """A task id without its repeat: the leg and model ("0.26-h200/openai__whisper-large-v3")."""
    return task_id.rsplit("/", 1)[0]


def _model(kind: str) -> str:
    """A leg and model's model ("openai__whisper-large-v3"): leg names hold no "/", nor do model slugs."""
    return kind.split("/", 1)[1]


def _warm_on_other_legs(earlier: dict[str, float | None], kind: str) -> list[float]:
    """The seconds of the warm tasks among `earlier` (in the order they ended) of `kind`'s model on other
    legs: each leg's tasks of it but its first (its cold start), SKIPs (None) left out."""
    by_kind: dict[str, list[float | None]] = {}
    for task_id, s in earlier.items():
        if _kind(task_id) != kind and _model(_kind(task_id)) == _model(kind):
            by_kind.setdefault(_kind(task_id), []).append(s)
    return [s for seconds in by_kind.values() for s in seconds[1:] if s is not None]


def starts_cold(task: Task, same: list[float | None]) -> bool:
    """Whether the task's process will compile its engine from nothing, as the tasks before it did not:
    no earlier task of this run ran its leg and model (`same`: their seconds, in the order they ended, in
    this invocation or an earlier one of the run), or its leg's compile and JIT caches are empty now (a
    fresh machine, a resumed run included)."""
    return not same or task.env is None or caches.state(task.env.path)["files"] == 0


def out_of_budget(stop_after_s: float | None, ctx: RunContext, elapsed: float, outcomes: list[TaskOutcome],
                  rest: list[Task], expect_task_s: float | None = None,
                  done: dict[str, float | None] | None = None) -> bool:
    """Whether the next task (`rest[0]`) must not start, by the prediction in this module's docstring.
    `done`: the run's tasks finished by earlier invocations, in the order they ended, with their seconds.
    Without any prediction (no task so far in this run's history that applies, no `expect_task_s`), the
    task starts."""
    if stop_after_s is None:
        return False
    nxt = rest[0]
    earlier = {**(done or {}), **{o.task_id: o.duration_s for o in outcomes}}
    kind = _kind(nxt.task_id)
    same = [s for i, s in earlier.items() if _kind(i) == kind]
    cold = starts_cold(nxt, same)
    longest = max((o.duration_s for o in outcomes), default=0.0)
    # A warm task's own history: its leg and model's warm tasks; without any, the same model's on other legs.
    own_warm = [] if cold else [s for s in same[1:] if s is not None]
    other_warm = [] if cold or own_warm else _warm_on_other_legs(earlier, kind)
    own, other = max(own_warm, default=0.0), max(other_warm, default=0.0)
    expect = expect_task_s if cold and expect_task_s is not None else 0.0
    expected = max(longest, own, other, expect)
    if expected == 0.0 or elapsed + expected <= stop_after_s:
        return False
    left = sum(t.skip_reason is None for t in rest)  # the SKIPs among them are still recorded
    ctx.event("run_stopped", reason="stop-after", elapsed_s=round(elapsed, 1), longest_task_s=round(longest, 1),
              expect_task_s=expect_task_s, next_task=nxt.task_id, next_starts_cold=cold,
              predicted_s=round(expected, 1), stop_after_s=stop_after_s, tasks_left=left)
    if expected == longest:
        judged = f"the longest task so far ({longest:.0f} s)"
    elif expected == own:
        judged = f"the longest warm task of {kind} so far ({own:.0f} s)"
    elif expected == other:
        judged = f"the longest warm task of {_model(kind)} on another leg so far ({other:.0f} s; {kind} has run none warm)"
    else:
        judged = f"--expect-task ({expect_task_s:.0f} s) for {nxt.task_id}, which starts cold"
    ctx.log(f"[run {ctx.run_id}] stopping before {left} task(s): {elapsed:.0f} s elapsed + {judged} "
            f"> --stop-after {stop_after_s:.0f} s; continue with `ablation run --resume {ctx.run_id}`")
    return True
