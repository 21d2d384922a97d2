"""The report's "Seed vs this tool" section: each finding of a seed report beside what these results say.

Two tables, generated from a findings file (ablation/spec/findings.py) and the results:

- ratios: per finding, the seed's ratio (its two values, its passes) beside ours. Ours is the cell
  the compare tables print for that row and pair of legs, computed by the same code
  (`family_estimates`, `format_ratio`: Welch's t on logs, Holm over the group's comparison, no
  verdict below 3 repeats); where the pair is not a column of the compare tables (`--baseline`,
  `--legs`), it is judged as a comparison of those two legs alone, and the cell says so. A finding
  no group measured says why (leg or model not in the results, FAIL or SKIP with its cause, legs
  in different groups, no scenario table that ran the model on both legs lists the workload):
  never a silent absence. A group whose table ran the model but never asked it for the finding's
  workload is no row of that finding.
- outcomes: per expected (leg, variant) outcome, the status and cause observed against the
  expected ones, and whether they match.

"Differences in data" are read from the records (the model's spec, the workload's record, the
machine), never typed per row: another GPU model than the seed's, dummy weights, synthetic media,
synthetic token-id prompts, fewer requests than the seed's run, an override variant.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ablation.analysis.coldstart import start_counts
from ablation.analysis.groups import Group
from ablation.analysis.stats import RatioEstimate, format_measure, relative_uncertainty
from ablation.analysis.tables import (
    MISSING,
    RowKey,
    Table,
    collect,
    family_estimates,
    format_ratio,
    latest_attempts,
    leg_pairs,
    pair_label,
    passes_label,
    workload_labels,
)
from ablation.harness.protocol import RESULT_SCHEMA as HARNESS_SCHEMA
from ablation.results.machines import machine_label
from ablation.results.store import ResultSet, TaskResult, sort_legs
from ablation.spec.findings import Expectation, OutcomeFinding, RatioFinding, SeedFindings
from ablation.spec.seedvalues import SeedTable

SECTION = "Seed vs this tool"
RATIO_COLUMNS = ["finding", "model", "workload", "comparison", "seed", "ours", "our samples", "differences in data"]
OUTCOME_COLUMNS = ["finding", "model", "leg", "variant", "seed reports", "expected", "observed", "matches",
                   "differences in data"]
UNITS = {"throughput": "tok/s", "latency": "ms/tok"}


@dataclass
class SeedCheck:
    """What `--seed-findings` gives the report: the findings, their file, and every result loaded
    before canonical selection (an expected outcome found only in an excluded run is named, not lost)."""

    findings: SeedFindings
    path: Path
    loaded: ResultSet | None = None
    table: SeedTable | None = None  # the findings file's `table:`: the "Seed rows" tables (report/seedrows.py)


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:g}"


def passing(records: list[TaskResult]) -> list[TaskResult]:
    return [r for r in records if r.status == "PASS"]


def latest_of(results: list[TaskResult], model: str, leg: str | None = None, variant: object = ...) -> list[TaskResult]:
    """Latest attempts of `model` (on `leg`; with `variant`, None meaning the base venv)."""
    return [r for r in latest_attempts(results) if r.model_id == model and (leg is None or r.leg == leg)
            and (variant is ... or r.variant == variant)]


def processes_per_gpu(records: list[TaskResult]) -> Counter:
    """How many of `records` ran on each GPU model (machine_label; None: the record names none)."""
    return Counter(machine_label(r.record.machine) for r in records)


def latest_record(records: list[TaskResult]) -> TaskResult:
    """The record that started last (then the higher repeat and attempt): a cell's current outcome."""
    return max(records, key=lambda r: (r.record.started_at or 0, r.repeat, r.attempt))


def workload_named(r: TaskResult, name: str):
    """The record's workload the seed calls `name`: its label, else its key."""
    for key, w in r.record.workloads.items():
        if (w.label or key) == name:
            return w
    return None


