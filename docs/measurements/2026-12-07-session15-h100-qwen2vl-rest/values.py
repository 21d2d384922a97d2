"""Qwen/Qwen2-VL-7B-Instruct (text-only, image, single-image, single-video) on 0.26-h200 (3 processes) and
0.29-h200 (2 processes), interleaved on one H100 (run s15-h100-qwen2vl-rest): each process's values and phases, the spread per leg, and each workload's
29/26 ratio with the tool's own test (ablation.analysis.stats) for one cell at 95% -- the tool's table
(compare.md) applies Holm's correction over its 4 cells, so its brackets are wider.

Run from the repository root: .venv/bin/python docs/measurements/2026-12-07-session15-h100-qwen2vl-rest/values.py"""
import json
import math
from datetime import datetime, timezone
from pathlib import Path

from ablation.analysis.stats import compare_samples, detectable_change, pooled_log_sd

here = Path(__file__).parent / "results" / "s15-h100-qwen2vl-rest"
legs = ["0.26-h200", "0.29-h200"]
recs = {leg: sorted((json.loads(p.read_text()) for p in (here / leg / "Qwen__Qwen2-VL-7B-Instruct").glob("results*.json")),
                    key=lambda r: r["repeat"]) for leg in legs}
workloads = list(recs[legs[0]][0]["workloads"])
units = {w: recs[legs[0]][0]["workloads"][w]["unit"] for w in workloads}
print("leg | repeat | status | started (UTC) | duration s | " + " | ".join(recs[legs[0]][0]["phases"]) + " | "
      + " | ".join(f"{w} ({units[w]})" for w in workloads))
for leg in legs:
    for r in recs[leg]:
        phases = " | ".join(f"{v:.1f}" for v in r["phases"].values())
        values = " | ".join(f"{r['workloads'][w]['value']:.4g}" for w in workloads)
        print(f"{leg} | r{r['repeat']} | {r['status']} | {datetime.fromtimestamp(r['started_at'], timezone.utc):%H:%M:%S} | "
              f"{r['duration_s']:.0f} | {phases} | {values}")
print()


def sd_log(v):
    logs = [math.log(x) for x in v]
    m = sum(logs) / len(logs)
    return math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))


for w in workloads:
    higher = units[w] == "tok/s"
    old = [r["workloads"][w]["value"] for r in recs[legs[0]]]
    new = [r["workloads"][w]["value"] for r in recs[legs[1]]]
    est = compare_samples(old, new, higher_is_better=higher)
    sd, _ = pooled_log_sd([old, new])
    print(f"{w} ({units[w]}, {'higher' if higher else 'lower'} is better; the ratio is a speed, 29/26):")
    for leg, v in zip(legs, (old, new)):
        print(f"  {leg}: n {len(v)}, min {min(v):.4g}, max {max(v):.4g}, max/min {max(v) / min(v):.3f}, SD of logs {sd_log(v):.4f}")
    if est.low is None:  # the tool judges a cell only with >= 3 processes per leg; 0.29 has 2 here
        print(f"  29/26 {est.ratio:.3f}x (ratio of medians), {est.method}: {est.verdict} (n {est.n_old} / {est.n_new}); "
              f"SD of logs pooled over legs with >= 3 processes (0.26 alone) {sd:.4f}; with 3 processes per leg at this SD the detectable change would be "
              f"{detectable_change(sd, 3, 1):.3f}x (80% power, 1 cell)")
    else:
        print(f"  29/26 {est.ratio:.3f}x, 95% interval [{est.low:.3f}, {est.high:.3f}], p {est.p:.4f}, verdict {est.verdict}; "
              f"pooled SD of logs {sd:.4f}; detectable change (80% power, 1 cell) {detectable_change(sd, len(old), 1):.3f}x")
