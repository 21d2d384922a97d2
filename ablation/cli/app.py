"""`ablation`: the command line. Every user error is one line on stderr and exit 2."""

from __future__ import annotations

import sys
from functools import wraps
from pathlib import Path
from typing import NoReturn

import click

from ablation.errors import AblationError, one_line

REPO = Path(__file__).resolve().parent.parent.parent


def one_line_errors(fn):
    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AblationError as exc:
            click.echo(f"error: {one_line(str(exc))}", err=True)
            sys.exit(2)

    return wrapper


def _usage_error_line(exc: click.UsageError) -> NoReturn:
    """Click's own parsing errors (a bad option value, an unknown option, a missing argument) as
    the one line every other user error gets, naming the command and the option."""
    where = exc.ctx.command_path if exc.ctx is not None else "ablation"
    click.echo(f"error: {where}: {one_line(exc.format_message())} (see {where} --help)", err=True)
    sys.exit(2)


class OneLineUsageErrors(click.Group):
    """The top-level group. Click prints its usage errors as a usage block, a hint and an
    `Error:` line; here they are one `error:` line and exit 2, like every other bad input.
    Subcommands and subgroups are parsed inside this group's `invoke`, so one override covers
    them all; `--help`, `ctx.exit` and the commands' own exits pass through unchanged."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            _usage_error_line(exc)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _usage_error_line(exc)


def positive_seconds(value: float | None, option: str, allow_zero: bool = False) -> float | None:
    """A duration option: finite and > 0 (>= 0 where zero means something), else one error line."""
    import math

    if value is None:
        return None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise AblationError(f"{option}: {value} is not a number of seconds; give a finite number "
                            f"{'>= 0' if allow_zero else '> 0'}")
    return value


def _stacks(ctx):
    from ablation.spec.stacks import StackDir

    return StackDir(root=ctx.obj["stacks_dir"], patches_dir=ctx.obj["patches_dir"])


def _builder(ctx):
    from ablation.envs.builder import VenvBuilder

    return VenvBuilder(ctx.obj["venv_root"], ctx.obj["patches_dir"], log=lambda m: click.echo(m, err=True))


@click.group(cls=OneLineUsageErrors)
@click.option("--stacks-dir", type=click.Path(path_type=Path), default=REPO / "stacks", show_default=True)
@click.option("--patches-dir", type=click.Path(path_type=Path), default=REPO / "patches", show_default=True)
@click.option("--venv-root", type=click.Path(path_type=Path), default=None,
              help="where leg venvs live [default: $ABLATION_VENV_ROOT or ~/.cache/vllm-ablation/venvs]")
@click.pass_context
def main(ctx, stacks_dir: Path, patches_dir: Path, venv_root: Path | None):
    """Run one scenario table on several vLLM releases (legs) and compare them."""
    from ablation.envs.builder import default_venv_root

    ctx.obj = {"stacks_dir": stacks_dir, "patches_dir": patches_dir, "venv_root": venv_root or default_venv_root()}
