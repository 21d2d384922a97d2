"""`ablation bisect`: the first release that regressed one scenario."""

from __future__ import annotations

from pathlib import Path

import click

from ablation.cli.app import _builder, _stacks, main, one_line_errors
from ablation.cli.run import HARNESS_OPT, WAIT_OPT


@main.command("bisect")
@click.option("--scenario", "target", required=True, help="MODEL/WORKLOAD from the scenario table")
@click.option("--good", required=True, help="leg measured as good (its stack is the template)")
@click.option("--bad", required=True, help="leg measured as bad")
@click.option("--scenarios", "scenario_path", type=click.Path(path_type=Path), required=True)
@click.option("--metric", type=click.Choice(["throughput", "latency"]), default=None,
              help="[default: the workload's kind]")
@click.option("--threshold", default="5%", show_default=True, help="regression size that counts")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1))
@click.option("--releases", default=None, help="comma-separated releases to consider [default: the index's]")
@click.option("--out", "out_root", type=click.Path(path_type=Path), default=Path("results/bisect"),
              show_default=True)
@WAIT_OPT
@HARNESS_OPT
@click.pass_context
@one_line_errors
def bisect(ctx, target, good, bad, scenario_path, metric, threshold, repeats, releases, out_root, wait, harness):
    """Binary-search the releases between GOOD and BAD for the first regression of one scenario."""
    from ablation.bisect.search import Bisector, render_summary, setup_bisect
    from ablation.execution.machine import probe
    from ablation.execution.sweep import Sweep
    from ablation.modeldirs.prepare import default_models_root
    from ablation.spec.stacks import StackDir

    echo = lambda m: click.echo(m, err=True)  # noqa: E731
    b = setup_bisect(_stacks(ctx), ctx.obj["patches_dir"], target=target, good=good, bad=bad,
                     scenario_path=scenario_path, metric=metric, threshold=threshold, repeats=repeats,
                     releases=releases, out_root=out_root, wait=wait, harness=harness)
    sweep = Sweep(StackDir(root=b.plan.out_dir / "stacks", patches_dir=ctx.obj["patches_dir"]), _builder(ctx), default_models_root(), probe(), log=echo)
    echo(f"[bisect] {len(b.between)} release(s) between {good} and {bad}: {', '.join(b.between) or 'none'}")
    summary = Bisector(sweep, log=echo).run(b.plan, b.good, b.bad, b.between, b.table)
    click.echo(render_summary(summary))
    click.echo(f"\n{b.plan.out_dir / 'bisect.json'}")
