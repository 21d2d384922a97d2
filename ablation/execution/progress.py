"""Progress of a sweep: a rich progress bar on a terminal, plain lines otherwise.

Plain lines are what CI logs and `nohup` files want; the bar is for a person
watching a two-hour sweep. Both say task i/n, leg, model, elapsed and ETA.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager


class PlainProgress:
    def __init__(self, log=print):
        self.log = log
        self.total = 0
        self.started = time.monotonic()

    def start(self, total: int, title: str) -> None:
        self.total, self.started = total, time.monotonic()
        self.log(f"{title}: {total} tasks")

    def _eta(self, done: int) -> str:
        elapsed = time.monotonic() - self.started
        if done == 0:
            return f"elapsed {elapsed:.0f} s"
        return f"elapsed {elapsed:.0f} s, ETA {elapsed / done * (self.total - done):.0f} s"

    def task_started(self, index: int, task_id: str) -> None:
        self.log(f"task {index}/{self.total}: {task_id} ({self._eta(index - 1)})")

    def task_finished(self, index: int, line: str) -> None:
        self.log(line)

    def stop(self) -> None:
        pass


class RichProgress(PlainProgress):
    """The same events, drawn as a live bar; finished tasks scroll above it."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = Console(stderr=True)
        super().__init__(log=self.console.print)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console)
        self.task = None

    def start(self, total: int, title: str) -> None:
        super().start(total, title)
        self.bar.start()
        self.task = self.bar.add_task(title, total=total)

    def task_started(self, index: int, task_id: str) -> None:
        self.bar.update(self.task, description=f"[bold]{task_id}[/bold]")

    def task_finished(self, index: int, line: str) -> None:
        style = {"PASS": "green", "FAIL": "red", "SKIP": "yellow"}.get(line.split()[0], "")
        self.console.print(f"[{style}]{line}[/{style}]" if style else line, markup=True, highlight=False)
        self.bar.update(self.task, completed=index)

    def stop(self) -> None:
        self.bar.stop()


@contextmanager
def sweep_progress(log=print):
    """Rich on a terminal, plain lines through `log` anywhere else."""
    progress = RichProgress() if sys.stderr.isatty() else PlainProgress(log)
    try:
        yield progress
    finally:
        progress.stop()