def _status(records: list[TaskResult]) -> tuple[str, str]:
    """(status, why) of one (leg, model) cell as the coverage table counts it: PASS if any repeat
    passed; else the latest record's FAIL (class: signature) or SKIP (reason)."""
    if not records:
        return "not run", "no result"
    if passing(records):
        return "PASS", ""
    r = latest_record(records)
    if r.status == "FAIL":
        cause = f"{r.cause.cls}: {r.cause.signature}" if r.cause else "cause not recorded"
        return "FAIL", cause
    return r.status, r.skip_reason or "reason not recorded"


def differences(records: list[TaskResult], workload: str | None, seed_requests: dict[str, int],
                seed_gpu: str | None = None) -> list[str]:
    """What the runs behind `records` did differently from the seed's, from the records alone."""
    out: list[str] = []

    def add(text: str) -> None:
        if text not in out:
            out.append(text)

    ordered = sorted(records, key=lambda r: (r.leg, r.repeat))
    if seed_gpu:  # per leg: all of its processes on another GPU, or how many of them
        for leg in dict.fromkeys(r.leg for r in ordered):
            on = processes_per_gpu([r for r in ordered if r.leg == leg])
            for gpu, n in on.items():
                if gpu == seed_gpu:
                    continue
                where = gpu or "a machine it did not record"
                add(f"{leg} ran on {where} (seed: {seed_gpu})" if n == on.total() else
                    f"{leg}: {n} of {on.total()} processes ran on {where} (seed: {seed_gpu})")
    for r in ordered:
        if r.record.model.spec.get("load_format") == "dummy":
            add("dummy weights")
        if r.variant:
            add(f"{r.leg} in variant {r.variant}")
    for r in sorted(passing(records), key=lambda r: (r.leg, r.repeat)):
        w = workload_named(r, workload) if workload else None
        if w is None:
            continue
        extra = w.model_extra or {}
        media = extra.get("media")
        if isinstance(media, dict) and media.get("type"):
            sizes = media.get("sizes") or {}
            shape = {"image": "{width}x{height}", "video": "{frames} frames {width}x{height}",
                     "audio": "{seconds} s"}.get(media["type"], "")
            try:
                shape = shape.format(**sizes)
            except (KeyError, IndexError):
                shape = ""
            add(f"synthetic {media['type']}" + (f" ({shape})" if shape else ""))
        if str(r.record.harness.get("schema", "")).startswith(HARNESS_SCHEMA.rsplit("/", 1)[0] + "/"):
            add("synthetic token-id prompts")  # this harness's prompts are seeded random token ids
        seed_n = seed_requests.get(workload)
        if w.kind == "throughput" and seed_n:
            n = extra.get("num_requests", w.num_seqs)
            if n is None:
                add(f"request count not recorded (seed: {seed_n:,})")
            elif n != seed_n:
                add(f"{n:,} requests (seed: {seed_n:,})")
    return out


class EstimateCache:
    """What the compare tables compute per group, computed once for every finding and seed row: the
    cells (`collect`, per kind), the estimates (`family_estimates`, per legs and baseline) and the
    workload labels."""

    def __init__(self):
        self._estimates: dict[tuple, dict] = {}
        self._cells: dict[tuple, dict] = {}
        self._labels: dict[int, dict] = {}

    def get(self, g: Group, legs: list[str], baseline: str | None) -> dict:
        key = (id(g), tuple(legs), baseline)
        if key not in self._estimates:
            self._estimates[key] = family_estimates(g.rs, legs, baseline)
        return self._estimates[key]

    def cells(self, g: Group, kind: str) -> dict:
        key = (id(g), kind)
        if key not in self._cells:
            self._cells[key] = collect(g.rs, kind)
        return self._cells[key]

    def labels(self, g: Group) -> dict[tuple[str, str], str]:
        if id(g) not in self._labels:
            self._labels[id(g)] = workload_labels(g.rs)
        return self._labels[id(g)]


