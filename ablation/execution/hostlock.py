"""One sweep per host at a time: a filelock plus a note saying who holds it.

Two sweeps on one machine would measure each other. The lock is an OS-level
lock (released by the kernel if the holder dies, even by SIGKILL), and the
holder's pid and run id sit beside it so the refusal can say who to wait for.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ablation.errors import AblationError
from ablation.util.paths import cache_path
from ablation.util.timestamps import utc_stamp


def default_lock_path() -> Path:
    return cache_path("ABLATION_LOCK_FILE", "host.lock")


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.with_suffix(".holder.json").read_text())
        return f"pid {info['pid']}, run {info['run_id']}, since {info['since']}"
    except (OSError, ValueError, KeyError):
        return "unknown holder"


@contextmanager
def host_lock(path: Path, run_id: str, wait: bool, wait_timeout_s: float | None = None, log=print):
    """Hold the host lock for a sweep; refuse at once, or wait when asked to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if not wait:
            raise AblationError(
                f"another sweep holds this machine ({_holder(path)}; lock {path}); "
                "wait for it or pass --wait to queue behind it"
            ) from None
        log(f"[lock] machine busy ({_holder(path)}); waiting")
        try:
            lock.acquire(timeout=-1 if wait_timeout_s is None else wait_timeout_s)
        except Timeout:
            raise AblationError(f"gave up after {wait_timeout_s} s waiting for {path} ({_holder(path)})") from None
    note = path.with_suffix(".holder.json")
    note.write_text(json.dumps({"pid": os.getpid(), "run_id": run_id,
                                "since": utc_stamp()}))
    try:
        yield
    finally:
        note.unlink(missing_ok=True)
        lock.release()
