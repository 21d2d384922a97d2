"""Which processes started cold: with their leg's compile and JIT caches empty (the record's `caches`).

Each task process warms up before it is timed, and still the first process of a leg on a machine can
be slower in its timed window. On one H100 (2026-12-07, docs/measurements/2026-12-07-session12-h100-omni-audio),
Qwen2.5-Omni audio on 0.29-h200 ran 9% slower in the process that started with empty caches than
in the three after it, while 0.26-h200's cold process was within 1% of its warm ones; vLLM's JIT
monitor logged no compilation in the timed window, so the cause is not known (disk-cached work on the
GPU or on the CPU side, where the audio processor runs, are candidates). So a ratio
whose legs differ in how many cold processes they hold may carry a cold-start difference, and a
single-pass ratio on a fresh machine compares two cold processes. This table says which is which;
it is a disclosure, not a verdict (no test, no arrow).
"""

from __future__ import annotations

import statistics

from ablation.analysis.tables import Table, by_first_row, latest_attempts, workload_labels
from ablation.results.store import ResultSet, TaskResult

COLD, WARM, CARRIED, UNKNOWN = "cold", "warm", "carried", "not recorded"


def start_state(r: TaskResult) -> str:
    """cold: the leg's caches were empty at the task's start; warm: an earlier process on this
    machine had filled them; carried: imported from another machine; not recorded: before
    2026-12-05's records, which did not say."""
    c = r.record.caches
    if c is None:
        return UNKNOWN
    if c.carried:
        return CARRIED
    return WARM if c.files > 0 else COLD


def cold_start_table(rs: ResultSet, legs: list[str] | None = None) -> Table:
    """Per (model, workload) and leg: how many PASS processes started cold, warm, from carried
    caches or unrecorded; where a leg has both cold and warm values, the cold median over the warm
    median as a speed (above 1.00x: the cold processes were faster)."""
    legs = legs or rs.legs()
    table = Table("Cold and warm processes", ["model", "workload", *legs], [])
    cells: dict[tuple[str, str], dict[str, dict[str, list[tuple[float, str]]]]] = {}
    for r in latest_attempts(rs.results):
        if r.status != "PASS" or r.leg not in legs:
            continue
        state = start_state(r)
        for w in r.workloads.values():
            per = cells.setdefault((r.model_id, w.name), {}).setdefault(r.leg, {})
            per.setdefault(state, []).append((w.value, w.kind))
    labels = workload_labels(rs)
    for key in by_first_row(rs, cells):
        row, data = [key[0], labels.get(key, key[1])], {"model_id": key[0], "workload": key[1], "legs": {}}
        for leg in legs:
            by_state = cells[key].get(leg, {})
            counts = {s: len(v) for s, v in by_state.items()}
            speed = _cold_over_warm(by_state)
            warm = [v for v, _ in by_state.get(WARM, [])]
            spread = max(warm) / min(warm) if len(warm) > 1 and min(warm) > 0 else None
            data["legs"][leg] = {"counts": counts, "cold_over_warm_speed": speed, "warm_max_over_min": spread}
            row.append(_cell(counts, speed, spread))
        table.rows.append(row)
        table.data.append(data)
    table.note = ("cold: the process started with its leg's compile and JIT caches empty (the first process of that "
                  "leg on a fresh machine); warm: an earlier process on this machine had filled them; carried: "
                  "imported from another machine (disclosed). Cold/warm: the cold processes' median over the warm "
                  "ones' as a speed (ms/tok inverted), where a leg has both; below 1.00x the cold processes were "
                  "slower. Warm max/min: the spread between the warm processes, the yardstick for it (one cold "
                  "process is one sample, and no test is made). Warm-up runs before timing in every process, and "
                  "still a cold process can be slower in its timed window (docs/comparer.md): a ratio whose legs "
                  "differ here may carry a cold-start difference.")
    return table


def start_counts(records: list[TaskResult]) -> str:
    """"1 cold, 3 warm": how the given PASS processes started, in a fixed order ("" for none)."""
    counts: dict[str, int] = {}
    for r in records:
        state = start_state(r)
        counts[state] = counts.get(state, 0) + 1
    return _counts_text(counts)


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts[s]} {s}" for s in (COLD, WARM, CARRIED, UNKNOWN) if s in counts)


def _cold_over_warm(by_state: dict[str, list[tuple[float, str]]]) -> float | None:
    cold, warm = by_state.get(COLD), by_state.get(WARM)
    if not cold or not warm:
        return None
    c, w = statistics.median(v for v, _ in cold), statistics.median(v for v, _ in warm)
    if not (c > 0 and w > 0):
        return None
    return c / w if cold[0][1] == "throughput" else w / c


def _cell(counts: dict[str, int], speed: float | None, spread: float | None) -> str:
    if not counts:
        return "—"
    if speed is None:
        return _counts_text(counts)
    return _counts_text(counts) + f" (cold/warm {speed:.2f}x" + (f"; warm max/min {spread:.2f})" if spread else ")")
