"""Qwen2.5-Omni-7B `audio` on 0.26-h200 and 0.29-h200, 4 interleaved processes per leg on one H100
(run s12-h100-omni-audio-r6): each process's value and phases, the spread per leg, and the 29/26 ratio
with the tool's own test (ablation.analysis.stats), over all processes and -- as a sensitivity check,
not the tool's verdict -- over the warm processes only (repeat 1 of each leg started cold).

Run from the repository root: .venv/bin/python docs/measurements/2026-12-07-session12-h100-omni-audio/values.py"""
import json
import math
from datetime import datetime, timezone
from pathlib import Path

from ablation.analysis.stats import compare_samples, detectable_change, pooled_log_sd

here = Path(__file__).parent / "results" / "s12-h100-omni-audio-r6"
legs = ["0.26-h200", "0.29-h200"]
recs = {leg: sorted((json.loads(p.read_text()) for p in (here / leg / "Qwen__Qwen2.5-Omni-7B").glob("results*.json")),
                    key=lambda r: r["repeat"]) for leg in legs}
print("leg | repeat | status | started (UTC) | duration s | " + " | ".join(recs[legs[0]][0]["phases"]) + " | audio tok/s")
for leg in legs:
    for r in recs[leg]:
        phases = " | ".join(f"{v:.1f}" for v in r["phases"].values())
        print(f"{leg} | r{r['repeat']} | {r['status']} | {datetime.fromtimestamp(r['started_at'], timezone.utc):%H:%M:%S} | {r['duration_s']:.0f} | {phases} | "
              f"{r['workloads']['audio']['value']:.1f}")
print()


def sd_log(v):
    logs = [math.log(x) for x in v]
    m = sum(logs) / len(logs)
    return math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))


for label, first in (("all 4 processes per leg (the tool's verdict)", 0), ("warm processes only, r2-r4 (sensitivity check)", 1)):
    old = [r["workloads"]["audio"]["value"] for r in recs[legs[0]][first:]]
    new = [r["workloads"]["audio"]["value"] for r in recs[legs[1]][first:]]
    est = compare_samples(old, new, higher_is_better=True)
    sd, _ = pooled_log_sd([old, new])
    print(f"{label}:")
    for leg, v in zip(legs, (old, new)):
        print(f"  {leg}: n {len(v)}, min {min(v):.0f}, max {max(v):.0f}, max/min {max(v) / min(v):.3f}, SD of logs {sd_log(v):.4f}")
    print(f"  29/26 {est.ratio:.3f}x, 95% interval [{est.low:.3f}, {est.high:.3f}], p {est.p:.4f}, verdict {est.verdict}; "
          f"pooled SD of logs {sd:.4f}; detectable change (80% power, 1 cell) {detectable_change(sd, len(old), 1):.3f}x")