def _not_measured(f: RatioFinding, old: str, new: str, rs: ResultSet, order: list[str]) -> str:
    """Why no group holds the finding's model on both legs."""
    for leg in (old, new):
        if leg not in order:
            return (f"not measured: leg {leg} left out by --legs" if leg in rs.legs()
                    else f"not measured: leg {leg} not in the results")
    if not latest_of(rs.results, f.model):
        return f"not measured: {f.model} not in the results"
    for leg in (old, new):
        if not latest_of(rs.results, f.model, leg):
            return f"not measured: no result for {f.model} on {leg}"
    return (f"not measured: {old} and {new} ran {f.model} in different groups (scenario table x machine); "
            "no ratio crosses groups")


def _asks_for(g: Group, model: str, workload: str, legs: tuple[str, str], cache: EstimateCache) -> bool:
    """Whether the scenario table of `g` asks `model` for `workload` (the name the seed prints: a
    workload's label, else its key) on either leg. A record whose model entry lists no workloads
    (a fixture, or a record from before the entry was kept) says nothing, so it counts as asking."""
    labels = cache.labels(g)
    for leg in legs:
        for r in latest_of(g.rs.results, model, leg):
            keys = r.record.model.spec.get("workloads") or []
            if not keys or any(labels.get((model, k), k) == workload for k in keys):
                return True
    return False


@dataclass
class GroupCell:
    """One row's ratio cell for one pair of legs in one group, as the compare tables compute it."""

    est: RatioEstimate
    key: RowKey
    values: dict[str, list[float]]  # leg -> the values behind the cell (one per process)
    alone: bool  # the pair is no column of the compare tables: judged as a comparison of the two legs alone


def group_cell(g: Group, model: str, workload: str, kind: str, old: str, new: str, order: list[str],
               baseline: str | None, cache: EstimateCache) -> GroupCell | None:
    """The cell of `model`'s workload (the name the seed prints: its label, else its key) for
    `old` -> `new` in group `g`; None where the group does not measure it on both legs."""
    cells = cache.cells(g, kind)
    labels = cache.labels(g)
    keys = [k for k in cells if k.model_id == model and labels.get((k.model_id, k.workload), k.workload) == workload
            and old in cells[k] and new in cells[k]]
    if not keys:
        return None
    key = keys[0]
    legs = g.legs(order)
    base = baseline if baseline in legs else None
    pairs = leg_pairs(legs, base)
    alone = (old, new) not in pairs
    if alone:
        est = cache.get(g, [old, new], None)[kind][(key, 0)]
    else:
        est = cache.get(g, legs, base)[kind][(key, pairs.index((old, new)))]
    return GroupCell(est, key, {leg: cells[key][leg] for leg in (old, new)}, alone)


def _measured(f: RatioFinding, g: Group, old: str, new: str, order: list[str], baseline: str | None,
              cache: EstimateCache) -> tuple[str, str, list[TaskResult], dict]:
    """(ours, samples, the records behind them, JSON data) for one group holding the model on both legs."""
    recs = {leg: latest_of(g.rs.results, f.model, leg) for leg in (old, new)}
    states = {leg: _status(recs[leg]) for leg in (old, new)}
    both = recs[old] + recs[new]
    bad = [(leg, st) for leg, st in states.items() if st[0] != "PASS"]
    if bad:
        samples = ", ".join(f"{leg}: {st[0]}" if st[0] != "PASS" else f"{leg}: {len(passing(recs[leg]))}"
                            for leg, st in states.items())
        why = "; ".join(f"{st[0]} on {leg} ({st[1]})" for leg, st in bad)
        return f"not measured: {why}", samples, both, {"measured": False, "reason": why}
    cell = group_cell(g, f.model, f.workload, f.kind, old, new, order, baseline, cache)
    if cell is None:
        samples = ", ".join(f"{leg}: 0" for leg in (old, new))
        why = f"workload {f.workload} ({f.kind}) not measured on both legs"
        return f"not measured: {why}", samples, both, {"measured": False, "reason": why}
    family = (f"{old} and {new} alone (not a column of the compare tables)" if cell.alone
              else "this group's compare tables")
    values = cell.values
    med = {leg: statistics.median(values[leg]) for leg in (old, new)}
    shown = " → ".join(format_measure(med[leg], relative_uncertainty(values[leg])) for leg in (old, new))
    ours = f"{format_ratio(cell.est)}; {shown} {UNITS[f.kind]}"
    if cell.alone:
        ours += f"; Holm family: {family}"
    # how each leg's processes started: a single pass on a fresh machine is cold on both legs
    samples = ", ".join(f"{leg}: {len(values[leg])} ({start_counts(passing(recs[leg]))})" for leg in (old, new))
    data = {"measured": True, "estimate": cell.est.as_dict(), "values": values,
            "median": med, "tp": cell.key.tp, "holm_family": family}
    return ours, samples, both, data


