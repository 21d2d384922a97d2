"""`ablation run` and `node-resources`: sweeps, locally or on Ray."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ablation.cli.app import _builder, _stacks, main, one_line_errors, positive_seconds
from ablation.errors import AblationError

# Options that `run` and `bisect` share (both start sweeps).
WAIT_OPT = click.option("--wait/--no-wait", default=False, show_default=True,
                        help="if another sweep holds this machine: queue behind it, or refuse at once")
HARNESS_OPT = click.option("--harness", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                           help="(testing) replace the vLLM harness, e.g. with tests/fault_harness.py")


@main.command("run")
@click.option("--leg", "legs", multiple=True, help="leg to run (repeatable); see `ablation stacks list`")
@click.option("--scenarios", "scenario_path", type=click.Path(path_type=Path), required=True)
@click.option("--results", "results_root", type=click.Path(path_type=Path), default=Path("results"),
              show_default=True)
@click.option("--run-id", default=None, help="name of the run directory [default: UTC timestamp]")
@click.option("--resume", "resume_id", default=None, help="continue run RUN: redo only unfinished tasks")
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(1))
@click.option("--repeat-order", type=click.Choice(["round", "model"]), default="round", show_default=True,
              help="round: every model's repeat 1, then every model's repeat 2, ...; model: all of one model's "
                   "repeats before the next model (a run stopped early keeps whole models)")
@click.option("--model", "models", multiple=True,
              help="run only this model id of the table (repeatable); the table and its sha256 are unchanged")
@click.option("--timeout", "timeout_s", type=float, default=None, help="per-task timeout override (s)")
@click.option("--stop-after", "stop_after_s", type=float, default=None,
              help="start no task that, as predicted from the tasks before it (the longest so far, and a warm "
                   "task's own leg and model's warm tasks, or the same model's on other legs where its leg has "
                   "none), would end later than this many seconds after the first task could start (venv checks "
                   "and planning come before it; a leased machine); finish with --resume")
@click.option("--expect-task", "expect_task_s", type=float, default=None,
              help="with --stop-after: judge every next task that starts cold (the first of its leg and model in "
                   "the run, or its leg's caches empty) as taking at least this many seconds: a slower leg's or "
                   "a larger model's cold start, which the earlier tasks do not predict")
@WAIT_OPT
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: serial on this machine; ray: one task per node of an existing Ray cluster")
@click.option("--address", "ray_address", default=None, help="Ray cluster address (with --executor ray)")
@click.option("--arch", "archs", multiple=True,
              help="with --executor ray: run the table on nodes of this architecture (as `ablation "
                   "node-resources` names it; repeatable, or `all`), each into RESULTS/RUN@ARCH")
@HARNESS_OPT
@click.pass_context
@one_line_errors
def run(ctx, legs, scenario_path, results_root, run_id, resume_id, repeats, repeat_order, models, timeout_s, stop_after_s,
        expect_task_s,
        wait, executor, ray_address, archs, harness):
    """Run every scenario of the table on each leg, serially, one process per (leg, model)."""
    from ablation.execution.machine import probe
    from ablation.execution.sweep import Sweep, SweepOptions
    from ablation.modeldirs.prepare import default_models_root
    from ablation.spec import identifiers
    from ablation.spec.scenarios import load_scenarios

    for option, value in (("--run-id", run_id), ("--resume", resume_id)):
        if value is not None:
            identifiers.check(identifiers.run_id, value, option)
    positive_seconds(timeout_s, "--timeout")
    positive_seconds(stop_after_s, "--stop-after", allow_zero=True)
    positive_seconds(expect_task_s, "--expect-task")
    if expect_task_s is not None and stop_after_s is None:
        raise AblationError("--expect-task is a --stop-after judgement; give --stop-after too")
    scenarios = load_scenarios(scenario_path)
    if resume_id and run_id and resume_id != run_id:
        raise AblationError("--resume and --run-id name different runs; give one")
    echo = lambda m: click.echo(m, err=True)  # noqa: E731
    sweep = Sweep(_stacks(ctx), _builder(ctx), default_models_root(), probe(), log=echo)
    opts = SweepOptions(list(legs), scenarios, results_root, run_id=resume_id or run_id, resume=bool(resume_id),
                        repeats=repeats, repeat_order=repeat_order, models=list(models) or None,
                        timeout_override_s=timeout_s, wait_for_lock=wait,
                        harness=harness.resolve() if harness else None, executor=executor, ray_address=ray_address,
                        stop_after_s=stop_after_s, expect_task_s=expect_task_s, archs=list(archs) or None)
    if executor == "ray" and not ray_address:
        raise AblationError("--executor ray needs --address (the cluster's head, e.g. 127.0.0.1:6379)")
    run_dir, outcomes = sweep.run(opts)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("PASS", "FAIL", "SKIP")}
    click.echo(f"{run_dir}: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP")


@main.command("node-resources")
@click.option("--arch", default=None, help="advertise this architecture instead of the one detected")
@one_line_errors
def node_resources(arch):
    """The --resources JSON for `ray start` on this machine: one task slot and what it is.

    `ray start --address HEAD --resources "$(ablation node-resources)"`; the architecture is the
    GPU model and compute capability read through NVML (`nvidia-h200-sm90`), else `cpu-<model>`.
    """
    from ablation.execution.machine import probe
    from ablation.execution.ray_cluster import ARCH_RESOURCE, NODE_RESOURCE

    click.echo(json.dumps({NODE_RESOURCE: 1, ARCH_RESOURCE + (arch or probe().arch): 1}))
