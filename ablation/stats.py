"""Ratios between legs with an honest verdict.

With at least MIN_REPEATS measurements on both legs, the ratio of medians gets
a 95% percentile-bootstrap confidence interval (scipy.stats.bootstrap, 2000
resamples, fixed seed, so a report regenerates identically); the verdict is
"faster"/"slower" only when the interval excludes 1.0. With fewer repeats
there is no dispersion to speak of: the verdict uses a documented noise band
(default +/-5%, the band the seed reports asked readers to apply by eye) and
says so. Printed precision follows the uncertainty: a 5% band does not get
four significant digits.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np
from scipy.stats import bootstrap

MIN_REPEATS = 3
CONFIDENCE = 0.95
RESAMPLES = 2000
NOISE_BAND = 0.05
SEED = 0


@dataclass(frozen=True)
class RatioEstimate:
    ratio: float  # oriented so that > 1 means the newer leg is better
    low: float | None
    high: float | None
    method: str  # "bootstrap" | "noise-band"
    verdict: str  # "faster" | "slower" | "no difference detected"
    n_old: int
    n_new: int

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def _median_ratio(old, new, axis=-1):
    return np.median(new, axis=axis) / np.median(old, axis=axis)


def compare_samples(old: list[float], new: list[float], higher_is_better: bool,
                    noise_band: float = NOISE_BAND) -> RatioEstimate:
    """Speedup of `new` over `old` (new/old for throughput, old/new for latency)."""
    if higher_is_better:
        a, b = old, new
    else:  # a speedup in latency is old/new: swap and invert the samples' roles
        a, b = new, old
    ratio = statistics.median(b) / statistics.median(a)
    if len(a) >= MIN_REPEATS and len(b) >= MIN_REPEATS:
        if len(set(a)) == 1 and len(set(b)) == 1:
            low = high = ratio  # no spread at all: the bootstrap is degenerate
        else:
            res = bootstrap((np.asarray(a), np.asarray(b)), _median_ratio, vectorized=True, paired=False,
                            confidence_level=CONFIDENCE, n_resamples=RESAMPLES, method="percentile",
                            random_state=np.random.default_rng(SEED))
            low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        verdict = "faster" if low > 1.0 else "slower" if high < 1.0 else "no difference detected"
        return RatioEstimate(ratio, low, high, "bootstrap", verdict, len(old), len(new))
    if ratio > 1 + noise_band:
        verdict = "faster"
    elif ratio < 1 / (1 + noise_band):
        verdict = "slower"
    else:
        verdict = "no difference detected"
    return RatioEstimate(ratio, None, None, "noise-band", verdict, len(old), len(new))


def relative_uncertainty(values: list[float], noise_band: float = NOISE_BAND) -> float:
    """Half the range over the median with repeats (with three values a MAD can be ~0 by
    chance: two close values hide a far third); the noise band without repeats."""
    if len(values) >= MIN_REPEATS:
        med = statistics.median(values)
        half_range = (max(values) - min(values)) / 2
        return max(half_range / med if med else 0.0, 1e-4)
    return noise_band


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
