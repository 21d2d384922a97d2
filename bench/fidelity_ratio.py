"""Harness vs hand-written vLLM: the fidelity ratio, computed from the two JSON files.

    python bench/fidelity_ratio.py RESULTS_JSON FIDELITY_JSON [--workload mixed]

RESULTS_JSON is a task's results.json (the harness, through the executor);
FIDELITY_JSON is what bench/fidelity_offline.py wrote in the same venv on the
same machine. Prints per-pass values and the ratio of medians (harness / hand);
with three passes each it also says whether the two ranges overlap, the most
three samples a side can honestly support.
"""

from __future__ import annotations

import argparse
import json
import statistics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results_json")
    ap.add_argument("fidelity_json")
    ap.add_argument("--workload", default="mixed")
    args = ap.parse_args()
    with open(args.results_json) as f:
        w = json.load(f)["workloads"][args.workload]
    with open(args.fidelity_json) as f:
        hand = [p["output_tokens_per_second"] for p in json.load(f)["passes"]]
    harness = w.get("samples") or [w["value"]]
    ratio = statistics.median(harness) / statistics.median(hand)
    overlap = min(harness) <= max(hand) and min(hand) <= max(harness)
    print("| | passes (output tok/s) | median |\n|---|---|---|")
    print(f"| harness ({args.workload}) | {', '.join(f'{x:,.0f}' for x in harness)} | {statistics.median(harness):,.0f} |")
    print(f"| hand-written LLM.generate | {', '.join(f'{x:,.0f}' for x in hand)} | {statistics.median(hand):,.0f} |")
    print(f"\nratio harness / hand = {ratio:.3f}; ranges {'overlap' if overlap else 'do not overlap'}")


if __name__ == "__main__":
    main()
