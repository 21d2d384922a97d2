"""Tables across legs, generated from results (never transcribed).

Shapes follow the seed reports: coverage; throughput (tok/s, higher is better,
ratio columns new/old such as `29/28`); latency (ms/tok, lower is better, ratio
columns old→new as speedups); failure attribution; plus a controls table that
says whether the legs did the same work under the same engine settings.
Every ratio carries a verdict from `ablation.analysis.stats`; the ratio cells of both
ratio tables form one family for its multiple-testing correction.
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
from dataclasses import dataclass, field

from ablation.analysis.stats import (
    ALPHA,
    CORRECTION_TEXT,
    METHOD_TEXT,
    MIN_EFFECT,
    MIN_REPEATS,
    POWER,
    RatioEstimate,
    compare_family,
    detectable_change,
    format_measure,
    pooled_log_sd,
    relative_uncertainty,
    within_process_spread,
)
from ablation.results.store import ResultSet, TaskResult

MISSING = "—"
VERDICT_MARK = {"faster": "↑", "slower": "↓", "negligible": "≈", "no difference detected": "≈"}
KINDS = ("throughput", "latency")


def passes_label(n: int, other: int | None = None) -> str:
    """'1 pass', '3 passes'; with two legs' counts that differ, both ('1 and 2 passes'): the
    smaller alone would misstate the leg that has more."""
    if other is not None and other != n:
        return f"{n} and {other} passes"
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
    if est.method == "invalid values":
        return f"{MISSING} (a value <= 0 or not a number, no ratio)"
    if est.verdict == "no verdict":
        return f"{est.ratio:.{d}f}x ({passes_label(est.n_old, est.n_new)}, no verdict)"
    text = f"{est.ratio:.{d}f}x {VERDICT_MARK[est.verdict]}"
    if est.low is not None:
        text += f" [{_bound(est.low, d)}, {_bound(est.high, d)}]"
    return text


def _bound(x: float, d: int) -> str:
    """An interval end: `d` decimals, but never a ratio printed as 0.0 (two significant digits
    then) nor a far end printed to more digits than it is worth."""
    if x < 10 ** -d:
        return f"{x:.2g}"
    return f"{x:.{d}f}" if x < 100 else f"{x:,.0f}"


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


def by_first_row(rs: ResultSet, keys) -> list[tuple[str, str]]:
    """(model, workload) keys in the order of their first row in the ratio tables (row_order):
    tables keyed without tp (controls, cold starts) keep the table's order."""
    first: dict[tuple[str, str], tuple] = {}
    for rk, pos in row_order(rs).items():
        k = (rk.model_id, rk.workload)
        first[k] = min(first.get(k, pos), pos)
    return sorted(keys, key=lambda k: first.get(k, (0,)))


def workload_labels(rs: ResultSet) -> dict[tuple[str, str], str]:
    """(model, workload key) -> the name tables print: the workload's `label` where the table gave one."""
    labels: dict[tuple[str, str], str] = {}
    for r in rs.results:
        for w in r.workloads.values():
            if w.record.label:
                labels.setdefault((r.model_id, w.name), w.record.label)
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
            out += [w.record.samples or w.record.latencies or [] for w in r.workloads.values() if w.kind == kind]
    return out


Cells = dict[RowKey, dict[str, list[float]]]
Estimates = dict[tuple[RowKey, int], RatioEstimate]  # (row, ratio column) -> estimate


def family_estimates(rs: ResultSet, legs: list[str] | None = None, baseline: str | None = None,
                     cells: dict[str, Cells] | None = None) -> dict[str, Estimates]:
    """kind -> (row, column) -> estimate for every ratio cell of both ratio tables: ONE Holm
    family, so the chance of any false arrow in what one comparison prints stays at ALPHA.
    `cells`: kind -> collect(rs, kind), when the caller has it already."""
    legs = legs or rs.legs()
    pairs = leg_pairs(legs, baseline)
    cells = cells or {kind: collect(rs, kind) for kind in KINDS}
    wanted = [(kind, key, j) for kind in KINDS for key in cells[kind]
              for j, (a, b) in enumerate(pairs) if a in cells[kind][key] and b in cells[kind][key]]
    batch = compare_family([(cells[kind][key][pairs[j][0]], cells[kind][key][pairs[j][1]], kind == "throughput")
                            for kind, key, j in wanted])
    out: dict[str, Estimates] = {kind: {} for kind in KINDS}
    for (kind, key, j), est in zip(wanted, batch):
        out[kind][(key, j)] = est
    return out


