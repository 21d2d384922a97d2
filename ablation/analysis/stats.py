"""Ratios between legs with an honest verdict.

The method (docs/statistics.md has the reasoning and the measured calibration):

- With at least MIN_REPEATS process repeats on both legs, each leg's values are taken in
  logs and compared with Welch's t-test (unequal variances). The printed ratio is the ratio
  of geometric means (exp of the mean log difference), and its interval is the Welch t
  interval of the mean log difference, exponentiated: the interval and the test are one
  computation, so an interval excludes 1.00 exactly when the test rejects.
- Every ratio cell that one comparison prints for a group (its throughput and latency
  tables together) is one family: Holm's step-down procedure keeps the chance of any false
  arrow in it at ALPHA. Each cell's interval is printed at the level of the Holm step that
  decided it (1 - ALPHA/k), so interval and verdict still agree.
- A rejected cell whose ratio is within MIN_EFFECT of 1 is "negligible", not a change.
- Each leg's dispersion is floored at SD_FLOOR (0.1% in logs), so identical repeats never
  claim infinite confidence.

With fewer repeats no between-process dispersion was measured, and on these machines it is
the dominant noise (±17% between processes of one leg was measured on the 2-core CI
machine): the ratio (of medians, here the values themselves) is printed with "no verdict".
Printed precision follows the measured uncertainty; unrepeated values get three significant
digits.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize
from scipy import stats as sps

MIN_REPEATS = 3
ALPHA = 0.05  # family-wise error rate of one comparison's verdicts (Holm)
MIN_EFFECT = 0.02  # a change smaller than 2% is "negligible" even when the test rejects
SD_FLOOR = 0.001  # floor of each leg's log-scale SD (0.1%): identical repeats never give infinite confidence
POWER = 0.80  # for the smallest detectable change printed in footnotes
METHOD = "welch-log"
METHOD_TEXT = "Welch's t-test on log values"
CORRECTION_TEXT = "Holm"
SEED = 0  # of the variance draws behind detectable_change: a footnote regenerates identically
UNREPEATED_ROUNDING = 0.05  # precision only (3 significant digits), never a verdict

CHANGED = ("faster", "slower")


@dataclass(frozen=True)
class RatioEstimate:
    ratio: float  # oriented so that > 1 means the newer leg is better; geometric means when repeated
    low: float | None
    high: float | None
    method: str  # METHOD | "unrepeated" | "invalid values" (a value <= 0 or NaN: no ratio)
    verdict: str  # "faster" | "slower" | "negligible" | "no difference detected" | "no verdict"
    n_old: int
    n_new: int
    p: float | None = None  # Welch's two-sided p of this cell alone
    p_holm: float | None = None  # Holm-adjusted over the family
    level: float | None = None  # confidence level of [low, high]
    family: int | None = None  # cells in the Holm family
    median_ratio: float | None = None  # ratio of medians (what the per-leg columns show)

    def as_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass(frozen=True)
class LogWelch:
    """Welch's t on log values of one cell, oriented (b over a)."""

    diff: float  # mean log(b) - mean log(a)
    se: float
    df: float
    p: float


def _log_moments(values: list[float]) -> tuple[float, float, int]:
    logs = [math.log(v) for v in values]
    n = len(logs)
    mean = math.fsum(logs) / n
    var = math.fsum((x - mean) ** 2 for x in logs) / (n - 1)
    return mean, max(var, SD_FLOOR ** 2), n


def log_welch(a: list[float], b: list[float]) -> LogWelch:
    """Welch's t-test of log(b) against log(a): scipy.stats.ttest_ind(log b, log a,
    equal_var=False), with each leg's variance floored at SD_FLOOR**2."""
    ma, va, na = _log_moments(a)
    mb, vb, nb = _log_moments(b)
    qa, qb = va / na, vb / nb
    se = math.sqrt(qa + qb)
    df = (qa + qb) ** 2 / (qa ** 2 / (na - 1) + qb ** 2 / (nb - 1))
    diff = mb - ma
    return LogWelch(diff, se, df, float(2 * sps.t.sf(abs(diff) / se, df)))


