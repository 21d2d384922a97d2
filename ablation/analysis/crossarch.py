"""Two result sets from different machines, same scenario table: what transfers?

For every pair of consecutive legs present on both machines, the speedup on
A and on B; rows whose speedups differ by more than a threshold (default
1.25x, the seed report's cut) are flagged. A failure attribution table says,
per model and leg, whether a failure happens only on A, only on B, on both,
or cannot happen on one of them (SKIP there).
"""

from __future__ import annotations

import math
import statistics

from ablation.analysis.tables import MISSING, Table, collect, leg_pairs, pair_label, row_order, status_by_cell
from ablation.errors import AblationError
from ablation.results.store import ResultSet, sort_legs

DEFAULT_THRESHOLD = 1.25


def check_same_table(a: ResultSet, b: ResultSet, names: tuple[str, str], allow_mismatch: bool) -> list[str]:
    ha, hb = a.scenario_hashes(), b.scenario_hashes()
    if ha == hb and len(ha) == 1:
        return []
    msg = (f"scenario tables differ: {names[0]} ran {', '.join(h[:12] for h in sorted(ha))}, "
           f"{names[1]} ran {', '.join(h[:12] for h in sorted(hb))}")
    if not allow_mismatch:
        raise AblationError(msg + "; the speedups are not comparable (pass --allow-mismatch to see them anyway)")
    return [f"WARNING: {msg}. Rows below compare different workloads and must not be published as a transfer."]


def speedup_table(a: ResultSet, b: ResultSet, names: tuple[str, str], threshold: float = DEFAULT_THRESHOLD,
                  flagged_only: bool = True) -> Table:
    legs = sort_legs(set(a.legs()) & set(b.legs()))
    title = (f"Speedups that differ between {names[0]} and {names[1]} by more than {threshold:.2f}x"
             if flagged_only else f"Speedups on {names[0]} and {names[1]}")
    table = Table(title, ["model / workload", "comparison", names[0], names[1], "divergence"], [])
    rows = []
    for kind in ("throughput", "latency"):
        ca, cb = collect(a, kind), collect(b, kind)
        for key in set(ca) & set(cb):
            for x, y in leg_pairs(legs, None):
                if not all(leg in c[key] for c in (ca, cb) for leg in (x, y)):
                    continue
                sa = _speedup(ca[key][x], ca[key][y], kind)
                sb = _speedup(cb[key][x], cb[key][y], kind)
                if sa is None or sb is None:
                    continue  # a value that is not a finite positive number is no speedup
                divergence = max(sa, sb) / min(sa, sb)
                if flagged_only and divergence <= threshold:
                    continue
                rows.append((divergence, key, pair_label(x, y, legs, kind), sa, sb))
    order = {**row_order(a), **row_order(b)}
    rows.sort(key=lambda r: (-r[0], order.get(r[1], ())))
    for divergence, key, label, sa, sb in rows:
        table.rows.append([f"{key.model_id} {key.workload}", label, f"{sa:.2f}x", f"{sb:.2f}x", f"{divergence:.2f}x"])
        table.data.append({"model_id": key.model_id, "tp": key.tp, "workload": key.workload, "comparison": label,
                           names[0]: sa, names[1]: sb, "divergence": divergence})
    table.note = ("Speedup = new/old throughput or old/new latency on each machine; divergence = larger "
                  "speedup / smaller. Same scenario table, same legs; only the machine differs.")
    return table


def _speedup(old: list[float], new: list[float], kind: str) -> float | None:
    """new/old throughput or old/new latency; None unless both medians are finite and positive."""
    if not all(math.isfinite(v) and v > 0 for v in (*old, *new)):
        return None
    mo, mn = statistics.median(old), statistics.median(new)
    s = mn / mo if kind == "throughput" else mo / mn
    return s if math.isfinite(s) and s > 0 else None


def _verdict(sa: str, sb: str, names: tuple[str, str]) -> str:
    if sa == "FAIL" and sb == "FAIL":
        return "both"
    if sb == "SKIP":
        return f"n/a on {names[1]}"
    if sa == "SKIP":
        return f"n/a on {names[0]}"
    if sa == "FAIL" and sb == "PASS":
        return f"only on {names[0]}"
    if sb == "FAIL" and sa == "PASS":
        return f"only on {names[1]}"
    return "not run on one side"


def failure_attribution(a: ResultSet, b: ResultSet, names: tuple[str, str]) -> Table:
    st_a, st_b = status_by_cell(a), status_by_cell(b)
    table = Table(f"Failure attribution: {names[0]} vs {names[1]}",
                  ["model", "leg", names[0], names[1], "verdict"], [])
    for key in sorted(set(st_a) | set(st_b)):
        sa, da = st_a.get(key, ("not run", ""))
        sb, db = st_b.get(key, ("not run", ""))
        if sa == "PASS" and sb == "PASS":
            continue
        fmt = lambda s, d: f"{s} ({d})" if d else s  # noqa: E731
        table.rows.append([key[0], key[1], fmt(sa, da), fmt(sb, db), _verdict(sa, sb, names)])
        table.data.append({"model_id": key[0], "leg": key[1], names[0]: sa, names[1]: sb,
                           "verdict": _verdict(sa, sb, names)})
    if not table.rows:
        table.note = f"Every task passed on both machines ({MISSING} nothing to attribute)."
    return table
