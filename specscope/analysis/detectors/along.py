"""Acceptance followed along a dimension an author's table states: its rows points along a
context length ('| Context | Acceptance |' with '~100 tok | 80-91%', '~34K | ~53%', '~86K |
40-55%'), each a partial record whose extra says where along it (parsers/
spec_decode_table.toml, ``dimension``). Acceptance that falls along it is
``acceptance_drift``: across the stated dimension, not across a run's time.

The values are as stated, without counts: a rate taken at the ends of its range that make
the claim hardest (the first point at its lowest, the last at its highest), so that a fall
read from them holds for any value in the ranges; mean acceptance lengths without k by
their accepted tokens a step (tau - 1), a share of the first point's. The fall must reach
the last point (no point past the first above the last one's level, but for rounding), and
the finding is at most suggestive: nothing was counted.
"""

from __future__ import annotations

from specscope.analysis.evidence import Evidence, confidence, finding_for, strength
from specscope.analysis.findings import Finding, Severity
from specscope.analysis.siblings import Side

_ASSUMED = "no draft counts: the values as the table states them, a range at its ends"
# Values printed to two or three places: a later point this far over the last is the same.
_ROUNDING = 0.01

Point = tuple[float, float, float]  # where along the dimension, lowest and highest value


def along(ev: Evidence) -> list[Finding]:
    by_table: dict[tuple[str, str], list[Side]] = {}
    for side in ev.sides or []:
        if side.along is not None and side.at is not None:
            by_table.setdefault((side.source, side.along), []).append(side)
    out = []
    for (_, dimension), sides in by_table.items():
        sides = sorted(sides, key=lambda s: s.at or 0.0)
        found = _fall(ev, dimension, sides)
        if found is not None:
            out.append(found)
    return out


def _fall(ev: Evidence, dimension: str, sides: list[Side]) -> Finding | None:
    cfg = ev.config["acceptance_drift"]
    rates = [_rate(ev, s) for s in sides]
    if len(sides) >= 2 and all(r is not None for r in rates):
        points = [r for r in rates if r is not None]
        unit, least = "rate", float(cfg["min_change"])
        fall = points[0][1] - points[-1][2]
    else:
        lengths = [_gain(ev, s) for s in sides]
        if len(sides) < 2 or any(g is None for g in lengths):
            return None
        points = [g for g in lengths if g is not None]
        if points[0][1] <= 0:
            return None
        unit, least = "length", float(cfg["along_min_share"])
        fall = (points[0][1] - points[-1][2]) / points[0][1]
    # The fall reaches the last point: none between went lower and came back.
    if any(p[2] < points[-1][1] - _ROUNDING for p in points[1:-1]) or fall < least:
        return None
    level = strength(ev, lambda z: True)
    if level is None:
        return None
    first, last = sides[0], sides[-1]
    said = "acceptance rate" if unit == "rate" else "accepted tokens a step (mean length - 1)"
    test = (
        f"{said} {_shown(points[0], unit)} at {_label(first)} falls to "
        f"{_shown(points[-1], unit)} at {_label(last)}: "
        + (f"{fall:.0%} points >= {least:.0%}" if unit == "rate" else f"-{fall:.0%} >= {least:.0%}")
    )
    sample = {"records": len(sides)}
    return finding_for(
        ev,
        "acceptance_drift",
        Severity.WARNING,
        last.run_id,
        ev.spec_of(last.run_id),
        explanation=f"Acceptance falls along the {dimension.lower()} the table states: "
        f"{said} {_shown(points[0], unit)} at {_label(first)}, {_shown(points[-1], unit)} at "
        f"{_label(last)}. The drafter loses the target with longer contexts (a draft head "
        "trained on shorter ones, a window or positional encoding it does not extend to).",
        next_step="check the drafter's trained context length and its positional encoding "
        "(rope scaling, a sliding window) against the contexts served; past where it holds, "
        "a smaller k or no speculation pays better",
        measured={"dimension": dimension, "first": points[0][1], "last": points[-1][2]},
        expected={("change below" if unit == "rate" else "share lost below"): least},
        sample=sample,
        confidence=confidence(ev, level, test, sample, [_ASSUMED]),
    )


def _rate(ev: Evidence, side: Side) -> Point | None:
    """The side's stated rate, at the ends of its range where it states one."""
    if side.spread is not None:
        return (side.at or 0.0, *side.spread)
    rate = side.agg.get("stated_rate")
    return (side.at or 0.0, float(rate), float(rate)) if isinstance(rate, int | float) else None


def _gain(ev: Evidence, side: Side) -> Point | None:
    tau = side.agg.get("mean_acceptance_length")
    if not isinstance(tau, int | float) or tau < 1:
        return None
    return (side.at or 0.0, float(tau) - 1, float(tau) - 1)


def _label(side: Side) -> str:
    return f"'{side.labels[0]}'" if side.labels else side.where


def _shown(point: Point, unit: str) -> str:
    low, high = point[1], point[2]
    if unit == "rate":
        return f"{low:.0%}" if low == high else f"{low:.0%}-{high:.0%}"
    return f"{low:.2f}" if low == high else f"{low:.2f}-{high:.2f}"


__all__ = ["along"]
