"""`ablation compare`, `canonical`, `compare-arch` and `report`: tables from results."""

from __future__ import annotations

from pathlib import Path

import click

from ablation.cli.app import main, one_line_errors
from ablation.errors import AblationError


def _load_selected(paths: tuple[Path, ...], canonical_path: Path | None):
    """Results under PATHS, reduced to one authoritative run per (leg, model)."""
    return _load_both(paths, canonical_path)[1]


def _load_both(paths: tuple[Path, ...], canonical_path: Path | None):
    """(every result loaded, the selection: one authoritative run per (leg, model))."""
    from ablation.results.canonical import FILENAME, load_canonical, select
    from ablation.results.store import load_results

    rs = load_results(list(paths))
    if not rs.results:
        raise AblationError(f"no results.json under {', '.join(map(str, paths))}; run `ablation run` first")
    if canonical_path is None:
        found = [p / FILENAME for p in paths if (p / FILENAME).is_file()]
        canonical_path = found[0] if found else None
    canonical = load_canonical(canonical_path) if canonical_path else None
    selected, _ = select(rs, canonical)
    return rs, selected


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


def _threshold_option(threshold: float) -> float:
    import math

    if not (math.isfinite(threshold) and threshold >= 1):
        raise AblationError(f"--threshold: {threshold} is not a factor >= 1 (e.g. 1.25: speedups that differ by 25%)")
    return threshold


def _names_option(names: str | None) -> tuple[str, ...] | None:
    """--names A,B: labels that become table columns, so no '|' and no control character."""
    if names is None:
        return None
    labels = tuple(x.strip() for x in names.split(",", 1))
    if any(not x or "|" in x or not x.isprintable() or len(x) > 100 for x in labels):
        raise AblationError(f"--names: '{names.encode('unicode_escape').decode()}' must be two labels A,B of "
                            "printable characters without '|'")
    return labels


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
    from ablation.report.text import render

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
    from ablation.results.canonical import FILENAME, default_canonical, write_canonical
    from ablation.results.store import load_results

    path = results_root / FILENAME
    if path.is_dir() or (path.exists() and not path.is_file()):
        raise AblationError(f"{path} is a directory, not a file; move it away to write {FILENAME}")
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
    from ablation.analysis.crossarch import check_same_table, failure_attribution, speedup_table
    from ablation.results.machines import machine_name

    threshold, given = _threshold_option(threshold), _names_option(names)
    ra, rb = _load_selected((a,), None), _load_selected((b,), None)
    labels = given or (machine_name(ra), machine_name(rb))
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
@click.option("--seed-findings", "seed_findings", type=click.Path(path_type=Path), default=None,
              help="a findings file (scenarios/seed-findings-h200.yaml): adds the 'Seed vs this tool' section")
@one_line_errors
def report(paths, out_dir, other, names, threshold, legs, baseline, bridge, canonical_path, seed_findings):
    """REPORT.md, tables/*.csv, report.json and index.html with plots, all from results."""
    from ablation.analysis.crossarch import check_same_table
    from ablation.report.seedcheck import SeedCheck
    from ablation.report.seedrows import load_seed_table
    from ablation.report.write import ReportInput, write_report
    from ablation.results.machines import machine_name
    from ablation.spec.findings import load_findings

    threshold, given = _threshold_option(threshold), _names_option(names)
    findings = load_findings(seed_findings) if seed_findings else None  # a bad file fails before any work
    seed_table = load_seed_table(findings, seed_findings) if findings else None
    loaded, rs = _load_both(paths, canonical_path)
    chosen = _legs_option(legs, rs)
    inp = ReportInput(rs, chosen, _baseline_option(baseline, chosen), threshold=threshold,
                      bridge=_bridge_option(bridge, rs),
                      seed=SeedCheck(findings, seed_findings, loaded, seed_table) if findings else None)
    if other:
        inp.other = _load_selected((other,), None)
        labels = given or (machine_name(rs), machine_name(inp.other))
        inp.names = labels if len(labels) == 2 and labels[0] != labels[1] else ("this machine", "other machine")
        rs.warnings.extend(check_same_table(rs, inp.other, inp.names, allow_mismatch=False))
    for w in rs.warnings:
        click.echo(f"warning: {w}", err=True)
    written = write_report(inp, out_dir)
    click.echo(f"{out_dir}: {len(written)} files (REPORT.md, index.html, tables/, plots/)")
