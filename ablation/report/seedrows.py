"""The report's "Seed rows" tables: every row of the seed's scenario table, and what these results
measured of it for each comparison the seed prints (consecutive seed legs: 26/18, 29/26).

A row is a model and a workload of the table the findings file names (`table:`), in the table's
order, less the models it leaves out (with why). For each comparison a row is, in this order:

- **a ratio**: some group (scenario table x machine) measured the workload on both legs; the cell
  is that group's compare-table cell (ratio, verdict, interval or passes), one per such group;
- **FAIL or SKIP**: no ratio, and a leg's latest attempt of the model failed or was skipped;
- **both legs, no common group**: each leg measured it, but on different machines or tables,
  which no ratio crosses;
- **one leg only**, or **not run**.

So a row the results do not hold is a row that says so: the report never leaves a seed row out.
With the findings file's `table.values` (the seed's Full data as TSV, ablation/spec/seedvalues.py),
each comparison's cell has the seed's printed ratio and values beside it. The summary counts rows
per comparison, split by tensor-parallel degree (one GPU or several).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ablation.analysis.groups import Group
from ablation.analysis.stats import MIN_REPEATS
from ablation.analysis.tables import MISSING, Table, format_ratio, pair_label, passes_label
from ablation.errors import AblationError
from ablation.report.seedcheck import (
    EstimateCache,
    GroupCell,
    SeedCheck,
    group_cell,
    latest_of,
    latest_record,
    passing,
    processes_per_gpu,
    workload_named,
)
from ablation.results.store import ResultSet, TaskResult, sort_legs
from ablation.spec.findings import SeedFindings
from ablation.spec.scenarios import ScenarioTable, load_scenarios
from ablation.spec.seedvalues import SeedRowValues, SeedTable, load_seed_values

SUMMARY_TITLE = "Seed rows: measured per comparison"
CATEGORIES = [
    f"ratio, ≥ {MIN_REPEATS} processes per leg",
    f"ratio, fewer than {MIN_REPEATS} processes",
    "FAIL or SKIP",
    "both legs, no common group",
    "one leg only",
    "not run",
]


@dataclass(frozen=True)
class SeedRow:
    model: str
    workload: str  # the name the seed prints: the workload's label, else its key
    kind: str
    tp: int


def seed_rows(table: ScenarioTable, leave_out: dict[str, str]) -> list[SeedRow]:
    """The table's rows in its order (each model's workloads in its order), less the left-out models."""
    return [SeedRow(m.id, table.workloads[w].label or w, table.workloads[w].kind, m.tp)
            for m in table.models if m.id not in leave_out for w in m.workloads]


def _leg_state(results: list[TaskResult], row: SeedRow, leg: str) -> tuple[str, str]:
    """(state, text) of one leg for one row across every group: 'measured', 'FAIL or SKIP' or 'not run'."""
    recs = latest_of(results, row.model, leg)
    measured = [r for r in passing(recs) if (w := workload_named(r, row.workload)) is not None and w.kind == row.kind]
    if measured:
        on = {gpu or "a machine not recorded": n for gpu, n in processes_per_gpu(measured).items()}
        variants = sorted({r.variant for r in measured if r.variant})
        text = f"{leg}: " + ", ".join(f"{passes_label(n)} on {gpu}" for gpu, n in sorted(on.items()))
        return "measured", text + (f" (variant {', '.join(variants)})" if variants else "")
    failure = _latest_failure(recs)
    if failure:
        return "FAIL or SKIP", f"{leg}: {failure[0]} ({failure[1]})"
    return "not run", f"{leg}: not run"


def _latest_failure(recs: list[TaskResult]) -> tuple[str, str] | None:
    """(FAIL, its class) or (SKIP, its reason) of the latest such record; None if there is none."""
    failed = [r for r in recs if r.status in ("FAIL", "SKIP")]
    if not failed:
        return None
    r = latest_record(failed)
    if r.status == "FAIL":
        return "FAIL", r.cause.cls if r.cause else "cause not recorded"
    return "SKIP", r.skip_reason or "reason not recorded"


def _cell(row: SeedRow, old: str, new: str, groups: list[Group], rs: ResultSet, order: list[str],
          baseline: str | None, cache: EstimateCache) -> tuple[str, str, dict]:
    """(category, text, JSON data) of one row for one comparison."""
    found: list[tuple[Group, GroupCell]] = []
    for g in groups:
        if old in g.legs(order) and new in g.legs(order):
            cell = group_cell(g, row.model, row.workload, row.kind, old, new, order, baseline, cache)
            if cell is not None:
                found.append((g, cell))
    if found:
        repeated = any(c.est.n_old >= MIN_REPEATS and c.est.n_new >= MIN_REPEATS for _, c in found)
        text = "; ".join(f"{format_ratio(c.est)} · {g.key.machine} · table {g.key.scenario_name}" for g, c in found)
        data = {"cells": [{"group": g.label, "estimate": c.est.as_dict(), "values": c.values} for g, c in found]}
        return CATEGORIES[0] if repeated else CATEGORIES[1], text, data
    states = [_leg_state(rs.results, row, leg) for leg in (old, new)]
    kinds = [s for s, _ in states]
    text = " · ".join(t for _, t in states)
    if "FAIL or SKIP" in kinds:
        category = "FAIL or SKIP"
    elif kinds == ["measured", "measured"]:
        category = "both legs, no common group"
        text += ": no group (scenario table x machine) holds both, so no ratio"
    elif "measured" in kinds:
        category = "one leg only"
    else:
        category = "not run"
    return category, text, {"legs": dict(zip((old, new), (t for _, t in states)))}


def seed_comparisons(findings: SeedFindings) -> list[tuple[str, str, str]]:
    """(label, old, new) per consecutive pair of the seed's own legs, as the seed prints them (26/18, 0.18, 0.26)."""
    seed_legs = sort_legs(findings.legs)
    return [(pair_label(a, b, seed_legs, "throughput"), a, b) for a, b in zip(seed_legs, seed_legs[1:])]


