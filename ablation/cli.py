"""`ablation`: the command line. Every user error is one line on stderr and exit 2."""

from __future__ import annotations

import json
import sys
from functools import wraps
from pathlib import Path

import click

from ablation.errors import AblationError

REPO = Path(__file__).resolve().parent.parent


def one_line_errors(fn):
    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AblationError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)

    return wrapper


def _stacks(ctx):
    from ablation.stacks import StackDir

    return StackDir(root=ctx.obj["stacks_dir"])


def _builder(ctx):
    from ablation.venvs import VenvBuilder

    return VenvBuilder(ctx.obj["venv_root"], ctx.obj["patches_dir"], log=lambda m: click.echo(m, err=True))


@click.group()
@click.option("--stacks-dir", type=click.Path(path_type=Path), default=REPO / "stacks", show_default=True)
@click.option("--patches-dir", type=click.Path(path_type=Path), default=REPO / "patches", show_default=True)
@click.option("--venv-root", type=click.Path(path_type=Path), default=None,
              help="where leg venvs live [default: $ABLATION_VENV_ROOT or ~/.cache/vllm-ablation/venvs]")
@click.pass_context
def main(ctx, stacks_dir: Path, patches_dir: Path, venv_root: Path | None):
    """Run one scenario table on several vLLM releases (legs) and compare them."""
    from ablation.venvs import default_venv_root

    ctx.obj = {"stacks_dir": stacks_dir, "patches_dir": patches_dir, "venv_root": venv_root or default_venv_root()}


@main.group()
def stacks():
    """List, show and build leg environments."""


@stacks.command("list")
@click.pass_context
@one_line_errors
def stacks_list(ctx):
    """One line per leg: engine, platform, and whether its venv is built."""
    sd, builder = _stacks(ctx), _builder(ctx)
    for leg in sd.legs():
        sf = sd.load(leg)
        s = sf.stack
        built = "built" if builder.existing(sf) else "not built"
        variants = f" variants: {', '.join(o.name for o in s.overrides)}" if s.overrides else ""
        click.echo(f"{leg:12} {s.engine}=={s.engine_version:10} {s.platform:5} python {s.python}  {built}{variants}")


@stacks.command("show")
@click.argument("leg")
@click.pass_context
@one_line_errors
def stacks_show(ctx, leg: str):
    """The stack file as parsed, and the built venv's manifest if there is one."""
    sf = _stacks(ctx).load(leg)
    click.echo(json.dumps({"file": str(sf.path), "sha256": sf.sha256, "stack": sf.stack.model_dump()}, indent=2))
    env = _builder(ctx).existing(sf)
    if env:
        man = {k: v for k, v in env.manifest.items() if k != "packages"}
        click.echo(json.dumps({"venv": str(env.path), "manifest": man}, indent=2))


@stacks.command("env")
@click.argument("leg")
@click.pass_context
@one_line_errors
def stacks_env(ctx, leg: str):
    """`export` lines for the environment the harness of LEG runs with (stack env, per-leg caches).

    For a measurement made by hand in the leg's venv, e.g. bench/fidelity_offline.py:
    `eval "$(ablation stacks env LEG)"` gives it the harness's environment exactly."""
    import shlex

    from ablation.executor import leg_process_env
    from ablation.venvs import without_runner_python

    sd, builder = _stacks(ctx), _builder(ctx)
    sf = sd.load(leg)
    env = without_runner_python({**sf.stack.env, **leg_process_env(builder.path_for(sf.leg))})
    for name, value in env.items():
        click.echo(f"export {name}={shlex.quote(value)}")


@stacks.command("build")
@click.argument("legs", nargs=-1, required=True)
@click.option("--variant", default=None, help="build a per-model override variant")
@click.option("--all-variants", is_flag=True, help="also build every override variant of the leg")
@click.option("--force", is_flag=True, help="rebuild even if the venv matches the stack")
@click.pass_context
@one_line_errors
def stacks_build(ctx, legs, variant, all_variants, force):
    """Build (or reuse) the venv of each LEG with uv."""
    sd, builder = _stacks(ctx), _builder(ctx)
    for leg in legs:
        sf = sd.load(leg)
        variants = [variant] if variant else [None]
        if all_variants:
            variants += [o.name for o in sf.stack.overrides]
        for v in variants:
            env = builder.ensure(sf, v, force=force)
            click.echo(f"{env.path}  lock sha256 {env.lock_sha256[:12]}  {len(env.manifest['packages'])} packages")


