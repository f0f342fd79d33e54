"""The statistics every verdict rests on: Wilson and Newcombe intervals with drafts as
trials (a draft's tokens are not independent), and the split that finds a change of level."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def wilson(successes: float, n: float, z: float) -> tuple[float, float]:
    """The Wilson score interval of a proportion (drafts as trials: tokens within a draft
    are not independent, so drafts, not tokens, are the sample size)."""
    if n <= 0:
        return (0.0, 1.0)
    p = min(1.0, max(0.0, successes / n))
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe(a: Mapping[str, float], b: Mapping[str, float], z: float) -> tuple[float, float]:
    """Newcombe's interval for rate_b - rate_a from two Wilson intervals (drafts as trials)."""
    ka, kb = a["draft_tokens"] / a["drafts"], b["draft_tokens"] / b["drafts"]
    pa, pb = a["accepted_tokens"] / a["draft_tokens"], b["accepted_tokens"] / b["draft_tokens"]
    la, ua = wilson(a["accepted_tokens"] / ka, a["drafts"], z)
    lb, ub = wilson(b["accepted_tokens"] / kb, b["drafts"], z)
    d = pb - pa
    return (
        d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2),
        d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2),
    )


def wilson_arrays(successes: np.ndarray, n: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """``wilson`` over arrays, the same arithmetic in the same order (``n`` > 0)."""
    p = np.minimum(1.0, np.maximum(0.0, successes / n))
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (np.maximum(0.0, centre - half), np.minimum(1.0, centre + half))


def rate_interval(accepted: float, drafts: float, k: float, z: float) -> tuple[float, float]:
    """Wilson bounds of the acceptance rate, with drafts as trials (a draft's k tokens are
    not independent): the per-draft mean acceptance over k, bounded like a proportion."""
    if drafts <= 0 or k <= 0:
        return (0.0, 1.0)
    return wilson(accepted / k, drafts, z)


SPLIT_POINTS = 100_000


def drift_split(
    drafts: Sequence[float] | np.ndarray,
    tokens: Sequence[float] | np.ndarray,
    accepted: Sequence[float] | np.ndarray,
    need: int,
    min_change: float,
    z: float,
) -> tuple[float, float, int] | None:
    """Where a run's acceptance changes level most, from cumulative counts: ``(rate before,
    rate after, index of the first interval after)`` for the split with the largest change
    whose two Wilson intervals do not overlap (each side with at least ``need`` drafts)."""
    d, t, a = (np.asarray(x, dtype=np.float64) for x in (drafts, tokens, accepted))
    # A split after each of the first n-1 intervals; a long run is tried at most
    # SPLIT_POINTS evenly spaced ones (a change of level does not hinge on one interval).
    after = np.arange(len(d) - 1)
    if len(after) > SPLIT_POINTS:
        spaced = np.linspace(0, len(d) - 2, SPLIT_POINTS).round().astype(np.int64)
        after = spaced[np.r_[True, spaced[1:] != spaced[:-1]]]  # in order: drop repeats
    d1, t1, a1 = d[after], t[after], a[after]
    d2, t2, a2 = d[-1] - d1, t[-1] - t1, a[-1] - a1
    ok = (d1 >= need) & (d2 >= need) & (t1 > 0) & (t2 > 0)
    if not ok.any():
        return None
    d1, t1, a1, d2, t2, a2 = (x[ok] for x in (d1, t1, a1, d2, t2, a2))
    at = after[ok] + 1
    r1, r2 = a1 / t1, a2 / t2
    # drafts as trials, like rate_interval: successes = accepted / k, k = tokens / drafts
    lo1, hi1 = wilson_arrays(a1 / (t1 / d1), d1, z)
    lo2, hi2 = wilson_arrays(a2 / (t2 / d2), d2, z)
    change = np.abs(r2 - r1)
    good = (change >= min_change) & ((hi1 < lo2) | (hi2 < lo1))
    if not good.any():
        return None
    j = int(np.argmax(np.where(good, change, -1.0)))  # the first of equal changes
    return (float(r1[j]), float(r2[j]), int(at[j]))


def coverage(z: float) -> str:
    """A z as the two-sided coverage of its interval, as people say it: 1.96 -> "95%"."""
    share = math.erf(z / math.sqrt(2)) * 100
    return f"{share:.1f}%".replace(".0%", "%") if share < 99.95 else f"{share:.2f}%"


def one_sided(z: float) -> str:
    """A z as the level of a one-sided bound: 1.645 -> "95% one-sided"."""
    share = (1 + math.erf(z / math.sqrt(2))) / 2 * 100
    text = f"{share:.1f}%".replace(".0%", "%") if share < 99.95 else f"{share:.2f}%"
    return f"{text} one-sided"


def drafts_to_tell(rate: float, width: float, z: float) -> int:
    """About how many drafts make the interval of a rate near ``rate`` ``width`` wide (so
    that it tells apart two rates ``width`` apart): n = z² p(1-p) / (width/2)²."""
    p = min(max(rate, 0.05), 0.95)  # near 0 or 1 the normal form says too little
    return math.ceil(z * z * p * (1 - p) / (width / 2) ** 2)
