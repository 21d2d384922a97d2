"""Crash-safe file writes: whole files atomically, event streams append-only."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_bytes_atomic(path: Path, content: bytes) -> None:
    """Write to a temp file in the same directory, fsync, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: Path, data: dict) -> None:
    write_bytes_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


def append_jsonl(path: Path, event: dict) -> None:
    """Append one line and fsync: a SIGKILL can lose at most the line being written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(event, sort_keys=True) + "\n"
    with open(path, "a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: Path) -> list[dict]:
    """Every complete event; a torn last line (runner killed mid-write) is skipped."""
    if not path.is_file():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events