@main.command("make-tiny-model")
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--seed", default=0, show_default=True)
@one_line_errors
def make_tiny_model(out_dir: Path, seed: int):
    """Write a 2-layer Llama checkpoint + BPE tokenizer trained here (no hub needed)."""
    from ablation.tinymodel import make_tiny_llama

    digest = make_tiny_llama(out_dir, seed=seed)
    click.echo(f"{out_dir}  sha256 {digest}")


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
@click.option("--timeout", "timeout_s", type=float, default=None, help="per-task timeout override (s)")
@click.option("--stop-after", "stop_after_s", type=click.FloatRange(min=0), default=None,
              help="start no task that, judged by the longest task so far, would end later than this many "
                   "seconds after the start (a leased machine); finish with --resume")
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
def run(ctx, legs, scenario_path, results_root, run_id, resume_id, repeats, timeout_s, stop_after_s, wait, executor,
        ray_address, archs, harness):
    """Run every scenario of the table on each leg, serially, one process per (leg, model)."""
    from ablation.machine import probe
    from ablation.models import default_models_root
    from ablation.scenarios import load_scenarios
    from ablation.sweep import Sweep, SweepOptions

    scenarios = load_scenarios(scenario_path)
    if resume_id and run_id and resume_id != run_id:
        raise AblationError("--resume and --run-id name different runs; give one")
    echo = lambda m: click.echo(m, err=True)  # noqa: E731
    sweep = Sweep(_stacks(ctx), _builder(ctx), default_models_root(), probe(), log=echo)
    opts = SweepOptions(list(legs), scenarios, results_root, run_id=resume_id or run_id, resume=bool(resume_id),
                        repeats=repeats, timeout_override_s=timeout_s, wait_for_lock=wait,
                        harness=harness.resolve() if harness else None, executor=executor, ray_address=ray_address,
                        stop_after_s=stop_after_s, archs=list(archs) or None)
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
    from ablation.machine import probe
    from ablation.ray_executor import ARCH_RESOURCE, NODE_RESOURCE

    click.echo(json.dumps({NODE_RESOURCE: 1, ARCH_RESOURCE + (arch or probe().arch): 1}))


def _load_selected(paths: tuple[Path, ...], canonical_path: Path | None):
    """Results under PATHS, reduced to one authoritative run per (leg, model)."""
    from ablation.canonical import FILENAME, load_canonical, select
    from ablation.results import load_results

    rs = load_results(list(paths))
    if not rs.results:
        raise AblationError(f"no results.json under {', '.join(map(str, paths))}; run `ablation run` first")
    if canonical_path is None:
        found = [p / FILENAME for p in paths if (p / FILENAME).is_file()]
        canonical_path = found[0] if found else None
    canonical = load_canonical(canonical_path) if canonical_path else None
    selected, _ = select(rs, canonical)
    return selected


def _legs_option(legs: str | None, rs) -> list[str]:
    if not legs:
        return rs.legs()
    chosen = [x.strip() for x in legs.split(",") if x.strip()]
    unknown = [x for x in chosen if x not in rs.legs()]
    if unknown:
        raise AblationError(f"--legs: {', '.join(unknown)} not in the results (legs there: {', '.join(rs.legs())})")
    return chosen


def _baseline_option(baseline: str | None, legs: list[str]) -> str | None:
    if baseline and baseline not in legs:
        raise AblationError(f"--baseline: '{baseline}' is not one of the legs compared ({', '.join(legs)})")
    return baseline


CANONICAL_OPT = click.option("--canonical", "canonical_path", type=click.Path(exists=True, path_type=Path),
                             default=None, help="CANONICAL.yaml to use [default: one found in a PATH]")
LEGS_OPT = click.option("--legs", default=None, help="comma-separated leg order [default: version order]")
BASELINE_OPT = click.option("--baseline", default=None, help="ratios against this leg instead of consecutive")
BRIDGE_OPT = click.option("--bridge", default=None,
                          help="also chain ratios across machines through this leg (both ran it); labelled as such")


def _bridge_option(bridge: str | None, rs) -> str | None:
    if bridge and bridge not in rs.legs():
        raise AblationError(f"--bridge: '{bridge}' is not a leg in these results ({', '.join(rs.legs())})")
    return bridge


@main.command("compare")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["md", "csv", "json"]), default="md", show_default=True)
@LEGS_OPT
@BASELINE_OPT
@BRIDGE_OPT
@CANONICAL_OPT
@one_line_errors
def compare(paths, fmt, legs, baseline, bridge, canonical_path):
    """Throughput and latency tables with ratio columns, coverage, failures, controls."""
    from ablation.compare import render

    rs = _load_selected(paths, canonical_path)
    for w in rs.warnings:
        click.echo(f"warning: {w}", err=True)
    chosen = _legs_option(legs, rs)
    click.echo(render(rs, fmt, chosen, _baseline_option(baseline, chosen), _bridge_option(bridge, rs)))


