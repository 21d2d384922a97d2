"""Click's own parsing errors follow the CLI's rule for bad input: one `error:` line naming the
command and the option, exit 2. Before, every typed option (`--repeats abc`, `--expect-task abc`)
printed click's three-line usage block instead."""

from __future__ import annotations

import pytest
from helpers import one_line_error, run_cli


@pytest.mark.parametrize("args, names", [
    (["run", "--repeats", "abc"], ["run", "'--repeats'", "'abc'"]),
    (["run", "--expect-task", "abc"], ["run", "'--expect-task'", "'abc'"]),
    (["run", "--no-such-option"], ["run", "'--no-such-option'"]),
    (["stacks", "caches", "--no-such-option"], ["stacks caches", "'--no-such-option'"]),
    (["stacks", "env"], ["stacks env", "'LEG'"]),
    (["no-such-command"], ["'no-such-command'"]),
])
def test_click_usage_errors_are_one_line_naming_command_and_option(args, names):
    proc = run_cli(*args, timeout=60)
    line = one_line_error(proc)
    assert "Usage:" not in proc.stderr and "Try '" not in proc.stderr, proc.stderr
    for name in names:
        assert name in line, line


def test_help_and_a_good_command_still_exit_0():
    for args in (["--help"], ["run", "--help"], ["stacks", "caches", "--help"]):
        proc = run_cli(*args, timeout=60)
        assert proc.returncode == 0 and proc.stdout.startswith("Usage:"), (args, proc.stderr)
    assert run_cli("stacks", "list", timeout=60).returncode == 0
