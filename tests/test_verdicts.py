"""The verdicts as printed: the family of one comparison, the footnote, bisect's rule."""

from __future__ import annotations

import json
import math

import numpy as np
from helpers import run_cli
from resultfactory import write_result

from ablation.analysis.stats import compare_samples, detectable_change, pooled_log_sd
from ablation.analysis.tables import all_tables, ratio_table
from ablation.bisect.search import regressed, render_summary
from ablation.results.store import load_results

LEGS = ("0.28-cpu", "0.29-cpu", "0.30-cpu")
WORKLOADS = {"mixed": 2700.0, "long-context": 800.0, "single-request": 5.0, "fixed-batch-32": 0.5}


def make_ablation_shape(run, repeats: int, sd: float, seed: int, factor: float = 1.0):
    """`make ablation`'s shape: 3 legs, one model, 2 throughput + 2 latency workloads; 0.29-cpu
    `factor` times better than 0.28-cpu, 0.30-cpu as 0.29-cpu. Returns leg -> workload -> values."""
    rng = np.random.default_rng(seed)
    values: dict[str, dict[str, list[float]]] = {}
    for i, leg in enumerate(LEGS):
        f = factor if i else 1.0
        for rep in range(1, repeats + 1):
            v = {w: float(s * math.exp(rng.normal(0, sd)) * (1 / f if "single" in w or "batch" in w else f))
                 for w, s in WORKLOADS.items()}
            write_result(run, leg, "tiny", v, repeat=rep)
            for w, x in v.items():
                values.setdefault(leg, {}).setdefault(w, []).append(x)
    return values


def test_both_ratio_tables_are_one_holm_family(tmp_path):
    make_ablation_shape(tmp_path / "r", 3, 0.05, seed=1, factor=1.5)
    rs = load_results([tmp_path / "r"])
    tables = all_tables(rs)
    thr, lat = tables[1], tables[2]
    ests = [e for t in (thr, lat) for row in t.data for e in row["ratios"].values()]
    assert len(ests) == 8 and {e["family"] for e in ests} == {8}
    # standalone, a ratio table gives the same verdicts: its family is still both tables
    assert ratio_table(rs, "latency").data == lat.data and ratio_table(rs, "throughput").data == thr.data


def test_footnote_names_method_correction_and_smallest_detectable_change(tmp_path):
    values = make_ablation_shape(tmp_path / "r", 3, 0.07, seed=2)
    thr = ratio_table(load_results([tmp_path / "r"]), "throughput")
    sd, _ = pooled_log_sd([values[leg][w] for leg in LEGS for w in ("mixed", "long-context")])
    mde = detectable_change(sd, 3, 8)
    note = thr.note
    assert "Welch's t-test on log values" in note and "Holm's correction over the 8 ratio cells" in note
    assert "at most 5% chance of any false arrow" in note and "at least 2%" in note
    assert f"With 3 repeats at ±{sd:.1%} between processes" in note
    assert f"changes under {mde:.2f}x cannot be detected reliably" in note, note
    assert "(99.4%)" in note  # nothing changed: every cell decided at Holm's first step, 1 - 0.05/8
    # the A/A cells print ≈, never an arrow
    assert all(" ≈ [" in cell for row in thr.rows for cell in row[-3:-1])


def test_a_a_through_the_cli_prints_no_arrow(tmp_path):
    """Fixed-seed A/A comparisons at 3 repeats, 10% spread, through `ablation compare --format json`;
    with the former bootstrap these seeds gave arrows in 5 of the 10 (seeds 1, 5, 6, 8, 9)."""
    for seed in range(10):
        make_ablation_shape(tmp_path / f"r{seed}", 3, 0.10, seed=seed)
        proc = run_cli("compare", "--format", "json", str(tmp_path / f"r{seed}"))
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        verdicts = [e["verdict"] for t in doc["tables"] for row in t["rows"] for e in (row.get("ratios") or {}).values()]
        assert len(verdicts) == 8 and not {"faster", "slower"} & set(verdicts), (seed, verdicts)


# fixed-batch-32 ms/tok of the real A/A run docs/measurements/2026-12-04-cpu-aa/results/aa-3x-c: one
# release under two leg names. The former bootstrap printed 0.5x ↓ [0.4, 1.0] for it.
AA_FIXED_BATCH = ([0.09600294873024495, 0.09550695947302401, 0.10442666992194205],
                  [0.25180773486344066, 0.10567316357423806, 0.19545241015617165])


def test_bisect_regressed_needs_the_verdict_slower_and_the_threshold():
    aa = compare_samples(*AA_FIXED_BATCH, higher_is_better=False)
    assert aa.verdict == "no difference detected" and aa.ratio < 0.6 and not regressed(aa, 0.05)
    noisy = compare_samples([100, 80, 120], [90, 70, 110], True)  # 10% worse, wide noise: ≈
    assert noisy.verdict == "no difference detected" and not regressed(noisy, 0.05)
    small = compare_samples([100.0, 100.2, 99.8], [97.0, 97.1, 96.9], True)  # 3% worse, tight: slower
    assert small.verdict == "slower" and not regressed(small, 0.05) and regressed(small, 0.02)
    big = compare_samples([100.0, 100.2, 99.8], [80.0, 80.1, 79.9], True)
    assert regressed(big, 0.05)
    assert compare_samples([100.0], [50.0], True).verdict == "no verdict"
    assert not regressed(compare_samples([100.0], [50.0], True), 0.05)  # a lead is never a regression


def test_bisect_summary_says_which_test_and_has_no_noise_band():
    est = compare_samples([100.0, 100.2, 99.8], [80.0, 80.1, 79.9], True)
    summary = {"scenario": "m/mixed", "metric": "throughput", "threshold": 0.05, "repeats": 3, "good": "1.0",
               "bad": "2.0", "derivations": {}, "first_bad": "2.0", "reason": "r",
               "tried": [{"release": "2.0", "leg": "x", "values": [80.0, 80.1, 79.9], "ratio_to_good": est.ratio,
                          "interval": [est.low, est.high], "verdict": est.verdict, "regressed": True},
                         {"release": "1.5", "leg": "y", "values": [90.0], "ratio_to_good": 0.9,
                          "interval": [None, None], "verdict": "no verdict", "regressed": False}]}
    text = render_summary(summary)
    assert "Welch's t-test on log values against the good leg" in text and "noise band" not in text
    assert "regressed = verdict 'slower' and the ratio beyond the threshold" in text
    assert "| 1.5 | 90 | 0.900x | none (unrepeated) | no verdict | no |" in text