@main.command("canonical")
@click.argument("results_root", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="overwrite an existing CANONICAL.yaml (it may hold hand edits)")
@one_line_errors
def canonical(results_root: Path, force: bool):
    """Write RESULTS_ROOT/CANONICAL.yaml: the authoritative run per (leg, model)."""
    from ablation.canonical import FILENAME, default_canonical, write_canonical
    from ablation.results import load_results

    path = results_root / FILENAME
    if path.exists() and not force:
        raise AblationError(f"{path} exists and may hold hand edits; pass --force to regenerate it")
    rs = load_results([results_root])
    if not rs.results:
        raise AblationError(f"no results.json under {results_root}")
    can = default_canonical(rs)
    write_canonical(can, path)
    excluded = sum(len(e.excluded) for e in can.entries)
    click.echo(f"{path}: {len(can.entries)} (leg, model) entries, {excluded} runs excluded")


@main.command("compare-arch")
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@click.option("--names", default=None, help="A,B labels [default: the GPU/CPU model in the results]")
@click.option("--threshold", type=float, default=1.25, show_default=True,
              help="flag speedups that differ by more than this factor")
@click.option("--allow-mismatch", is_flag=True, help="compare even if the scenario tables differ (loud warning)")
@click.option("--all-rows", is_flag=True, help="print every speedup pair, not only the flagged ones")
@one_line_errors
def compare_arch(a, b, names, threshold, allow_mismatch, all_rows):
    """Speedups per pair of legs on two machines; rows that do not transfer; failure attribution."""
    from ablation.crossarch import check_same_table, failure_attribution, machine_name, speedup_table

    ra, rb = _load_selected((a,), None), _load_selected((b,), None)
    labels = tuple(names.split(",", 1)) if names else (machine_name(ra), machine_name(rb))
    if len(labels) != 2 or labels[0] == labels[1]:
        labels = (f"A: {labels[0]}", f"B: {labels[-1]}")
    for line in check_same_table(ra, rb, labels, allow_mismatch):
        click.echo(line)
    click.echo(speedup_table(ra, rb, labels, threshold, flagged_only=not all_rows).markdown())
    click.echo(failure_attribution(ra, rb, labels).markdown())


@main.command("report")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("report"), show_default=True)
@click.option("--other", type=click.Path(exists=True, path_type=Path), default=None,
              help="results of the same table on another machine: adds the cross-architecture section")
@click.option("--names", default=None, help="THIS,OTHER machine labels for the cross-architecture section")
@click.option("--threshold", type=float, default=1.25, show_default=True)
@LEGS_OPT
@BASELINE_OPT
@BRIDGE_OPT
@CANONICAL_OPT
@one_line_errors
def report(paths, out_dir, other, names, threshold, legs, baseline, bridge, canonical_path):
    """REPORT.md, tables/*.csv, report.json and index.html with plots, all from results."""
    from ablation.crossarch import check_same_table, machine_name
    from ablation.report import ReportInput, write_report

    rs = _load_selected(paths, canonical_path)
    chosen = _legs_option(legs, rs)
    inp = ReportInput(rs, chosen, _baseline_option(baseline, chosen), threshold=threshold,
                      bridge=_bridge_option(bridge, rs))
    if other:
        inp.other = _load_selected((other,), None)
        labels = tuple(names.split(",", 1)) if names else (machine_name(rs), machine_name(inp.other))
        inp.names = labels if len(labels) == 2 and labels[0] != labels[1] else ("this machine", "other machine")
        rs.warnings.extend(check_same_table(rs, inp.other, inp.names, allow_mismatch=False))
    for w in rs.warnings:
        click.echo(f"warning: {w}", err=True)
    written = write_report(inp, out_dir)
    click.echo(f"{out_dir}: {len(written)} files (REPORT.md, index.html, tables/, plots/)")


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
    from ablation.bisect import Bisector, render_summary, setup_bisect
    from ablation.machine import probe
    from ablation.models import default_models_root
    from ablation.stacks import StackDir
    from ablation.sweep import Sweep

    echo = lambda m: click.echo(m, err=True)  # noqa: E731
    b = setup_bisect(_stacks(ctx), ctx.obj["patches_dir"], target=target, good=good, bad=bad,
                     scenario_path=scenario_path, metric=metric, threshold=threshold, repeats=repeats,
                     releases=releases, out_root=out_root, wait=wait, harness=harness)
    sweep = Sweep(StackDir(root=b.plan.out_dir / "stacks"), _builder(ctx), default_models_root(), probe(), log=echo)
    echo(f"[bisect] {len(b.between)} release(s) between {good} and {bad}: {', '.join(b.between) or 'none'}")
    summary = Bisector(sweep, log=echo).run(b.plan, b.good, b.bad, b.between, b.table)
    click.echo(render_summary(summary))
    click.echo(f"\n{b.plan.out_dir / 'bisect.json'}")


if __name__ == "__main__":
    main()
