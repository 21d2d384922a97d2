"""Ratios between legs with an honest verdict.

With at least MIN_REPEATS process repeats on both legs, the ratio of medians gets
a 95% percentile-bootstrap confidence interval (2000 resamples, fixed seed, so a
report regenerates identically; the numbers scipy.stats.bootstrap gives); the verdict is
"faster"/"slower" only when the interval excludes 1.0, else "no difference detected".
With fewer repeats no between-process dispersion was measured, and on these machines
it is the dominant noise (a bisect measured ±17% between processes of one leg on the
2-core CI machine): the ratio is printed with "no verdict",
never judged against an assumed band. Printed precision follows the measured
uncertainty; unrepeated values get three significant digits.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

MIN_REPEATS = 3
CONFIDENCE = 0.95
RESAMPLES = 2000
UNREPEATED_ROUNDING = 0.05  # precision only (3 significant digits), never a verdict
SEED = 0


@dataclass(frozen=True)
class RatioEstimate:
    ratio: float  # oriented so that > 1 means the newer leg is better
    low: float | None
    high: float | None
    method: str  # "bootstrap" | "unrepeated"
    verdict: str  # "faster" | "slower" | "no difference detected" | "no verdict"
    n_old: int
    n_new: int

    def as_dict(self) -> dict:
        return self.__dict__.copy()


@lru_cache(maxsize=256)
def _resample_indices(n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """The resampling indices scipy.stats.bootstrap draws for two samples of these sizes with
    a fresh Generator(SEED): the first sample's (RESAMPLES, n_a) (the ratio's denominator),
    then the second's, in one batch. They
    depend on the sizes alone, so every cell of that shape shares them (a memo, not state)."""
    rng = np.random.default_rng(SEED)
    ia = rng.integers(0, n_a, (RESAMPLES, n_a))
    ib = rng.integers(0, n_b, (RESAMPLES, n_b))
    ia.setflags(write=False)
    ib.setflags(write=False)
    return ia, ib


CHUNK = 512  # cells per vectorised step (fallback path): bounds memory at CHUNK x RESAMPLES x n floats
MAX_TABLED_N = 6  # up to 6! = 720 orderings per sample size are tabled


@lru_cache(maxsize=32)
def _median_rank_tables(n_a: int, n_b: int, side: int) -> tuple[dict, np.ndarray, np.ndarray]:
    """For each ordering of a sample of size n (rank of every position), the ranks of the two
    middle order statistics of each resample. A resample's median depends only on the sample's
    ordering and the indices drawn, so one table serves every cell of that size."""
    idx = _resample_indices(n_a, n_b)[side]
    n = idx.shape[1]
    orderings = list(itertools.permutations(range(n)))
    lo = np.empty((len(orderings), idx.shape[0]), dtype=np.intp)
    hi = np.empty_like(lo)
    for row, ranks in enumerate(orderings):
        r = np.sort(np.asarray(ranks)[idx], axis=-1)
        lo[row], hi[row] = r[:, (n - 1) // 2], r[:, n // 2]
    return {o: i for i, o in enumerate(orderings)}, lo, hi


def _resampled_medians(sample: np.ndarray, n_a: int, n_b: int, side: int) -> np.ndarray:
    """median(sample[idx]) for every resample row, as np.median gives it."""
    order = np.argsort(sample, kind="stable")
    ranks = np.empty(sample.size, dtype=np.intp)
    ranks[order] = np.arange(sample.size)
    where, lo, hi = _median_rank_tables(n_a, n_b, side)
    row = where[tuple(ranks.tolist())]
    ordered = sample[order]
    if sample.size % 2:  # one middle order statistic: (x + x) / 2 == x exactly, at half the cost
        return ordered[lo[row]]
    return (ordered[lo[row]] + ordered[hi[row]]) / 2


def bootstrap_intervals(samples: list[tuple[list[float], list[float]]]) -> list[tuple[float, float]]:
    """95% percentile-bootstrap intervals of median(b)/median(a) for many (a, b) at once: the
    numbers scipy.stats.bootstrap(..., method="percentile", n_resamples=RESAMPLES,
    rng=default_rng(SEED)) gives per cell (tested to 1e-9), without one scipy call per cell
    (87% of the comparer's time on 10,000 results). Small samples (the usual 3-5 repeats) take
    their resampled medians from a per-size table of order statistics; larger ones sort."""
    alpha = (1 - CONFIDENCE) / 2
    out: list[tuple[float, float] | None] = [None] * len(samples)
    by_shape: dict[tuple[int, int], list[int]] = {}
    for i, (a, b) in enumerate(samples):
        by_shape.setdefault((len(a), len(b)), []).append(i)
    for (n_a, n_b), members in by_shape.items():
        ia, ib = _resample_indices(n_a, n_b)
        for start in range(0, len(members), CHUNK):
            chunk = members[start:start + CHUNK]
            a = np.asarray([samples[i][0] for i in chunk], dtype=float)  # (cells, n_a)
            b = np.asarray([samples[i][1] for i in chunk], dtype=float)
            if max(n_a, n_b) <= MAX_TABLED_N:
                med_a = np.stack([_resampled_medians(x, n_a, n_b, 0) for x in a])
                med_b = np.stack([_resampled_medians(x, n_a, n_b, 1) for x in b])
            else:
                med_a, med_b = np.median(a[:, ia], axis=-1), np.median(b[:, ib], axis=-1)
            q = np.quantile(med_b / med_a, [alpha, 1 - alpha], axis=-1)  # (2, cells)
            for j, i in enumerate(chunk):
                out[i] = (float(q[0, j]), float(q[1, j]))
    return out


def bootstrap_interval(a, b) -> tuple[float, float]:
    return bootstrap_intervals([(a, b)])[0]


def scipy_bootstrap_interval(a, b) -> tuple[float, float]:
    """The reference bootstrap_intervals is held to (the comparer's former implementation):
    one scipy.stats.bootstrap call per cell. For the equivalence test and bench/compare_10k.py."""
    from scipy.stats import bootstrap

    def median_ratio(first, second, axis=-1):
        return np.median(second, axis=axis) / np.median(first, axis=axis)

    res = bootstrap((np.asarray(a), np.asarray(b)), median_ratio, vectorized=True, paired=False,
                    confidence_level=CONFIDENCE, n_resamples=RESAMPLES, method="percentile",
                    random_state=np.random.default_rng(SEED))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def compare_samples(old: list[float], new: list[float], higher_is_better: bool) -> RatioEstimate:
    """Speedup of `new` over `old` (new/old for throughput, old/new for latency)."""
    return compare_many([(old, new)], higher_is_better)[0]


def compare_many(pairs: list[tuple[list[float], list[float]]], higher_is_better: bool) -> list[RatioEstimate]:
    """compare_samples for every (old, new), with the bootstraps batched."""
    oriented = [(old, new) if higher_is_better else (new, old) for old, new in pairs]  # latency: old/new
    ratios = [statistics.median(b) / statistics.median(a) for a, b in oriented]
    repeated = [len(a) >= MIN_REPEATS and len(b) >= MIN_REPEATS for a, b in oriented]
    # Without any spread the bootstrap is degenerate: the interval is the ratio itself.
    spread = [i for i, (a, b) in enumerate(oriented) if repeated[i] and (len(set(a)) > 1 or len(set(b)) > 1)]
    intervals = dict(zip(spread, bootstrap_intervals([oriented[i] for i in spread])))
    out = []
    for i, ((old, new), ratio) in enumerate(zip(pairs, ratios)):
        if repeated[i]:
            low, high = intervals.get(i, (ratio, ratio))
            verdict = "faster" if low > 1.0 else "slower" if high < 1.0 else "no difference detected"
            out.append(RatioEstimate(ratio, low, high, "bootstrap", verdict, len(old), len(new)))
        else:
            out.append(RatioEstimate(ratio, None, None, "unrepeated", "no verdict", len(old), len(new)))
    return out


def relative_uncertainty(values: list[float]) -> float:
    """Half the range over the median with repeats (with three values a MAD can be ~0 by
    chance: two close values hide a far third); without repeats, UNREPEATED_ROUNDING."""
    if len(values) >= MIN_REPEATS:
        return max(half_range_over_median(values), 1e-4)
    return UNREPEATED_ROUNDING


def half_range_over_median(values: list[float]) -> float:
    med = statistics.median(values)
    return (max(values) - min(values)) / 2 / med if med else 0.0


def within_process_spread(samples: list[list[float]]) -> float | None:
    """Median, over cells, of the half range / median of one process's timed passes: what
    in-process noise was measured (reported in footnotes; it is not between-process noise)."""
    spreads = [half_range_over_median(s) for s in samples if len(s) >= 2 and statistics.median(s)]
    return statistics.median(spreads) if spreads else None


def significant_digits(rel_uncertainty: float) -> int:
    """Digits worth printing: 5% -> 3, 0.5% -> 4; never fewer than 2, never more than 4
    (three repeats that happen to agree closely do not establish a fifth digit)."""
    return max(2, min(4, math.ceil(-math.log10(rel_uncertainty)) + 1))


def round_sig(value: float, digits: int) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def format_measure(value: float | None, rel_uncertainty: float) -> str:
    """Value rounded to the digits its uncertainty supports, thousands separated."""
    if value is None:
        return "—"
    digits = significant_digits(rel_uncertainty)
    v = round_sig(value, digits)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v)))) if v else 0
    return f"{v:,.{decimals}f}"