def ratio_table(check: SeedCheck, groups: list[Group], rs: ResultSet, order: list[str],
                baseline: str | None) -> Table:
    fs = check.findings
    table = Table("Seed findings: ratios", RATIO_COLUMNS, [])
    seed_legs = sort_legs(fs.legs)
    cache = EstimateCache()
    for f in fs.ratios:
        old, new = fs.leg(f.baseline), fs.leg(f.candidate)
        comparison = pair_label(f.baseline, f.candidate, seed_legs, f.kind)
        seed = (f"{f.seed.ratio:.2f}x ({_num(f.seed.baseline)} → {_num(f.seed.candidate)} {UNITS[f.kind]}, "
                f"{passes_label(f.seed.passes)})")
        both_legs = [g for g in groups if latest_of(g.rs.results, f.model, old) and latest_of(g.rs.results, f.model, new)
                     and old in g.legs(order) and new in g.legs(order)]
        # a group whose scenario table never asked this model for the workload is no row of this finding
        holding = [g for g in both_legs if _asks_for(g, f.model, f.workload, (old, new), cache)]
        rows = []
        for g in holding:
            ours, samples, recs, data = _measured(f, g, old, new, order, baseline, cache)
            if len(groups) > 1:
                ours += f"; group {g.key.machine} · table {g.key.scenario_name}"
                data["group"] = g.label
            rows.append((ours, samples, recs, data))
        if not rows:
            why = (f"not measured: no scenario table that ran {f.model} on {old} and {new} lists workload {f.workload}"
                   if both_legs else _not_measured(f, old, new, rs, order))
            recs = latest_of(rs.results, f.model, old) + latest_of(rs.results, f.model, new)
            samples = ", ".join(f"{leg}: {_status(latest_of(rs.results, f.model, leg))[0]}" for leg in (old, new))
            rows.append((why, samples, recs, {"measured": False, "reason": why.removeprefix("not measured: ")}))
        for ours, samples, recs, data in rows:
            diffs = differences(recs, f.workload, fs.seed_requests, fs.gpu)
            table.rows.append([f.group, f.model, f.workload, comparison, seed, ours, samples,
                               "; ".join(diffs) or MISSING])
            table.data.append({"group": f.group, "model_id": f.model, "workload": f.workload, "kind": f.kind,
                               "comparison": comparison, "seed_legs": [f.baseline, f.candidate], "legs": [old, new],
                               "seed": f.seed.model_dump(), "ours": ours, "differences": diffs, **data})
    table.note = ("Seed: the ratio the seed report prints, its two values and the passes behind each (fewer than 3: "
                  "no dispersion was measured, so no verdict). Ours: the compare tables' own cell for that row and "
                  "pair of legs (ratio, verdict and interval as computed there: Welch's t-test on log values, Holm over every "
                  "ratio cell of the group's comparison; fewer than 3 repeats: no verdict), then our medians. Legs: "
                  + ", ".join(f"{k} = {v}" for k, v in fs.legs.items())
                  + ". Differences in data are read from the result records, not typed per row.")
    return table


