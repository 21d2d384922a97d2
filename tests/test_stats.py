"""Verdicts come from statistics: the same ratio can be a real change or noise."""

from __future__ import annotations

import random

from ablation.analysis.stats import compare_samples, format_measure, significant_digits


def noisy(mean: float, cv: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mean, mean * cv) for _ in range(n)]


def test_small_but_real_change_is_detected_with_tight_repeats():
    old, new = noisy(1000, 0.003, 7, 1), noisy(1030, 0.003, 7, 2)
    est = compare_samples(old, new, higher_is_better=True)
    assert est.method == "bootstrap" and est.verdict == "faster" and est.low > 1.0
    # one process per leg measured no between-process noise: no verdict, whatever the ratio
    for n in (1, 2):
        single = compare_samples(old[:n], new[:n], higher_is_better=True)
        assert single.method == "unrepeated" and single.verdict == "no verdict" and single.low is None
    big = compare_samples([100.0], [150.0], higher_is_better=True)
    assert big.verdict == "no verdict" and abs(big.ratio - 1.5) < 1e-12  # a 50% lead is still only a lead


def test_same_ratio_with_wide_noise_is_no_difference_detected():
    old, new = noisy(1000, 0.08, 5, 3), noisy(1040, 0.08, 5, 4)
    est = compare_samples(old, new, higher_is_better=True)
    assert est.verdict == "no difference detected" and est.low < 1.0 < est.high


def test_latency_speedup_is_old_over_new_and_lower_is_better():
    est = compare_samples([5.3, 5.31, 5.29], [3.97, 3.98, 3.96], higher_is_better=False)
    assert abs(est.ratio - 5.3 / 3.97) < 1e-9 and est.verdict == "faster"
    est = compare_samples([3.9, 3.91, 3.92], [4.12, 4.13, 4.11], higher_is_better=False)
    assert est.verdict == "slower" and est.high < 1.0


def hand_bootstrap(old: list[float], new: list[float], resamples: int = 40000) -> tuple[float, float]:
    """An independent percentile bootstrap of median(new)/median(old): plain numpy, its own RNG."""
    import numpy as np

    rng = np.random.default_rng(12345)
    a, b = np.asarray(old), np.asarray(new)
    ra = np.median(rng.choice(a, size=(resamples, a.size)), axis=1)
    rb = np.median(rng.choice(b, size=(resamples, b.size)), axis=1)
    return tuple(np.percentile(rb / ra, [2.5, 97.5]))


def test_bootstrap_interval_matches_an_independent_computation():
    old, new = noisy(100, 0.05, 5, 5), noisy(104, 0.05, 5, 6)
    est = compare_samples(old, new, True)
    assert abs(est.ratio - sorted(new)[2] / sorted(old)[2]) < 1e-12  # median of 5 = the 3rd value
    low, high = hand_bootstrap(old, new)
    # medians of 5 take few distinct values, so both bootstraps land on nearly the same order statistics
    assert abs(est.low - low) < 0.01 and abs(est.high - high) < 0.01, (est, low, high)
    assert compare_samples(old, new, True) == est  # fixed seed: a report regenerates identically


def test_precision_follows_uncertainty():
    assert significant_digits(0.05) == 3 and significant_digits(0.005) == 4 and significant_digits(0.5) == 2
    assert format_measure(12779.0, 0.05) == "12,800"
    assert format_measure(12779.0, 0.0005) == "12,780"  # capped at 4 digits
    assert format_measure(9388.83, 0.0001) == "9,389"
    assert format_measure(0.2437, 0.05) == "0.244"
    assert format_measure(None, 0.05) == "—"


def test_wide_interval_prints_fewer_decimals():
    from ablation.analysis.tables import format_ratio

    wide = compare_samples([100, 300, 110, 105], [200, 210, 190, 205], higher_is_better=True)
    assert wide.high - wide.low > 0.2
    assert format_ratio(wide).startswith("1.9x ≈ [0.")
    tight = compare_samples([100, 101, 99], [110, 111, 109], higher_is_better=True)
    assert format_ratio(tight).startswith("1.10x ↑ [1.0")


def test_fast_interval_equals_scipy_bootstrap_to_1e9():
    from ablation.analysis.stats import bootstrap_interval, bootstrap_intervals, scipy_bootstrap_interval

    fixtures = [(noisy(100, 0.05, n_a, n_a), noisy(104, 0.08, n_b, 10 + n_b)) for n_a, n_b in
                ((3, 3), (3, 5), (5, 3), (4, 7), (9, 9), (12, 3))]
    fixtures += [([100, 100, 101], [90, 90, 90.5]), ([1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 8.0])]  # ties, even n
    fixtures += [(noisy(50, 0.1, 3, 100 + i), noisy(55, 0.1, 3, 200 + i)) for i in range(5)]  # one shape, batched
    batched = bootstrap_intervals(fixtures)
    for (a, b), got in zip(fixtures, batched):
        want = scipy_bootstrap_interval(a, b)
        assert abs(got[0] - want[0]) < 1e-9 and abs(got[1] - want[1]) < 1e-9, (a, b, got, want)
        assert bootstrap_interval(a, b) == got
