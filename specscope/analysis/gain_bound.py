"""How many tokens a draft accepts, bounded: the spread of a draft's accepted length,
which per-position counts give exactly, and the upper bound of its mean (tau - 1) that
a claim of low acceptance rests on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from specscope.stats import wilson


class Trials(Protocol):
    """What the bound reads of ``evidence.Trials`` (which sets ``spread`` with
    ``spread_of``: this module imports nothing of the evidence)."""

    @property
    def drafts(self) -> float: ...
    @property
    def k(self) -> float: ...
    @property
    def rate(self) -> float: ...
    @property
    def spread(self) -> float | None: ...
    def upper(self, z: float) -> float: ...


def spread_of(agg: Mapping[str, Any]) -> float | None:
    """The variance of a draft's accepted tokens L, from per-position counts of all the
    run's drafts: a_i = P(L >= i) and L² = Σ_{i<=L} (2i - 1), so E[L²] = Σ (2i - 1) a_i.
    None where the counts are not of every draft or do not add up to the accepted tokens."""
    counts, drafts = agg.get("accepted_per_pos") or [], agg.get("drafts")
    reached = agg.get("drafted_per_pos") or []
    if not counts or not drafts or any(c is None for c in counts):
        return None
    if any(r is not None and r < drafts for r in reached[:1]):
        return None
    if sum(counts) != agg.get("accepted_tokens"):
        return None
    shares = [c / drafts for c in counts]
    return max(0.0, sum((2 * i + 1) * a for i, a in enumerate(shares)) - sum(shares) ** 2)


# Fewer drafts than this: their measured spread is itself too uncertain to lean on.
_SPREAD_DRAFTS = 30


def gain_upper(trials: Trials, z: float) -> float:
    """The upper bound of the accepted tokens a draft (tau - 1). Without their spread, a
    draft's accepted share is bounded as a proportion, the widest any spread allows (every
    draft accepting none or all k). Where per-position counts give the spread
    (``Trials.spread``), the bound is the mean's with it: Wilson's on as many drafts as
    carry the proportion's variance in the one measured (world case 5: DFlash at k = 15,
    65 drafts at tau 2.37 gain under 1.71 at 95%, not the widest 2.51), never on more than the
    drafted tokens."""
    n, k, p = trials.drafts, trials.k, trials.rate
    widest = min(trials.upper(z) * k, k)
    if trials.spread is None or n < _SPREAD_DRAFTS or not 0 < p < 1:
        return widest
    carried = n * k if trials.spread <= 0 else min(n * k, n * p * (1 - p) * k * k / trials.spread)
    return min(wilson(p * carried, carried, z)[1] * k, widest)


__all__ = ["gain_upper", "spread_of"]
