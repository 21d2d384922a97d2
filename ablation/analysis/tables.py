"""Tables across legs, generated from results (never transcribed).

Shapes follow the seed reports: coverage; throughput (tok/s, higher is better,
ratio columns new/old such as `29/28`); latency (ms/tok, lower is better, ratio
columns old→new as speedups); failure attribution; plus a controls table that
says whether the legs did the same work under the same engine settings.
Every ratio carries a verdict from `ablation.stats`.
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
from dataclasses import dataclass, field

from ablation.analysis.stats import (
    MIN_REPEATS,
    RatioEstimate,
    compare_many,
    format_measure,
    relative_uncertainty,
    within_process_spread,
)
from ablation.results.store import ResultSet, TaskResult

MISSING = "—"
VERDICT_MARK = {"faster": "↑", "slower": "↓", "no difference detected": "≈"}


def passes_label(n: int) -> str:
    return f"{n} pass" if n == 1 else f"{n} passes"


def leg_label(leg: str, all_legs: list[str]) -> str:
    """Short label for ratio headers: '0.29-cpu' -> '29' when that is unambiguous."""
    def short(x: str) -> str:
        m = re.match(r"^\d+\.(\d+)", x)
        return m.group(1) if m else x

    shorts = [short(x) for x in all_legs]
    return short(leg) if len(set(shorts)) == len(shorts) else leg


def format_ratio(est: RatioEstimate | None) -> str:
    if est is None:
        return MISSING
    # Two decimals claim 1% resolution; an interval wider than 20% does not support that.
    d = 1 if est.low is not None and est.high - est.low > 0.2 else 2
    if est.verdict == "no verdict":
        return f"{est.ratio:.{d}f}x ({passes_label(min(est.n_old, est.n_new))}, no verdict)"
    text = f"{est.ratio:.{d}f}x {VERDICT_MARK[est.verdict]}"
    if est.low is not None:
        text += f" [{est.low:.{d}f}, {est.high:.{d}f}]"
    return text


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    data: list[dict] = field(default_factory=list)  # the unformatted numbers, for JSON

    def markdown(self, heading: bool = True, level: int = 3, suffix: str = "") -> str:
        """heading=False where the enclosing section already says what the table is; `suffix`
        (e.g. the machine) keeps headings unique where one title appears once per group."""
        out = [f"{'#' * level} {self.title}{suffix}", ""] if heading else []
        if self.rows:
            out.append("| " + " | ".join(self.columns) + " |")
            out.append("|" + "|".join("---" for _ in self.columns) + "|")
            out += ["| " + " | ".join(r) + " |" for r in self.rows]
        else:
            out.append("(no rows)")
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
    # plain tuple keys while scanning (a frozen dataclass per result and workload cost ~0.3 s
    # at 10,000 results); one RowKey per distinct row at the end
    order: dict[tuple, tuple] = {}
    for r in rs.results:
        model_index, workloads = r.order
        for w in r.workloads:
            if (r.model_id, r.tp, w) not in order:
                wi = workloads.index(w) if w in workloads else len(workloads)
                order[(r.model_id, r.tp, w)] = (model_index, r.model_id, r.tp, wi, w)
    return {RowKey(*k): v for k, v in order.items()}


def collect(rs: ResultSet, kind: str) -> dict[RowKey, dict[str, list[float]]]:
    """(model, tp, workload) -> leg -> measured values (one per repeat) of PASS tasks."""
    cells: dict[tuple, dict[str, list[float]]] = {}
    for r in latest_attempts(rs.results):
        if r.status != "PASS":
            continue
        for w in r.workloads.values():
            if w.kind == kind:
                cells.setdefault((r.model_id, r.tp, w.name), {}).setdefault(r.leg, []).append(w.value)
    return {RowKey(*k): v for k, v in cells.items()}


def workload_labels(rs: ResultSet) -> dict[tuple[str, str], str]:
    """(model, workload key) -> the name tables print: the workload's `label` where the table gave one."""
    labels: dict[tuple[str, str], str] = {}
    for r in rs.results:
        for w in r.workloads.values():
            if w.raw.get("label"):
                labels.setdefault((r.model_id, w.name), w.raw["label"])
    return labels


