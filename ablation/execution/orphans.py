"""A runner killed mid-task leaves vLLM's engine processes behind (in the task's process group):
find them by their group and their task environment, and end them before the task is redone."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from ablation.execution.local import RunContext
from ablation.util.jsonio import read_jsonl


def kill_orphans(ctx: RunContext, log=print) -> None:
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
            log(f"[run {ctx.run_id}] killed orphaned task {e['task_id']} (process group {pgid}: "
                     f"{len(members)} process(es))")
        except ProcessLookupError:
            pass



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
