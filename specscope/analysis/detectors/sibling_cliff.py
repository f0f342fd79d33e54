"""A cliff seen against a sibling: two sides of one paste with per-position curves of the
same k (a table's rows by backend, a flag on and off) that agree up to a position and part
there, the one side's chain breaking where the other's goes on ('token 1 | token 2' of
0.894 / 0.223 against 0.999 / 0.710). A curve alone may not show it: past a broken
position every later one is broken too, so the run's own conditionals give no healthy
typical one to set the break against, while its sibling measures what the same setup keeps.

The claim: the low side's conditional a_i/a_(i-1) is under ``cliff_conditional`` of its
sibling's, each step before i (a_1, then a_j/a_(j-1)) keeping at least ``cliff_kept`` of
the sibling's: a side weaker from the first position on (a drafter fed the wrong hidden
states, halved at every position) is a lower curve, not a break. With
per-position counts on both sides the conditionals are bounded (Wilson, on the drafts that
reached position i-1); rates printed or stated without counts are taken as they are, and
the finding is at most suggestive. Where it holds, the cliff is the finding of the pair: the
side's lower acceptance is that break, not another one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specscope.analysis.evidence import Evidence, confidence, finding_for, strength
from specscope.analysis.findings import Finding, Severity
from specscope.analysis.siblings import Side
from specscope.stats import wilson

_AS_PRINTED = "no per-position counts on both sides: the rates as printed or stated"

Bound = tuple[float, float]


def cliff_against(
    ev: Evidence, low: Side, high: Side, low_agg: Mapping[str, Any], high_agg: Mapping[str, Any]
) -> Finding | None:
    """The position where ``low``'s chain breaks while ``high``'s goes on, as a finding."""
    cfg = ev.config["siblings"]
    a, b = _curve(low, low_agg), _curve(high, high_agg)
    if a is None or b is None or len(a[0]) != len(b[0]) or len(a[0]) < 2:
        return None
    (ra, ca), (rb, cb) = a, b
    counted = ca is not None and cb is not None
    if min(ra[:-1]) <= 0 or min(rb) <= 0:
        return None
    for i in range(1, len(ra)):
        # Each step before i as good as the sibling's (the first step: position 1 itself).
        if any(_step(ra, j) < cfg["cliff_kept"] * _step(rb, j) for j in range(i)):
            return None  # apart before this position: a weaker chain, not a break

        def holds(z: float, i: int = i) -> bool:
            return (
                _conditional(ra, ca, i, z)[1]
                < cfg["cliff_conditional"] * (_conditional(rb, cb, i, z)[0])
            )

        level = strength(ev, holds)
        if level is None:
            continue
        return _finding(ev, low, high, i, ra, rb, level, counted)
    return None


def _curve(side: Side, agg: Mapping[str, Any]) -> tuple[list[float], list[int] | None] | None:
    """A side's per-position rates, and its per-position counts with the drafts first
    (``[drafts, accepted at 1, accepted at 2, ...]``) where counted."""
    rates = [x for x in (agg.get("per_position") or []) if x is not None]
    counts = agg.get("accepted_per_pos") or []
    drafts = agg.get("drafts")
    if len(rates) >= 2 and drafts and len(counts) >= len(rates) and None not in counts:
        return [float(x) for x in rates], [int(drafts), *(int(c) for c in counts[: len(rates)])]
    printed = side.printed or (rates if len(rates) >= 2 else None)
    return ([float(x) for x in printed], None) if printed else None


def _step(rates: list[float], j: int) -> float:
    return rates[j] / rates[j - 1] if j else rates[0]


def _conditional(rates: list[float], counts: list[int] | None, i: int, z: float) -> Bound:
    """a_i/a_(i-1): bounded on the drafts that reached position i-1 where counted."""
    if counts is None:
        value = rates[i] / rates[i - 1]
        return (value, value)
    return wilson(counts[i + 1], counts[i], z)


def _finding(
    ev: Evidence,
    low: Side,
    high: Side,
    i: int,
    ra: list[float],
    rb: list[float],
    level: str,
    counted: bool,
) -> Finding:
    share = float(ev.config["siblings"]["cliff_conditional"])
    sample = (
        {
            "drafts": int(low.agg.get("drafts") or 0),
            "sibling drafts": int(high.agg.get("drafts") or 0),
        }
        if counted
        else {
            "records": int(low.agg.get("records") or 0),
            "sibling records": int(high.agg.get("records") or 0),
        }
    )
    own, its = ra[i] / ra[i - 1], rb[i] / rb[i - 1]
    test = (
        f"{'upper bound of ' if counted else ''}a{i + 1}/a{i} {own:.0%} {low.name} < "
        f"{share:.0%} of {'the lower bound of ' if counted else ''}{its:.0%} {high.name}"
    )
    return finding_for(
        ev,
        "position_cliff",
        Severity.WARNING,
        low.run_id,
        ev.spec_of(low.run_id),
        explanation=f"Against its sibling {high.name}, {low.name} keeps up to position {i} "
        f"({ra[i - 1]:.0%} against {rb[i - 1]:.0%}) and then breaks: position {i + 1} is "
        f"accepted {ra[i]:.0%} of the time against {rb[i]:.0%}, {own:.0%} of the drafts that "
        f"reached it against {its:.0%}. The chain breaks from position {i + 1} on this side "
        "only: what differs between them breaks the drafter's later steps.",
        next_step=f"find what differs between {low.name} and {high.name} (an attention "
        "backend, a kernel, the KV cache of the draft steps) that the drafter's steps after "
        f"the first depend on, or use k={i} until it is fixed",
        measured={"position": i + 1, "a_position": ra[i], "conditional": own},
        expected={"conditional about": its, "sibling": high.name},
        sample=sample,
        confidence=confidence(ev, level, test, sample, [] if counted else [_AS_PRINTED]),
    )


__all__ = ["cliff_against"]