def comparisons(check: SeedCheck) -> list[tuple[str, str, str]]:
    """(label, old leg, new leg) per consecutive pair of the seed's legs, mapped to this tool's legs."""
    return [(label, check.findings.leg(a), check.findings.leg(b)) for label, a, b in seed_comparisons(check.findings)]


def _short(model: str) -> str:
    """A model id as the seed's tables print it: the part after the organisation."""
    return model.split("/", 1)[-1]


def load_seed_table(findings: SeedFindings, path: Path) -> SeedTable | None:
    """The findings file's `table` (paths relative to the findings file at `path`), each of its rows
    checked against the other: every seed row has one row of values and the other way round. None
    without `table`. A bad reference names the findings file and field; a bad TSV its line."""
    ref = findings.table
    if ref is None:
        return None
    table_path = path.parent / ref.path
    if not table_path.is_file():
        raise AblationError(f"{path}: field 'table.path': no scenario table at {table_path}")
    table = load_scenarios(table_path).table
    ids = {m.id for m in table.models}
    for model in ref.leave_out:
        if model not in ids:
            raise AblationError(f"{path}: field 'table.leave_out': model '{model}' is not in {table_path}")
    if ref.values is None:
        return SeedTable(table)
    values_path = path.parent / ref.values
    if not values_path.is_file():
        raise AblationError(f"{path}: field 'table.values': no file at {values_path}")
    values = load_seed_values(values_path, sort_legs(findings.legs), seed_comparisons(findings))
    rows = seed_rows(table, ref.leave_out)
    wanted = {(r.kind, _short(r.model), r.workload): r for r in rows}
    for key, v in values.items():
        if key not in wanted:
            raise AblationError(f"{values_path}: {v.model} {v.workload} ({v.kind}) is no row of {table_path}")
        if v.tp != wanted[key].tp:
            raise AblationError(f"{values_path}: {v.model} {v.workload}: tp {v.tp}, the table has {wanted[key].tp}")
    lacking = [f"{m} {w} ({k})" for (k, m, w) in wanted if (k, m, w) not in values]
    if lacking:
        raise AblationError(f"{values_path}: no values for {len(lacking)} row(s) of {table_path}: "
                            + ", ".join(lacking[:3]) + (", ..." if len(lacking) > 3 else ""))
    return SeedTable(table, values)


def _seed_cell(seed: SeedRowValues | None, label: str, old: str, new: str) -> str:
    """The seed's ratio and its two values as the seed prints them ('1.53x (109 → 167)')."""
    if seed is None:
        return "no seed values given"
    return f"{seed.printed[label]} ({seed.printed[old]} → {seed.printed[new]})"


