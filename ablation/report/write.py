"""`ablation report`: REPORT.md, tables/*.csv, report.json, index.html and plots/, all from results."""

from __future__ import annotations

import json
from pathlib import Path

from ablation.analysis.groups import group_results
from ablation.report.document import ReportInput, bridged_tables, build_tables, report_markdown
from ablation.report.html import report_html
from ablation.report.plots import make_plots

__all__ = ["ReportInput", "write_report"]


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
    plots = make_plots(inp, gts, out_dir)
    title = md.splitlines()[0].lstrip("# ")
    (out_dir / "index.html").write_text(report_html(title, md, plots))
    written += [out_dir / "index.html"] + [out_dir / p for p, _ in plots]
    return written
