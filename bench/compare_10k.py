"""Benchmark: 10,000 results.json -> every table, timed side by side in one run.

    .venv/bin/python bench/compare_10k.py [N]

Absolute seconds on a shared 2-core machine are not evidence; the ratios
between the stages measured here, in one process, are.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from resultfactory import write_result  # noqa: E402

from ablation.analysis.tables import all_tables  # noqa: E402
from ablation.results.canonical import select  # noqa: E402
from ablation.results.store import load_results  # noqa: E402


def make(root: Path, n: int) -> None:
    rng = random.Random(0)
    legs = ["0.18", "0.26", "0.29", "0.30"]
    repeats = 5
    models = n // (len(legs) * repeats)
    for m in range(models):
        for leg in legs:
            for rep in range(1, repeats + 1):
                values = {w: rng.uniform(100, 10000) for w in ("mixed", "long-context")}
                values.update({w: rng.uniform(0.1, 6) for w in ("single-request", "fixed-batch-32")})
                write_result(root, leg, f"org/model-{m:04d}", values, repeat=rep, model_index=m)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        t0 = time.perf_counter()
        make(root, n)
        t1 = time.perf_counter()
        rs = load_results([root])
        t2 = time.perf_counter()
        rs, _ = select(rs, None)
        t3 = time.perf_counter()
        tables = all_tables(rs)
        t4 = time.perf_counter()
        md = "\n".join(t.markdown() for t in tables)
        t5 = time.perf_counter()
    stages = {"write files": t1 - t0, "load": t2 - t1, "canonical select": t3 - t2,
              "tables (incl. verdicts)": t4 - t3, "markdown": t5 - t4}
    total = t5 - t1
    print(f"{len(rs.results)} results, {sum(len(t.rows) for t in tables)} table rows, {len(md):,} chars of markdown")
    for name, secs in stages.items():
        share = f"{secs / total:6.1%} of load->markdown" if name != "write files" else ""
        print(f"  {name:26} {secs:7.2f} s  {share}")
    print(f"  load -> markdown total     {total:7.2f} s")
    interval_side_by_side(rs)


def interval_side_by_side(rs) -> None:
    """The Welch tests on logs of every consecutive pair, as the tables compute them (one
    family, quantiles vectorised) and as scipy.stats.ttest_ind(equal_var=False) gives them per
    cell, in one process: time, and the largest difference in p-values."""
    import numpy as np
    from scipy.stats import ttest_ind

    from ablation.analysis.stats import compare_many
    from ablation.analysis.tables import collect

    pairs = []
    for kind in ("throughput", "latency"):
        for values in collect(rs, kind).values():
            legs = sorted(values)
            pairs += [(values[a], values[b]) for a, b in zip(legs, legs[1:])]
    t0 = time.perf_counter()
    fast = compare_many(pairs, True)
    t1 = time.perf_counter()
    slow = [ttest_ind(np.log(b), np.log(a), equal_var=False).pvalue for a, b in pairs]
    t2 = time.perf_counter()
    worst = max(abs(f.p - s) for f, s in zip(fast, slow))
    print(f"  {len(pairs)} Welch tests: tables' path {t1 - t0:.2f} s, scipy per cell {t2 - t1:.2f} s "
          f"(scipy/tables {(t2 - t1) / (t1 - t0):.1f}x), largest p-value difference {worst:.1e}")


if __name__ == "__main__":
    main()