def row_tables(check: SeedCheck, groups: list[Group], rs: ResultSet, order: list[str],
               baseline: str | None) -> dict[str, Table]:
    """The summary and the per-row table, by file name."""
    if check.table is None or check.findings.table is None:
        return {}
    leave_out = check.findings.table.leave_out
    rows = seed_rows(check.table.table, leave_out)
    pairs = comparisons(check)
    seed_pairs = seed_comparisons(check.findings)
    with_seed = check.table.values is not None
    columns = ["model", "workload", "kind", "tp"]
    for label, _, _ in pairs:
        columns += [f"{label} seed", f"{label} ours"] if with_seed else [label]
    cache = EstimateCache()
    detail = Table("Seed rows: per row", columns, [])
    counts = {(label, tp_class, c): 0 for label, _, _ in pairs for tp_class in ("tp 1", "tp > 1") for c in CATEGORIES}
    for row in rows:
        cells, data = [], {}
        seed = check.table.values.get((row.kind, _short(row.model), row.workload)) if with_seed else None
        for (label, old, new), (_, seed_old, seed_new) in zip(pairs, seed_pairs):
            category, text, cell_data = _cell(row, old, new, groups, rs, order, baseline, cache)
            counts[(label, "tp 1" if row.tp == 1 else "tp > 1", category)] += 1
            if with_seed:
                cells.append(_seed_cell(seed, label, seed_old, seed_new))
                cell_data["seed"] = {"ratio": seed.ratios.get(label) if seed else None,
                                     "values": {k: seed.values.get(k) for k in (seed_old, seed_new)} if seed else None}
            cells.append(text)
            data[label] = {"category": category, "text": text, "legs": [old, new], **cell_data}
        detail.rows.append([row.model, row.workload, row.kind, str(row.tp), *cells])
        detail.data.append({"model_id": row.model, "workload": row.workload, "kind": row.kind, "tp": row.tp,
                            "comparisons": data})
    legs_text = ", ".join(f"{label} = {old} → {new}" for label, old, new in pairs)
    detail.note = (f"Every row of the seed's table ({len(rows)} rows; {legs_text}). "
                   + ("Seed: the ratio the seed's Full data prints, and its two values (one timed pass each). "
                      if with_seed else "")
                   + "Ours: a ratio is the compare tables' own cell of the group named after it (latency ratios are "
                   "speedups); without one, each leg says what it has: processes measured and on which GPU, its latest "
                   "FAIL or SKIP, or not run. Seed and ours differ in data (dummy weights, synthetic prompts and "
                   "media, fewer requests, often another GPU): see 'Seed findings: ratios' for what each record says.")
    summary = Table(SUMMARY_TITLE, ["comparison", "rows", "seed rows", *CATEGORIES], [])
    for label, old, new in pairs:
        for tp_class in ("tp 1", "tp > 1"):
            n = [counts[(label, tp_class, c)] for c in CATEGORIES]
            if sum(n):
                summary.rows.append([f"{label} ({old} → {new})", tp_class, str(sum(n)), *map(str, n)])
                summary.data.append({"comparison": label, "legs": [old, new], "rows": tp_class, "seed_rows": sum(n),
                                     **dict(zip(CATEGORIES, n))})
    left = "; ".join(f"{m}: {why}" for m, why in leave_out.items())
    summary.note = ("Rows of the seed's table by what these results hold for each comparison (the per-row table "
                    "below says which); a row counts once, in the first category that fits, in this column order. "
                    + (f"Left out of the seed's rows: {left}." if left else "No model of the table is left out."))
    return {"seed-coverage": coverage_table(check, rs), "seed-rows-summary": summary, "seed-rows": detail}


def _model_state(results: list[TaskResult], model: str, leg: str) -> tuple[str, str]:
    """(PASS | FAIL | SKIP | not run, why) of one model on one leg across every group."""
    recs = latest_of(results, model, leg)
    if passing(recs):
        return "PASS", ""
    return _latest_failure(recs) or ("not run", "")


def coverage_table(check: SeedCheck, rs: ResultSet) -> Table:
    """The seed's Coverage table (per leg: passing of its models, and which failed, were skipped or not run),
    over every group of these results."""
    fs = check.findings
    models = [m.id for m in check.table.table.models if m.id not in fs.table.leave_out]
    table = Table("Seed coverage: models per leg", ["leg", "passing", "failed", "skipped", "not run"], [])
    for seed_leg in sort_legs(fs.legs):
        leg = fs.leg(seed_leg)
        states = {m: _model_state(rs.results, m, leg) for m in models}
        named = {st: [f"{_short(m)} ({why})" if why else _short(m) for m, (s, why) in states.items() if s == st]
                 for st in ("PASS", "FAIL", "SKIP", "not run")}
        table.rows.append([f"{seed_leg} → {leg}", f"{len(named['PASS'])}/{len(models) - len(named['SKIP'])}",
                           ", ".join(named["FAIL"]) or MISSING, ", ".join(named["SKIP"]) or MISSING,
                           ", ".join(named["not run"]) or MISSING])
        table.data.append({"seed_leg": seed_leg, "leg": leg, "models": len(models),
                           **{st: [m for m, (s, _) in states.items() if s == st] for st in named}})
    table.note = (f"The seed's models ({len(models)}; left out: {', '.join(fs.table.leave_out) or 'none'}), each counted "
                  "once per leg over every group of these results: PASS if any process passed (in any venv of the "
                  "leg), else its latest FAIL (class) or SKIP (reason). As in the seed's Coverage table, a skipped model "
                  "(this machine cannot run it) is not failed and leaves the denominator. The per-group Coverage "
                  "tables above say on which machine each ran.")
    return table


def coverage_limitation(tables: list[Table]) -> str | None:
    """The Known limitations line: how many of the seed's rows have a ratio per comparison, from the summary."""
    summary = next((t for t in tables if t.title == SUMMARY_TITLE), None)
    if summary is None or not summary.data:
        return None
    parts = []
    for label in dict.fromkeys(d["comparison"] for d in summary.data):
        rows = [d for d in summary.data if d["comparison"] == label]
        total = sum(d["seed_rows"] for d in rows)
        ratio = sum(d[CATEGORIES[0]] + d[CATEGORIES[1]] for d in rows)
        repeated = sum(d[CATEGORIES[0]] for d in rows)
        parts.append(f"{label}: {ratio} of {total} with a ratio, {repeated} of them from {MIN_REPEATS} or more "
                     "processes per leg")
    return ("Of the seed's table, these results cover only part: " + "; ".join(parts)
            + ". Every other row is FAIL or SKIP, on one leg only, or not run (see 'Seed rows').")
