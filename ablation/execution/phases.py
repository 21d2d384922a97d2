"""Where a task's wall time went: startup, import, engine init, warm-up, timed work.

From the harness's own clocks (`timings`, per-workload `warmup_s`/`timed_s`) and the
executor's wall time, so a sweep can say how much of itself was measurement.
"""

from __future__ import annotations

PHASES = ("import", "engine_init", "warmup", "timed", "other")


def task_phases(duration_s: float, harness: dict | None, workloads: dict | None) -> dict[str, float] | None:
    """Seconds per phase; "other" is the rest of the wall time (process start, prompt making,
    engine teardown). None when the harness reported no timings (an old or fake harness)."""
    timings = (harness or {}).get("timings") or {}
    if "import_s" not in timings:
        return None
    ws = (workloads or {}).values()
    phases = {"import": timings.get("import_s", 0.0), "engine_init": timings.get("load_s", 0.0),
              "warmup": sum(w.get("warmup_s", 0.0) for w in ws), "timed": sum(w.get("timed_s", 0.0) for w in ws)}
    phases["other"] = max(0.0, duration_s - sum(phases.values()))
    return {k: round(v, 2) for k, v in phases.items()}


def breakdown_line(phases: dict[str, float] | None) -> str:
    if not phases:
        return ""
    return ", ".join(f"{k.replace('_', ' ')} {phases[k]:.0f} s" for k in PHASES)


def timed_share(phases_list: list[dict[str, float] | None], wall_s: float) -> str:
    """The sweep's last line: how much of its wall time was timed work."""
    timed = sum((p or {}).get("timed", 0.0) for p in phases_list)
    share = timed / wall_s if wall_s > 0 else 0.0
    return f"timed work {share:.0%} of wall ({timed:.0f} s of {wall_s:.0f} s)"
