"""Benchmark: how often do the comparer's verdicts lie? Measured through the CLI.

    .venv/bin/python bench/verdict_calibration.py [--tables 200] [--old-ref 5a64037] [--seed 0]

Hand-made results (tests/resultfactory.write_result, the schema the executor writes) in the
`make ablation` shape: three legs (0.28-cpu, 0.29-cpu, 0.30-cpu), one model, four workloads
(two throughput, two latency), so `ablation compare` prints two ratio tables of 2 rows x 2
ratio columns: 8 ratio cells per comparison. Values are lognormal around a per-workload scale.

- A/A: all three legs from the same distribution (10% spread): any ↑/↓ is false.
- Power: 0.29-cpu is `factor` times better than 0.28-cpu (throughput x factor, latency /
  factor), 0.30-cpu equals 0.29-cpu: the four 29/28 cells changed, the four 30/29 did not.
  Power = the share of changed cells called in the right direction; the unchanged cells of
  the same comparisons give the false arrows beside a real change.

Every simulated comparison is its own (scenario table, machine) group in one results
directory: the comparer prints each group's tables separately and the new method's Holm
family is one group's ratio cells, exactly as a user sees one `make ablation` output. One
`ablation compare --format json` call per setting and method reads all of a setting's groups.

"old" is the comparer at --old-ref (the 95% percentile bootstrap of the ratio of medians, no
correction across cells), run from `git archive` of that commit; "new" is this checkout.
Fixed seeds: the same numbers every run (both methods read the same files).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from resultfactory import write_result  # noqa: E402

LEGS = ("0.28-cpu", "0.29-cpu", "0.30-cpu")
WORKLOADS = {"mixed": 2700.0, "long-context": 800.0, "single-request": 5.0, "fixed-batch-32": 0.5}
CHANGED, UNCHANGED = "29/28", "30/29"  # throughput column labels; latency: 28→29, 29→30
LATENCY_COL = {"29/28": "28→29", "30/29": "29→30"}
OLD_REF = "5a64037"  # the last commit with the percentile bootstrap (issue 26's "before")


def settings(power_repeats: list[int]) -> list[tuple[str, int, float, float]]:
    """(kind, repeats, noise SD in logs, factor)."""
    out = [("A/A", n, 0.10, 1.0) for n in (3, 5, 10)]
    out += [("power", n, sd, f) for f in (1.1, 1.2, 1.5) for sd in (0.05, 0.10) for n in power_repeats]
    return out


def make(root: Path, tables: int, repeats: int, sd: float, factor: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for t in range(tables):
        for leg_i, leg in enumerate(LEGS):
            f = factor if leg_i >= 1 else 1.0
            for rep in range(1, repeats + 1):
                noise = np.exp(rng.normal(0.0, sd, len(WORKLOADS)))
                values = {}
                for (w, scale), z in zip(WORKLOADS.items(), noise):
                    latency = "single" in w or "batch" in w
                    values[w] = float(scale * z / f if latency else scale * z * f)
                write_result(root, leg, f"sim/m{t:04d}", values, repeat=rep, sha=f"sim-{t:04d}",
                             model_index=0)


def old_checkout(ref: str, into: Path) -> Path:
    """The comparer at `ref`, unpacked (git archive): run with cwd there so its `ablation` wins."""
    tar = into / "old.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(tar), ref, "ablation"], check=True)
    with tarfile.open(tar) as tf:
        tf.extractall(into / "old", filter="data")
    return into / "old"


def compare_json(results: Path, cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    proc = subprocess.run([sys.executable, "-m", "ablation.cli", "compare", "--format", "json", str(results)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"compare failed ({cwd}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def tally(doc: dict, factor: float) -> dict[str, float]:
    """Per comparison (group): arrows on unchanged cells (false), right-direction calls on changed."""
    false_cells = unchanged_cells = called = changed_cells = tables_false = 0
    for g in doc["groups"]:
        any_false = False
        for table in g["tables"]:
            if not table["title"].startswith(("Throughput", "Latency")):
                continue
            latency = table["title"].startswith("Latency")
            for row in table["rows"]:
                for col in (CHANGED, UNCHANGED):
                    est = row["ratios"][LATENCY_COL[col] if latency else col]
                    arrow = est["verdict"] in ("faster", "slower")
                    if col == CHANGED and factor != 1.0:
                        changed_cells += 1
                        called += est["verdict"] == "faster"
                    else:
                        unchanged_cells += 1
                        false_cells += arrow
                        any_false |= arrow
        tables_false += any_false
    n = len(doc["groups"])
    return {"tables": n, "false_cell": false_cells / unchanged_cells, "false_table": tables_false / n,
            "power": called / changed_cells if changed_cells else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=200, help="simulated comparisons per setting")
    ap.add_argument("--old-ref", default=OLD_REF)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--power-repeats", default="3,5,10", help="repeats of the power settings")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        old = old_checkout(args.old_ref, Path(tmp))
        for i, (kind, n, sd, factor) in enumerate(settings([int(x) for x in args.power_repeats.split(',')])):
            root = Path(tmp) / f"s{i}" / "run"
            make(root, args.tables, n, sd, factor, args.seed * 1000 + i)
            res = {}
            for name, cwd, method in (("old", old, "bootstrap"), ("new", REPO, "welch-log")):
                doc = compare_json(root, cwd)
                methods = {e["method"] for g in doc["groups"] for t in g["tables"] for r in t["rows"]
                           for e in (r.get("ratios") or {}).values() if e}
                assert methods == {method}, (name, methods)  # each side really ran its own comparer
                res[name] = tally(doc, factor)
            rows.append((kind, n, sd, factor, res))
            print(f"[{time.perf_counter() - t0:6.1f} s] {kind} n={n} sd={sd:.0%} x{factor}: "
                  + "; ".join(f"{k} {v['false_cell']:.1%}/{v['false_table']:.1%}/{v['power']:.1%}"
                              for k, v in res.items()), file=sys.stderr)
    print(report(rows, args))
    print(f"\n{time.perf_counter() - t0:.0f} s in all (files written, then each compare run once per method).")


def report(rows, args) -> str:
    n_tables = rows[0][4]["new"]["tables"]
    out = [f"Verdict calibration through `ablation compare --format json`: {n_tables} simulated comparisons "
           f"per setting ({8 * n_tables} ratio cells), `make ablation` shape (3 legs, 4 workloads: 8 ratio "
           f"cells per comparison), lognormal noise, seed {args.seed}.",
           f"old = the comparer at {args.old_ref} (95% percentile bootstrap of the ratio of medians, no correction); "
           "new = Welch's t on log values, Holm over the 8 cells of a comparison, minimum change 2%.", "",
           "A/A (all legs one distribution, 10% spread): false arrows",
           "", "| repeats | old: cells | old: comparisons with any | new: cells | new: comparisons with any |",
           "|---|---|---|---|---|"]
    for kind, n, _sd, _f, res in rows:
        if kind == "A/A":
            o, w = res["old"], res["new"]
            out.append(f"| {n} | {o['false_cell']:.1%} | {o['false_table']:.1%} | {w['false_cell']:.1%} | "
                       f"{w['false_table']:.1%} |")
    out += ["", "Power (29/28 changed by the factor in 4 of the 8 cells; 30/29 unchanged): share of changed cells "
            "called in the right direction, and false arrows on the 4 unchanged cells", "",
            "| change | noise | repeats | old: called | new: called | old: false (unchanged cells) | "
            "new: false (unchanged cells) |", "|---|---|---|---|---|---|---|"]
    for kind, n, sd, f, res in rows:
        if kind == "power":
            o, w = res["old"], res["new"]
            out.append(f"| {f}x | {sd:.0%} | {n} | {o['power']:.1%} | {w['power']:.1%} | {o['false_cell']:.1%} | "
                       f"{w['false_cell']:.1%} |")
    se = (0.05 * 0.95 / n_tables) ** 0.5  # of a rate near 5% over the comparisons
    def half_width(p: float, n: int) -> str:
        return f"±{1.96 * (p * (1 - p) / n) ** 0.5:.1%}"

    out += ["", f"Sampling error (95%): a rate near 5% over {n_tables} comparisons is ±{1.96 * se:.1%}; near 5% "
            f"over the {8 * n_tables} A/A cells {half_width(0.05, 8 * n_tables)}, over the {4 * n_tables} changed "
            f"(or unchanged) cells of a power setting {half_width(0.05, 4 * n_tables)}; near 90% power "
            f"{half_width(0.9, 4 * n_tables)}."]
    return "\n".join(out)


if __name__ == "__main__":
    main()