def ratio_table(rs: ResultSet, kind: str, legs: list[str] | None = None, baseline: str | None = None,
                controls: dict | None = None, estimates: dict[str, Estimates] | None = None,
                cells: dict[str, Cells] | None = None) -> Table:
    """`controls`, `estimates` (family_estimates) and `cells` (kind -> collect): when the caller
    has them already (all_tables). The verdicts are the same either way: the family is always
    both ratio tables of these results."""
    legs = legs or rs.legs()
    cells = cells or {k: collect(rs, k) for k in KINDS}
    estimates = (estimates or family_estimates(rs, legs, baseline, cells))[kind]
    kind_cells = cells[kind]
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
    keys = sorted(kind_cells, key=lambda k: order[k])
    for key in keys:
        values = kind_cells[key]
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
                           # a cell of invalid values has no ratio (its text says why): null, as for a missing leg
                           "ratios": {c: (e.as_dict() if e and e.method != "invalid values" else None)
                                      for c, e in zip(ratio_cols, ests)},
                           "controls_differ": row_ctl.differs,
                           "controls_not_reported": row_ctl.unreported,
                           "kv_cache_binding": row_ctl.kv_binding})
    processes = [len(v) for values in kind_cells.values() for v in values.values()]  # per leg and cell
    table.note = verdict_note(max(processes, default=0), within_process_spread(in_process_samples(rs, kind)),
                              verdict_summary(kind_cells, estimates, pairs), min_n=min(processes, default=0))
    return table


@dataclass(frozen=True)
class VerdictSummary:
    """What a ratio table's footnote says about its verdicts."""

    family: int  # judged cells in the Holm family (both ratio tables)
    levels: tuple[float, float]  # lowest and highest confidence level printed
    repeats: int  # repeats per leg of the typical judged cell
    sd: float | None  # pooled log-scale SD between process repeats, this table's cells
    detectable: float | None  # smallest ratio detected with POWER at that SD and repeats


def verdict_summary(cells: Cells, estimates: Estimates, pairs: list[tuple[str, str]]) -> VerdictSummary | None:
    """From this table's judged cells: the pooled dispersion (each (row, leg) sample once)
    and the smallest change detectable with it (stats.detectable_change)."""
    judged = [(key, j, e) for (key, j), e in estimates.items() if e.p is not None]
    if not judged:
        return None
    samples = {(key, leg): cells[key][leg] for key, j, _ in judged for leg in pairs[j]}
    pooled = pooled_log_sd(list(samples.values()))
    repeats = statistics.median_low([min(e.n_old, e.n_new) for _, _, e in judged])
    family = judged[0][2].family
    levels = [e.level for _, _, e in judged]
    sd = pooled[0] if pooled else None
    return VerdictSummary(family, (min(levels), max(levels)), repeats, sd,
                          detectable_change(sd, repeats, family) if sd else None)


def _times(ratio: float) -> str:
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:,.0f}x"


def _pct(level: float) -> str:
    text = f"{level:.1%}"
    return text.replace(".0%", "%")


