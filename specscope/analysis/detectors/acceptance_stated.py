"""Acceptance against the reference its author states for the same setup ('34% vs the
reported 74%', 'a mean length of 1.9 while the model card says 3.2'): `extra`'s "reference"
(parsers/stated_acceptance.toml), joined to the run as ``reference_rate`` or
``reference_length`` (``specscope.analysis.stated_rates``)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from specscope.analysis.evidence import BoundTest, Evidence, Trials, strength


def _gain_upper(trials: Trials, z: float) -> float:
    return min(trials.upper(z) * trials.k, trials.k)


def against_stated(
    ev: Evidence, agg: Mapping[str, Any], trials: Trials
) -> tuple[BoundTest, str, float, str, list[str]] | tuple[()] | None:
    """The claim against the reference the author states for the same setup ('34% vs the
    reported 74%', 'a mean length of 1.9 while the model card says 3.2'), where the run has
    no counts: the rate, or the accepted tokens per draft (tau - 1), under
    ``fraction_of_reference`` of the reference's. The author chose the reference for this
    model, method and workload, so it stands for the method's entry; a measure the author
    gives no reference for is judged as before. Where the value itself reaches that share of
    the reference, ``()``: the author's reference for this setup outweighs a general floor
    ('15% acceptance, the paper reports 20%' is no low for that drafter)."""
    if agg.get("draft_tokens"):
        return None  # (counts: judged on them against the table's reference)
    fraction = ev.config["low_acceptance"]["fraction_of_reference"]
    rate, length = agg.get("reference_rate"), agg.get("reference_length")
    if rate is not None and agg.get("mean_acceptance_length") is None:
        ref = float(rate)
        test = BoundTest("upper bound of the acceptance rate", trials.upper, fraction * ref)
        measured = f"about {trials.rate:.0%} of the drafted tokens are accepted"
        told = f"{ref:.0%}"
    elif length is not None and float(length) > 1:
        ref = float(length) - 1
        test = BoundTest(
            "upper bound of tau - 1", partial(_gain_upper, trials), fraction * ref, percent=False
        )
        measured = f"the mean acceptance length is about {1 + trials.rate * trials.k:.2f}"
        told = f"a mean acceptance length of {float(length):g}"
    else:
        return None
    if test.bound(0.0) >= test.threshold:
        return ()
    level = strength(ev, test.holds)
    if level is None:
        return None
    said = (
        f"As the author states it, {measured}, against their own reference of {told} for the "
        f"same setup: under {fraction:.0%} of it."
    )
    return (
        test,
        level,
        ref,
        said,
        [*trials.assumptions, f"against the author's stated reference of {told}"],
    )


__all__ = ["against_stated"]
