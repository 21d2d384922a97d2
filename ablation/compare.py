"""Ratio tables across legs, generated from results (never transcribed).

Shapes follow the seed reports: a throughput table (tok/s, higher is better,
ratio columns new/old such as `29/28`) and a latency table (ms/tok, lower is
better, ratio columns old/new as speedups such as `28→29`), plus coverage.
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
from dataclasses import asdict, dataclass, field

from ablation.results import ResultSet, TaskResult

MISSING = "—"


def leg_label(leg: str, all_legs: list[str]) -> str:
    """Short label for ratio headers: '0.29-cpu' -> '29' when that is unambiguous."""
    def short(x: str) -> str:
        m = re.match(r"^\d+\.(\d+)", x)
        return m.group(1) if m else x

    shorts = [short(x) for x in all_legs]
    return short(leg) if len(set(shorts)) == len(shorts) else leg


def format_value(v: float | None) -> str:
    if v is None:
        return MISSING
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 0.1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def format_ratio(r: float | None) -> str:
    return MISSING if r is None else f"{r:.2f}x"


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    data: list[dict] = field(default_factory=list)  # the unformatted numbers, for JSON

    def markdown(self) -> str:
        out = [f"### {self.title}", ""]
        out.append("| " + " | ".join(self.columns) + " |")
        out.append("|" + "|".join("---" for _ in self.columns) + "|")
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        if self.note:
            out += ["", self.note]
        return "\n".join(out) + "\n"

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        w.writerows(self.rows)
        return buf.getvalue()


def latest_attempts(results: list[TaskResult]) -> list[TaskResult]:
    """One record per (run, leg, model, repeat): its latest attempt."""
    best: dict[tuple, TaskResult] = {}
    for r in results:
        key = (r.run_id, r.leg, r.model_id, r.repeat)
        if key not in best or r.attempt > best[key].attempt:
            best[key] = r
    return list(best.values())


@dataclass(frozen=True)
class RowKey:
    model_id: str
    tp: int
    workload: str


def row_order(rs: ResultSet) -> dict[RowKey, tuple]:
    """Rows in scenario-table order (model position, then the model's workload order)."""
    order = {}
    for r in rs.results:
        model_index, workloads = r.order
        for w in r.workloads:
            wi = workloads.index(w) if w in workloads else len(workloads)
            order.setdefault(RowKey(r.model_id, r.tp, w), (model_index, r.model_id, r.tp, wi, w))
    return order


def collect(rs: ResultSet, kind: str) -> dict[RowKey, dict[str, list[float]]]:
    """(model, tp, workload) -> leg -> measured values (one per repeat) of PASS tasks."""
    cells: dict[RowKey, dict[str, list[float]]] = {}
    for r in latest_attempts(rs.results):
        if r.status != "PASS":
            continue
        for w in r.workloads.values():
            if w.kind == kind:
                cells.setdefault(RowKey(r.model_id, r.tp, w.name), {}).setdefault(r.leg, []).append(w.value)
    return cells


def ratio_table(rs: ResultSet, kind: str, legs: list[str] | None = None) -> Table:
    legs = legs or rs.legs()
    cells = collect(rs, kind)
    higher_better = kind == "throughput"
    pairs = list(zip(legs, legs[1:]))
    labels = [leg_label(x, legs) for x in legs]
    lab = dict(zip(legs, labels))
    if higher_better:
        ratio_cols = [f"{lab[b]}/{lab[a]}" for a, b in pairs]
        title, unit = "Throughput (tok/s, higher is better)", "tok/s"
    else:
        ratio_cols = [f"{lab[a]}→{lab[b]}" for a, b in pairs]
        title, unit = "Latency (ms/tok, lower is better; ratios are speedups)", "ms/tok"
    table = Table(title, ["model", "tp", "workload", *legs, *ratio_cols], [])
    order = row_order(rs)
    for key in sorted(cells, key=lambda k: order[k]):
        med = {leg: statistics.median(v) for leg, v in cells[key].items()}
        ratios = []
        for a, b in pairs:
            if a in med and b in med and med[a] > 0 and med[b] > 0:
                ratios.append(med[b] / med[a] if higher_better else med[a] / med[b])
            else:
                ratios.append(None)
        table.rows.append(
            [key.model_id, str(key.tp), key.workload, *(format_value(med.get(leg)) for leg in legs),
             *(format_ratio(r) for r in ratios)]
        )
        table.data.append({**asdict(key), "unit": unit, "values": {leg: cells[key].get(leg) for leg in legs},
                           "median": {leg: med.get(leg) for leg in legs},
                           "ratios": dict(zip(ratio_cols, ratios))})
    n = max((len(v) for c in cells.values() for v in c.values()), default=0)
    table.note = (f"Medians of {n} repeats." if n > 1 else
                  "Single timed pass per cell, no repeats: read 0.95-1.05x as 'no difference detected'.")
    return table


def coverage_table(rs: ResultSet, legs: list[str] | None = None) -> Table:
    legs = legs or rs.legs()
    latest = latest_attempts(rs.results)
    models = sorted({r.model_id for r in latest})
    skipped = sorted({r.model_id for r in latest if r.status == "SKIP"})
    denominator = [m for m in models if m not in skipped]
    table = Table("Coverage", ["leg", "passing", "failed", "not run"], [])
    for leg in legs:
        status = {}
        for r in latest:
            if r.leg == leg and r.status != "SKIP":
                # A model passes on a leg if its latest attempt of any repeat passed.
                status[r.model_id] = "PASS" if r.status == "PASS" or status.get(r.model_id) == "PASS" else r.status
        passing = [m for m in denominator if status.get(m) == "PASS"]
        failed = [m for m in denominator if status.get(m) == "FAIL"]
        not_run = [m for m in denominator if m not in status]
        table.rows.append([leg, f"{len(passing)}/{len(denominator)}", ", ".join(failed) or MISSING,
                           ", ".join(not_run) or MISSING])
        table.data.append({"leg": leg, "passing": passing, "failed": failed, "not_run": not_run})
    if skipped:
        reasons = sorted({f"{r.model_id}: {r.skip_reason}" for r in latest if r.status == "SKIP"})
        table.note = (f"The denominator is {len(denominator)}, not {len(models)}: skipped on this machine "
                      f"(not failed) and excluded: " + "; ".join(reasons))
    return table


def failures_table(rs: ResultSet) -> Table:
    table = Table("Failure attribution", ["leg", "model", "class", "signature"], [])
    for r in sorted(latest_attempts(rs.results), key=lambda r: (r.leg, r.model_id, r.repeat)):
        if r.status == "FAIL":
            cause = r.cause or {}
            table.rows.append([r.leg, r.model_id, cause.get("class", "?"), cause.get("signature", "?")])
            table.data.append({"leg": r.leg, "model_id": r.model_id, **cause})
    return table


def all_tables(rs: ResultSet, legs: list[str] | None = None) -> list[Table]:
    tables = [coverage_table(rs, legs), ratio_table(rs, "throughput", legs), ratio_table(rs, "latency", legs)]
    fails = failures_table(rs)
    if fails.rows:
        tables.append(fails)
    return tables


def render(rs: ResultSet, fmt: str, legs: list[str] | None = None) -> str:
    tables = all_tables(rs, legs)
    if fmt == "json":
        return json.dumps({"warnings": rs.warnings, "scenario_sha256": sorted(rs.scenario_hashes()),
                           "tables": [{"title": t.title, "columns": t.columns, "rows": t.data} for t in tables]},
                          indent=2)
    if fmt == "csv":
        return "\n".join(f"# {t.title}\n{t.csv()}" for t in tables)
    parts = [t.markdown() for t in tables]
    hashes = sorted(rs.scenario_hashes())
    header = f"Scenario table sha256: {', '.join(h[:12] for h in hashes) or 'none'}\n"
    if len(hashes) > 1:
        header += "WARNING: results come from different scenario tables; ratios across them are not comparable.\n"
    warn = "".join(f"WARNING: {w}\n" for w in rs.warnings)
    return header + warn + "\n" + "\n".join(parts)