def verdict_note(max_n: int, in_process: float | None, summary: VerdictSummary | None = None,
                 min_n: int | None = None) -> str:
    """The footnote says what noise was measured, and how, for the verdicts beside it: the
    method, the correction, and the smallest change this run could have detected. max_n/min_n:
    the most and fewest processes of any leg in any cell (0: the table has no rows, no note)."""
    if max_n == 0:
        return ""
    measured = (f" Within one process the timed passes spread ±{in_process:.1%} (median over cells): "
                "in-process noise only, not used for verdicts." if in_process is not None else "")
    if summary is not None:
        lo, hi = summary.levels
        level = _pct(lo) if lo == hi else f"{_pct(lo)}-{_pct(hi)}"
        text = (f"Ratios: geometric means of up to {max_n} process repeats per leg (per-leg columns: medians). "
                f"↑ better / ↓ worse: {METHOD_TEXT} rejects after {CORRECTION_TEXT}'s correction over the "
                f"{summary.family} ratio cell{'s' if summary.family != 1 else ''} of this comparison (throughput "
                f"and latency: at most {ALPHA:.0%} chance of any false arrow) and the change is at least "
                f"{MIN_EFFECT:.0%}; ≈ otherwise. Brackets: the test's own interval at the {CORRECTION_TEXT} level "
                f"that decided the cell ({level}), so it excludes 1.00 exactly when the test rejects. Fewer than "
                f"{MIN_REPEATS} repeats on a leg: no verdict.")
        if summary.detectable is not None:
            text += (f" With {summary.repeats} repeats at ±{summary.sd:.1%} between processes (SD of log values, "
                     f"pooled over this table), changes under {_times(summary.detectable)} cannot be detected reliably "
                     f"({POWER:.0%} power for a lone change at {CORRECTION_TEXT}'s strictest level).")
        return text + measured
    if max_n >= MIN_REPEATS:
        return (f"Up to {max_n} process repeats per leg, but no ratio cell could be judged (fewer than {MIN_REPEATS} "
                "repeats on one of its legs, or a value no ratio can be taken of): no verdict." + measured)
    count = f"{min_n}-{max_n}" if min_n is not None and min_n != max_n else f"{max_n}"
    why = ("no between-process dispersion was measured and no ratio gets a verdict" if max_n == 1 else
           "too few to judge a between-process dispersion, so no ratio gets a verdict")
    return (f"{count} process{'es' if max_n != 1 else ''} per leg and cell, fewer than {MIN_REPEATS}: {why} (↑/↓/≈); "
            "rerun with `--repeats 3`. Unrepeated values are printed to 3 significant digits." + measured)


def status_by_cell(rs: ResultSet, by_environment: bool = False) -> dict[tuple, tuple[str, str]]:
    """(model, leg) -> (status, detail) from the latest attempts; a model passes on a leg
    if the latest attempt of any repeat passed. detail: the failure class or the skip reason.
    by_environment: keyed (model, leg, environment) instead."""
    out: dict[tuple, tuple[str, str]] = {}
    for r in latest_attempts(rs.results):
        key = (r.model_id, r.leg, r.environment) if by_environment else (r.model_id, r.leg)
        if out.get(key, ("",))[0] == "PASS":
            continue
        detail = (r.cause.cls if r.cause else "") if r.status == "FAIL" else (r.skip_reason or "")
        out[key] = (r.status, detail)
    return out


def coverage_table(rs: ResultSet, legs: list[str] | None = None) -> Table:
    """Per leg: passing / failed / skipped / not run, over the models of the results; an "invalid"
    column (only when some results file is unusable) names the models whose record for that leg
    could not be used, so an unusable file never reads as a pass or disappears from the count."""
    legs = legs or rs.legs()
    latest = latest_attempts(rs.results)
    bad = [i for i in rs.invalid if i.leg in legs]
    models = sorted({r.model_id for r in latest} | {i.model for i in bad if i.model})
    skipped = sorted({r.model_id for r in latest if r.status == "SKIP"})
    denominator = [m for m in models if m not in skipped]
    columns = ["leg", "passing", "failed", "skipped", "not run"] + (["invalid"] if bad else [])
    table = Table("Coverage", columns, [])
    cells = status_by_cell(rs)
    for leg in legs:
        status = {model: st for (model, cell_leg), (st, _) in cells.items() if cell_leg == leg}
        passing = [m for m in denominator if status.get(m) == "PASS"]
        failed = [m for m in denominator if status.get(m) == "FAIL"]
        invalid = sorted({i.model or i.path.parent.name for i in bad if i.leg == leg} - set(passing) - set(failed))
        not_run = [m for m in denominator if m not in status and m not in invalid]
        row = [leg, f"{len(passing)}/{len(denominator)}", ", ".join(failed) or MISSING,
               ", ".join(skipped) or MISSING, ", ".join(not_run) or MISSING]
        table.rows.append(row + ([", ".join(invalid) or MISSING] if bad else []))
        table.data.append({"leg": leg, "passing": passing, "failed": failed, "skipped": skipped,
                           "not_run": not_run, "invalid": invalid})
    _environment_rows(table, rs, legs, bad)
    if skipped:
        reasons = sorted({f"{r.model_id}: {r.skip_reason}" for r in latest if r.status == "SKIP"})
        table.note = (f"The denominator is {len(denominator)}, not {len(models)}: skipped on this machine "
                      f"(not failed) and excluded: " + "; ".join(reasons))
    else:
        table.note = f"The denominator is every model in the results ({len(models)}); none was skipped."
    if bad:
        table.note += (f" {len(bad)} results file(s) could not be used (invalid: a malformed or inconsistent "
                       "record, named in the warnings); they count for no ratio.")
    if rs.others and any(r.leg in legs for r in rs.others):
        table.note += (" A row 'leg (environment)' is that leg's outcome in another venv than the one its row and "
                       "every other table use (its base venv beside an override variant, or the reverse), over the "
                       "models that ran there; it counts in no other row.")
    if rs.warnings:
        table.note += f" {len(rs.warnings)} note(s) about unreadable or excluded results: see the warnings."
    return table


