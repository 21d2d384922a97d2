"""`ablation scenarios ...`: look at a scenario table before running it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ablation.cli.app import _stacks, main, one_line_errors


@main.group()
def scenarios():
    """Inspect scenario tables."""


@scenarios.command("check")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--leg", "legs", multiple=True, help="a leg (or stack file) to check as the sweep would load it; repeatable")
@click.option("--repeats", type=int, default=1, show_default=True, help="repeats, for the task count")
@click.option("--gpus", type=int, default=None,
              help="judge a described machine with this many GPUs (0: a CPU machine) instead of this one")
@click.option("--compute-capability", "cc", type=float, default=None,
              help="the described machine's GPU compute capability, X.Y (9.0 Hopper, 10.0 Blackwell)")
@click.option("--gpu-memory-gib", "gpu_memory_gib", type=float, default=None,
              help="the described machine's memory per GPU in GiB (H100 80GB: 79.6, H200: 140.4) [default: not judged]")
@click.option("--cpus", type=int, default=None, help="the described machine's CPUs [default: this machine's]")
@click.pass_context
@one_line_errors
def scenarios_check(ctx, file: Path, legs: tuple[str, ...], repeats: int, gpus: int | None, cc: float | None,
                    cpus: int | None, gpu_memory_gib: float | None):
    """Per model and workload: RUN or SKIP (and why) on this machine or a described one, the rows and
    tasks a sweep would have, and with --leg whether each leg's stack file loads and which per-model
    variant applies. Nothing is built or run. Exit 0; 1 when the sweep would refuse something
    (a leg that does not load or cannot run here, a runnable model without config.json); 2 on bad input."""
    from ablation.errors import AblationError
    from ablation.execution.machine import probe
    from ablation.execution.preflight import check, described_machine, render
    from ablation.spec.scenarios import load_scenarios

    if gpus is None and (cc is not None or cpus is not None or gpu_memory_gib is not None):
        raise AblationError("--compute-capability/--cpus/--gpu-memory-gib describe a machine: give --gpus N with them")
    sf = load_scenarios(file)
    described = gpus is not None
    machine = described_machine(gpus, cc, cpus, gpu_memory_gib) if described else probe()
    result = check(sf, machine, described=described, legs=list(legs), stacks=_stacks(ctx), repeats=repeats)
    for line in render(result):
        click.echo(line)
    if not result.ready:
        sys.exit(1)