def holm(p: list[float], alpha: float = ALPHA) -> tuple[list[float], list[int]]:
    """Holm's step-down procedure: the adjusted p-values, and per cell the divisor k of the
    step that decided it (a rejected cell: its own step's; a retained one: the first
    retained step's), so that the (1 - alpha/k) interval excludes the null exactly when
    the cell is rejected."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted, divisor = [1.0] * m, [m] * m
    running, stopped = 0.0, None
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
        if stopped is None and running >= alpha:
            stopped = m - rank
        divisor[i] = stopped if stopped is not None else m - rank
    return adjusted, divisor


def compare_samples(old: list[float], new: list[float], higher_is_better: bool) -> RatioEstimate:
    """Speedup of `new` over `old` (new/old for throughput, old/new for latency), as a family
    of one cell (bisect's single comparison): Welch's t on logs at ALPHA."""
    return compare_family([(old, new, higher_is_better)])[0]


def compare_many(pairs: list[tuple[list[float], list[float]]], higher_is_better: bool) -> list[RatioEstimate]:
    """compare_samples for every (old, new), all in one Holm family."""
    return compare_family([(old, new, higher_is_better) for old, new in pairs])


def compare_family(cells: list[tuple[list[float], list[float], bool]]) -> list[RatioEstimate]:
    """Every (old, new, higher_is_better) cell of one printed comparison, judged together:
    Welch's t on logs per cell, Holm across the cells with enough repeats, MIN_EFFECT."""
    oriented = [(old, new) if hib else (new, old) for old, new, hib in cells]  # latency: old/new
    valid = [all(math.isfinite(v) and v > 0 for v in (*a, *b)) for a, b in oriented]
    medians = [statistics.median(b) / statistics.median(a) if ok else math.nan for (a, b), ok in zip(oriented, valid)]
    judged = [i for i, (a, b) in enumerate(oriented)
              if valid[i] and len(a) >= MIN_REPEATS and len(b) >= MIN_REPEATS]
    tests = {i: log_welch(*oriented[i]) for i in judged}
    adjusted, divisor = holm([tests[i].p for i in judged])
    k_of = dict(zip(judged, divisor))
    p_holm = dict(zip(judged, adjusted))
    # one vectorised quantile call for every interval of the family
    crit = dict(zip(judged, sps.t.ppf(1 - ALPHA / 2 / np.asarray([k_of[i] for i in judged], dtype=float),
                                      [tests[i].df for i in judged]))) if judged else {}
    out = []
    for i, ((old, new, _), med) in enumerate(zip(cells, medians)):
        if i not in tests:  # too few repeats, or a value no ratio can be taken of (0, negative, NaN)
            out.append(RatioEstimate(med, None, None, "unrepeated" if valid[i] else "invalid values", "no verdict",
                                     len(old), len(new), median_ratio=med))
            continue
        t = tests[i]
        ratio = math.exp(t.diff)
        low, high = math.exp(t.diff - crit[i] * t.se), math.exp(t.diff + crit[i] * t.se)
        rejected = p_holm[i] < ALPHA
        if not rejected:
            verdict = "no difference detected"
        elif abs(t.diff) < math.log1p(MIN_EFFECT):
            verdict = "negligible"
        else:
            verdict = "faster" if t.diff > 0 else "slower"
        out.append(RatioEstimate(ratio, low, high, METHOD, verdict, len(old), len(new), p=t.p, p_holm=p_holm[i],
                                 level=1 - ALPHA / k_of[i], family=len(judged), median_ratio=med))
    return out


def pooled_log_sd(samples: list[list[float]]) -> tuple[float, int] | None:
    """The between-process dispersion measured in these samples (one per leg and cell, each
    with at least MIN_REPEATS values): SD of log values pooled over samples, and its degrees
    of freedom. None without any such sample."""
    ss, df = 0.0, 0
    for s in samples:
        if len(s) >= MIN_REPEATS:
            logs = [math.log(v) for v in s]
            mean = math.fsum(logs) / len(logs)
            ss += math.fsum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    return (max(math.sqrt(ss / df), SD_FLOOR), df) if df else None


def detectable_change(sd: float, n: int, family: int, power: float = POWER) -> float:
    """The smallest ratio (> 1) that Welch's t on logs detects with `power` when it is the only
    change among `family` cells (Holm's strictest step, ALPHA/family), for two legs of `n`
    repeats each with log-scale SD `sd`. Never below 1 + MIN_EFFECT."""
    return max(math.exp(sd * _detectable_in_sds(n, family, power)), 1 + MIN_EFFECT)


@lru_cache(maxsize=64)
def _detectable_in_sds(n: int, family: int, power: float) -> float:
    """The detectable log difference in units of the SD, for Welch's test as the tables run it:
    its estimated SE and Welch degrees of freedom vary with the two sample variances (at n = 3
    the df fall between 2 and 4, and the critical value with them), so the power is averaged over
    8,000 draws of the variances (chi-square, fixed seed); the mean difference is normal and
    independent of them, so each draw's power is exact. Solved for `power` by root finding."""
    rng = np.random.default_rng(SEED)
    var = rng.chisquare(n - 1, (2, 8000)) / (n - 1)  # sample variances / sigma^2, both legs
    q = var / n
    se_hat = np.sqrt(q.sum(axis=0))
    df = q.sum(axis=0) ** 2 / ((q ** 2).sum(axis=0) / (n - 1))
    crit_se = sps.t.ppf(1 - ALPHA / 2 / family, df) * se_hat
    sd_diff = math.sqrt(2 / n)

    def shortfall(delta: float) -> float:
        return float(np.mean(sps.norm.cdf((delta - crit_se) / sd_diff) + sps.norm.cdf((-delta - crit_se) / sd_diff))
                     - power)

    hi = 1.0
    while shortfall(hi) < 0:
        hi *= 2
    return optimize.brentq(shortfall, 0.0, hi, xtol=1e-10)


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