def leg_pairs(legs: list[str], baseline: str | None) -> list[tuple[str, str]]:
    """Consecutive pairs (a, b), (b, c), ...; or (baseline, x) for every other leg."""
    if baseline:
        return [(baseline, x) for x in legs if x != baseline]
    return list(zip(legs, legs[1:]))


def pair_label(a: str, b: str, legs: list[str], kind: str) -> str:
    la, lb = leg_label(a, legs), leg_label(b, legs)
    return f"{lb}/{la}" if kind == "throughput" else f"{la}→{lb}"


def in_process_samples(rs: ResultSet, kind: str) -> list[list[float]]:
    """Every PASS cell's timed passes within its one process (throughput `samples`, latency `latencies`)."""
    out = []
    for r in latest_attempts(rs.results):
        if r.status == "PASS":
            out += [w.raw.get("samples") or w.raw.get("latencies") or [] for w in r.workloads.values() if w.kind == kind]
    return out


def ratio_table(rs: ResultSet, kind: str, legs: list[str] | None = None, baseline: str | None = None,
                controls: dict | None = None) -> Table:
    """`controls`: controls_by_row(...) of these results, when the caller has it already (all_tables)."""
    legs = legs or rs.legs()
    cells = collect(rs, kind)
    higher_better = kind == "throughput"
    pairs = leg_pairs(legs, baseline)
    ratio_cols = [pair_label(a, b, legs, kind) for a, b in pairs]
    if higher_better:
        title, unit = "Throughput (tok/s, higher is better)", "tok/s"
    else:
        title, unit = "Latency (ms/tok, lower is better; ratios are speedups)", "ms/tok"
    controls = controls if controls is not None else controls_by_row(_controls(rs, legs))
    table = Table(title, ["model", "tp", "workload", *legs, *ratio_cols, "controls"], [])
    order = row_order(rs)
    labels = workload_labels(rs)
    max_n = 0
    keys = sorted(cells, key=lambda k: order[k])
    wanted = [(key, j) for key in keys for j, (a, b) in enumerate(pairs) if a in cells[key] and b in cells[key]]
    batch = compare_many([(cells[k][pairs[j][0]], cells[k][pairs[j][1]]) for k, j in wanted],
                         higher_better)  # every bootstrap of the table in one batched step
    estimates = dict(zip(wanted, batch))
    for key in keys:
        values = cells[key]
        max_n = max(max_n, *(len(v) for v in values.values()))
        med = {leg: statistics.median(v) for leg, v in values.items()}
        ests = [estimates.get((key, j)) for j in range(len(pairs))]
        shown = [format_measure(med.get(leg), relative_uncertainty(values.get(leg, [])))
                 for leg in legs]
        row_ctl = controls.get((key.model_id, key.workload), RowControls([], list(CONTROL_FIELDS)))
        shown_name = labels.get((key.model_id, key.workload), key.workload)
        table.rows.append([key.model_id, str(key.tp), shown_name, *shown, *(format_ratio(e) for e in ests),
                           row_ctl.cell()])
        # not dataclasses.asdict: it deep-copies, 0.3 s of the 10k bench for three strings
        table.data.append({"model_id": key.model_id, "tp": key.tp, "workload": key.workload, "label": shown_name,
                           "unit": unit,
                           "values": {leg: values.get(leg) for leg in legs},
                           "median": {leg: med.get(leg) for leg in legs},
                           "ratios": {c: (e.as_dict() if e else None) for c, e in zip(ratio_cols, ests)},
                           "controls_differ": row_ctl.differs,
                           "controls_not_reported": row_ctl.unreported})
    table.note = verdict_note(max_n, within_process_spread(in_process_samples(rs, kind)))
    return table