def _environment_rows(table: Table, rs: ResultSet, legs: list[str], bad: list) -> None:
    """Coverage rows for rs.others: per leg and environment, the models that ran in it."""
    by_env: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
    for (model, leg, env), st in status_by_cell(ResultSet(rs.others, []), by_environment=True).items():
        if leg in legs:
            by_env.setdefault((leg, env), {})[model] = st
    for leg, env in sorted(by_env, key=lambda k: (legs.index(k[0]), k[1])):
        status = {m: st for m, (st, _) in by_env[(leg, env)].items()}
        ran = sorted(m for m, st in status.items() if st != "SKIP")
        passing = [m for m in ran if status[m] == "PASS"]
        failed = [m for m in ran if status[m] == "FAIL"]
        skipped = sorted(m for m, st in status.items() if st == "SKIP")
        row = [f"{leg} ({env})", f"{len(passing)}/{len(ran)}", ", ".join(failed) or MISSING,
               ", ".join(skipped) or MISSING, MISSING]
        table.rows.append(row + ([MISSING] if bad else []))
        table.data.append({"leg": leg, "environment": env, "passing": passing, "failed": failed, "skipped": skipped,
                           "not_run": [], "invalid": []})


def failures_table(rs: ResultSet) -> Table:
    table = Table("Failure attribution", ["leg", "model", "class", "signature"], [])
    for r in sorted(latest_attempts(rs.results), key=lambda r: (r.leg, r.model_id, r.repeat)):
        if r.status == "FAIL":
            cls, sig = (r.cause.cls, r.cause.signature) if r.cause else ("?", "?")
            table.rows.append([r.leg, r.model_id, cls, sig])
            table.data.append({"leg": r.leg, "model_id": r.model_id, "class": cls, "signature": sig})
    # the same legs' failures in another environment (rs.others), labelled with it
    for r in sorted(latest_attempts(rs.others), key=lambda r: (r.leg, r.environment, r.model_id, r.repeat)):
        if r.status == "FAIL":
            cls, sig = (r.cause.cls, r.cause.signature) if r.cause else ("?", "?")
            table.rows.append([f"{r.leg} ({r.environment})", r.model_id, cls, sig])
            table.data.append({"leg": r.leg, "environment": r.environment, "model_id": r.model_id, "class": cls,
                               "signature": sig, "run_id": r.run_id})
    return table


CONTROL_FIELDS = {
    "work done": lambda r, w: (w.record.total_output_tokens, w.record.num_seqs),
    "kv-cache": lambda r, w: r.engine.kv_cache_tokens,
    "attention backend": lambda r, w: r.engine.attention_backend,
    "scheduler": lambda r, w: (r.engine.max_num_batched_tokens, r.engine.max_num_seqs, r.engine.enable_chunked_prefill),
}


# Not a control column: beside the controls of a row, the most KV-cache tokens its workload can hold at once.
KV_DEMAND = "kv demand"


