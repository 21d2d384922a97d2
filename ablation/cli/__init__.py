"""The `ablation` command line: one module per command group, registered on `app.main`."""

from ablation.cli import bisect, compare, run, scenarios, stacks  # noqa: F401  (registers the commands)
from ablation.cli.app import main

__all__ = ["main"]