def verdict_note(max_n: int, in_process: float | None) -> str:
    """The footnote says what noise was measured, and how, for the verdicts beside it."""
    measured = (f" Within one process the timed passes spread ±{in_process:.1%} (median over cells): "
                "in-process noise only, not used for verdicts." if in_process is not None else "")
    if max_n >= MIN_REPEATS:
        return (f"Medians of up to {max_n} process repeats per leg. Ratios: median ratio, 95% percentile-bootstrap "
                "interval of the between-process repeats in brackets; ↑ better / ↓ worse when the interval "
                "excludes 1.00, otherwise ≈ no difference detected. A cell with fewer than "
                f"{MIN_REPEATS} repeats gets no verdict." + measured)
    return (f"{max_n} process{'es' if max_n != 1 else ''} per leg and cell, fewer than {MIN_REPEATS}: no between-process "
            "dispersion was measured and no ratio gets a verdict (↑/↓/≈); rerun with `--repeats 3`. Unrepeated "
            "values are printed to 3 significant digits." + measured)


def status_by_cell(rs: ResultSet) -> dict[tuple[str, str], tuple[str, str]]:
    """(model, leg) -> (status, detail) from the latest attempts; a model passes on a leg
    if the latest attempt of any repeat passed. detail: the failure class or the skip reason."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for r in latest_attempts(rs.results):
        key = (r.model_id, r.leg)
        if out.get(key, ("",))[0] == "PASS":
            continue
        detail = (r.cause or {}).get("class", "") if r.status == "FAIL" else (r.skip_reason or "")
        out[key] = (r.status, detail)
    return out


def coverage_table(rs: ResultSet, legs: list[str] | None = None) -> Table:
    legs = legs or rs.legs()
    latest = latest_attempts(rs.results)
    models = sorted({r.model_id for r in latest})
    skipped = sorted({r.model_id for r in latest if r.status == "SKIP"})
    denominator = [m for m in models if m not in skipped]
    table = Table("Coverage", ["leg", "passing", "failed", "skipped", "not run"], [])
    cells = status_by_cell(rs)
    for leg in legs:
        status = {model: st for (model, cell_leg), (st, _) in cells.items() if cell_leg == leg}
        passing = [m for m in denominator if status.get(m) == "PASS"]
        failed = [m for m in denominator if status.get(m) == "FAIL"]
        not_run = [m for m in denominator if m not in status]
        table.rows.append([leg, f"{len(passing)}/{len(denominator)}", ", ".join(failed) or MISSING,
                           ", ".join(skipped) or MISSING, ", ".join(not_run) or MISSING])
        table.data.append({"leg": leg, "passing": passing, "failed": failed, "skipped": skipped,
                           "not_run": not_run})
    if skipped:
        reasons = sorted({f"{r.model_id}: {r.skip_reason}" for r in latest if r.status == "SKIP"})
        table.note = (f"The denominator is {len(denominator)}, not {len(models)}: skipped on this machine "
                      f"(not failed) and excluded: " + "; ".join(reasons))
    else:
        table.note = f"The denominator is every model in the results ({len(models)}); none was skipped."
    if rs.warnings:
        table.note += f" {len(rs.warnings)} note(s) about unreadable or excluded results: see the warnings."
    return table


def failures_table(rs: ResultSet) -> Table:
    table = Table("Failure attribution", ["leg", "model", "class", "signature"], [])
    for r in sorted(latest_attempts(rs.results), key=lambda r: (r.leg, r.model_id, r.repeat)):
        if r.status == "FAIL":
            cause = r.cause or {}
            table.rows.append([r.leg, r.model_id, cause.get("class", "?"), cause.get("signature", "?")])
            table.data.append({"leg": r.leg, "model_id": r.model_id, **cause})
    return table


CONTROL_FIELDS = {
    "work done": lambda r, w: (w.raw.get("total_output_tokens"), w.raw.get("num_seqs")),
    "kv-cache": lambda r, w: r.engine.get("kv_cache_tokens"),
    "attention backend": lambda r, w: r.engine.get("attention_backend"),
    "scheduler": lambda r, w: (r.engine.get("max_num_batched_tokens"), r.engine.get("max_num_seqs"),
                               r.engine.get("enable_chunked_prefill")),
}


def _controls(rs: ResultSet, legs: list[str]) -> dict[tuple[str, str], dict[str, dict[str, object]]]:
    """(model, workload) -> control -> leg -> value (PASS tasks, first repeat)."""
    seen: dict[tuple[str, str], dict[str, dict[str, object]]] = {}
    done: set[tuple[str, str, str]] = set()  # (model, workload, leg) already read from its first repeat
    for r in sorted(latest_attempts(rs.results), key=lambda r: r.repeat):
        if r.status != "PASS" or r.leg not in legs:
            continue
        for w in r.workloads.values():
            if (r.model_id, w.name, r.leg) in done:
                continue
            done.add((r.model_id, w.name, r.leg))
            per = seen.setdefault((r.model_id, w.name), {})
            for name, get in CONTROL_FIELDS.items():
                per.setdefault(name, {})[r.leg] = get(r, w)
    return seen


def _reported(value) -> bool:
    """A control some leg actually reported: None, or a tuple of Nones, says nothing."""
    if isinstance(value, (list, tuple)):
        return any(_reported(v) for v in value)
    return value is not None


def control_state(by_leg: dict[str, object]) -> str:
    """'not reported' (no leg said anything: not evidence of like for like), 'same' or 'differs'."""
    if not any(_reported(v) for v in by_leg.values()):
        return "not reported"
    return "same" if len({json.dumps(v) for v in by_leg.values()}) <= 1 else "differs"


@dataclass(frozen=True)
class RowControls:
    differs: list[str]
    unreported: list[str]

    def cell(self) -> str:
        if self.differs:
            return "differ: " + ", ".join(self.differs)
        if len(self.unreported) == len(CONTROL_FIELDS):
            return "not reported"
        if self.unreported:
            return f"same ({', '.join(self.unreported)} not reported)"
        return "same"


def controls_by_row(ctl: dict[tuple[str, str], dict[str, dict[str, object]]]) -> dict[tuple[str, str], RowControls]:
    """Per (model, workload): which controls differ and which no leg reported (from _controls)."""
    out = {}
    for key, per in ctl.items():
        states = {name: control_state(per.get(name, {})) for name in CONTROL_FIELDS}
        out[key] = RowControls([n for n, s in states.items() if s == "differs"],
                               [n for n, s in states.items() if s == "not reported"])
    return out


def controls_table(rs: ResultSet, legs: list[str] | None = None, ctl: dict | None = None) -> Table:
    """`ctl`: _controls(rs, legs), when the caller has it already (all_tables)."""
    legs = legs or rs.legs()
    table = Table("Controls: was the comparison like for like?", ["model", "workload", *CONTROL_FIELDS], [])
    order = row_order(rs)
    ctl = ctl if ctl is not None else _controls(rs, legs)
    labels = workload_labels(rs)

    first: dict[tuple[str, str], tuple] = {}  # (model, workload) -> its first row's position
    for rk, v in order.items():
        k = (rk.model_id, rk.workload)
        first[k] = min(first.get(k, v), v)

    for key in sorted(ctl, key=lambda k: first.get(k, (0,))):
        cells = []
        for name in CONTROL_FIELDS:
            by_leg = ctl[key].get(name, {})
            state = control_state(by_leg)
            if state == "not reported":
                cells.append("not reported")
            elif state == "same":
                cells.append(f"same ({_fmt_control(next(iter(by_leg.values())))})")
            else:
                cells.append("**DIFFERS**: " + " / ".join(f"{leg} {_fmt_control(v)}" for leg, v in by_leg.items()))
        table.rows.append([key[0], labels.get(key, key[1]), *cells])
        table.data.append({"model_id": key[0], "workload": key[1], "controls": ctl[key]})
    table.note = ("work done = (output tokens, sequences); scheduler = (max_num_batched_tokens, max_num_seqs, "
                  "chunked prefill). A difference here is a reason to distrust the ratio beside it.")
    return table


def _fmt_control(v) -> str:
    if v is None:
        return "not reported"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt_control(x) for x in v)
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def all_tables(rs: ResultSet, legs: list[str] | None = None, baseline: str | None = None) -> list[Table]:
    ctl = _controls(rs, legs or rs.legs())  # one pass over the results for all three tables that use it
    controls = controls_by_row(ctl)
    tables = [coverage_table(rs, legs), ratio_table(rs, "throughput", legs, baseline, controls=controls),
              ratio_table(rs, "latency", legs, baseline, controls=controls), failures_table(rs),
              controls_table(rs, legs, ctl=ctl)]
    return tables