def kv_demand(w) -> int | None:
    """The most KV-cache tokens the workload's sequences can hold at once: every sequence's prompt and output
    tokens (a throughput workload submits all its requests at once; a latency record is one batch). The
    prompt is vLLM's own count where the harness kept it (multimodal: media placeholders expanded), else the
    submitted token ids. None when the record lacks either count, or when it has media that vLLM's prompt
    count does not hold (no more tokens than were submitted: an encoder-decoder model such as whisper keeps
    its encoder's tokens for cross-attention, outside the prompt)."""
    extra = w.record.model_extra or {}
    engine, submitted = extra.get("engine_prompt_tokens"), extra.get("total_input_tokens")
    if extra.get("media") and not (_count(engine) and _count(submitted) and engine > submitted):
        return None
    prompt = engine if _count(engine) else submitted
    out = w.record.total_output_tokens
    if not _count(prompt) or out is None:
        return None
    return prompt + out


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def kv_binding(per: dict[str, dict[str, object]]) -> tuple[str, int] | None:
    """For a row whose KV cache differs between legs, with the most tokens its workload can hold at once:
    'binds' when that is more than the smaller cache (the cache sizes can then set how many sequences run
    together, and so the ratio), 'not binding' when every cache holds all of it; None when a size or the
    demand is unknown."""
    caches = list(per.get("kv-cache", {}).values())
    demand = max((d for d in per.get(KV_DEMAND, {}).values() if d is not None), default=None)
    if not caches or demand is None or not all(isinstance(c, int) for c in caches):
        return None
    return ("binds" if demand > min(caches) else "not binding"), demand


def _controls(rs: ResultSet, legs: list[str]) -> dict[tuple[str, str], dict[str, dict[str, object]]]:
    """(model, workload) -> control -> leg -> value (PASS tasks, first repeat); KV_DEMAND -> leg -> tokens."""
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
            per.setdefault(KV_DEMAND, {})[r.leg] = kv_demand(w)
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
    kv_binding: str | None = None  # where the KV cache differs: kv_binding()'s answer

    def cell(self) -> str:
        if self.differs:
            return "differ: " + ", ".join(f"{n} ({self.kv_binding})" if n == "kv-cache" and self.kv_binding else n
                                          for n in self.differs)
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
        binding = kv_binding(per) if states["kv-cache"] == "differs" else None
        out[key] = RowControls([n for n, s in states.items() if s == "differs"],
                               [n for n, s in states.items() if s == "not reported"],
                               binding[0] if binding else None)
    return out


def controls_table(rs: ResultSet, legs: list[str] | None = None, ctl: dict | None = None) -> Table:
    """`ctl`: _controls(rs, legs), when the caller has it already (all_tables)."""
    legs = legs or rs.legs()
    table = Table("Controls: was the comparison like for like?", ["model", "workload", *CONTROL_FIELDS], [])
    ctl = ctl if ctl is not None else _controls(rs, legs)
    labels = workload_labels(rs)

    for key in by_first_row(rs, ctl):
        cells = []
        for name in CONTROL_FIELDS:
            by_leg = ctl[key].get(name, {})
            state = control_state(by_leg)
            if state == "not reported":
                cells.append("not reported")
            elif state == "same":
                cells.append(f"same ({_fmt_control(next(iter(by_leg.values())))})")
            else:
                cells.append("**DIFFERS**: " + " / ".join(f"{leg} {_fmt_control(v)}" for leg, v in by_leg.items())
                             + (_kv_binding_text(ctl[key]) if name == "kv-cache" else ""))
        table.rows.append([key[0], labels.get(key, key[1]), *cells])
        table.data.append({"model_id": key[0], "workload": key[1], "controls": ctl[key]})
    table.note = ("work done = (output tokens, sequences); scheduler = (max_num_batched_tokens, max_num_seqs, "
                  "chunked prefill). A difference here is a reason to distrust the ratio beside it. A KV cache "
                  "that differs binds where the workload can hold more tokens at once (every sequence's prompt and "
                  "output) than the smaller cache: then the cache sizes can set how many sequences run together; "
                  "where every cache holds all of it, the difference does not bind.")
    return table


def _kv_binding_text(per: dict[str, dict[str, object]]) -> str:
    binding, demand = kv_binding(per) or (None, None)
    if binding is None:
        return ""
    if binding == "binds":
        return f"; **binds**: the workload holds up to {demand:,} tokens at once"
    return f"; not binding: the workload holds at most {demand:,} tokens at once"


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
    cells = {kind: collect(rs, kind) for kind in KINDS}
    estimates = family_estimates(rs, legs, baseline, cells)  # both ratio tables: one family
    ratio = {kind: ratio_table(rs, kind, legs, baseline, controls=controls, estimates=estimates, cells=cells)
             for kind in KINDS}
    tables = [coverage_table(rs, legs), ratio["throughput"], ratio["latency"], failures_table(rs),
              controls_table(rs, legs, ctl=ctl)]
    return tables
