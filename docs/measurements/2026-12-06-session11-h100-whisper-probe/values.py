"""The three whisper-large-v3 processes on 0.29-h200 (one H100): each value, the phases, and the spread.

Run from this folder: python3 values.py > values.txt (standard library only)."""
import json
import math
from pathlib import Path

runs = ["s11-h100-probe-whisper-0.29", "s11-h100-probe-whisper-0.29-p2", "s11-h100-probe-whisper-0.29-p3"]
roots = {runs[0]: "results", runs[1]: "results-warm", runs[2]: "results-warm"}
recs = [json.loads(Path(f"{roots[r]}/{r}/0.29-h200/openai__whisper-large-v3/results.json").read_text()) for r in runs]
print("process | status | duration s | " + " | ".join(recs[0]["phases"]) + " | " + " | ".join(recs[0]["workloads"]))
for run, rec in zip(runs, recs):
    vals = [f"{w['value']:.4g} {w['unit']}" for w in rec["workloads"].values()]
    phases = [f"{v:.1f}" for v in rec["phases"].values()]
    print(f"{run} | {rec['status']} | {rec['duration_s']:.0f} | " + " | ".join(phases) + " | " + " | ".join(vals))
print()
print("workload | min | max | max/min | SD of logs (3 processes)")
for name in recs[0]["workloads"]:
    v = [rec["workloads"][name]["value"] for rec in recs]
    logs = [math.log(x) for x in v]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    print(f"{name} | {min(v):.4g} | {max(v):.4g} | {max(v) / min(v):.3f} | {sd:.4f}")