def _expected(e: Expectation) -> str:
    text = e.status
    if e.cause:
        text += f", signature contains '{e.cause}'"
    if e.workload:
        text += f", {e.workload} {_num(e.value)}"
    return text


def _observed(o: OutcomeFinding, e: Expectation, leg: str, rs: ResultSet, loaded: ResultSet | None
              ) -> tuple[str, str, str, list[TaskResult]]:
    """(observed, matches, why not observed, records) for one expected outcome."""
    recs = latest_of(rs.results, o.model, leg, e.variant)
    where = ""
    if not recs:
        recs = latest_of(rs.others, o.model, leg, e.variant)
        if recs:
            runs = ", ".join(sorted({r.run_id for r in recs}))
            where = f" (run {runs}: another environment than the tables' run; in coverage and failure attribution)"
    if not recs and loaded is not None:
        recs = latest_of(loaded.results, o.model, leg, e.variant)
        if recs:
            runs = ", ".join(sorted({r.run_id for r in recs}))
            where = f" (run {runs}: left out of the tables by canonical selection)"
    if not recs:
        venv = f"variant {e.variant}" if e.variant else "its base venv (no variant)"
        return f"not observed: no result for {o.model} on {leg} in {venv}", "not observed", "", []
    status, why = _status(recs)
    observed = f"{status}: {why}" if why else status
    if status == "PASS" and e.workload:
        values = [w.value for r in passing(recs) if (w := workload_named(r, e.workload))]
        if values:
            kind = next(w.kind for r in passing(recs) if (w := workload_named(r, e.workload)))
            observed += (f", {e.workload} {format_measure(statistics.median(values), relative_uncertainty(values))} "
                         f"{UNITS[kind]} ({passes_label(len(values))})")
        else:
            observed += f", {e.workload} not measured"
    if status != e.status:
        matches = f"no: {status}, expected {e.status}"
    elif e.cause and e.cause.lower() not in why.lower():
        matches = f"no: the signature does not contain '{e.cause}'"
    else:
        matches = "yes"
    return observed + where, matches, why, recs


def outcome_table(check: SeedCheck, rs: ResultSet) -> Table:
    fs = check.findings
    table = Table("Seed findings: expected outcomes", OUTCOME_COLUMNS, [])
    for o in fs.outcomes:
        for e in o.expect:
            leg = fs.leg(e.leg)
            observed, matches, _, recs = _observed(o, e, leg, rs, check.loaded)
            diffs = differences(recs, e.workload, fs.seed_requests, fs.gpu)
            table.rows.append([o.group, o.model, f"{e.leg} → {leg}", e.variant or "base", e.seed, _expected(e),
                               observed, matches, "; ".join(diffs) or MISSING])
            table.data.append({"group": o.group, "model_id": o.model, "seed_leg": e.leg, "leg": leg,
                               "variant": e.variant, "expected": e.model_dump(), "observed": observed,
                               "matches": matches, "differences": diffs})
    table.note = ("Observed: the latest attempt of each repeat of that leg, variant and model (PASS if any "
                  "repeat passed). A match needs the same status and, for a FAIL, the expected text in the "
                  "failure's signature (case-insensitive).")
    return table


def seed_tables(check: SeedCheck, groups: list[Group], rs: ResultSet, order: list[str],
                baseline: str | None) -> dict[str, Table]:
    """The section's tables by file name; a findings file without outcomes (or ratios) has no such table."""
    out = {}
    if check.findings.ratios:
        out["seed-ratios"] = ratio_table(check, groups, rs, order, baseline)
    if check.findings.outcomes:
        out["seed-outcomes"] = outcome_table(check, rs)
    return out
