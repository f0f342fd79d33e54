"""The cost model's word on a run, as the reports print it (Markdown bolds its head):
the best k, that no k pays, or (the best k's interval at most 1) that speculation should
be off at the load the run saw, with the cost it assumed."""

from __future__ import annotations

from typing import Any


def advice_said(advice: dict[str, Any]) -> tuple[str, str, str]:
    """(what comes before the head, the head, what follows it) of one run's advice."""
    cost = f"c={advice['cost_ratio']}, {advice['cost_source']}"
    if advice.get("pays", True):
        return "Best k by the cost model: ", str(advice["best_k"]), f" ({cost})."
    if advice.get("off"):
        lo, hi = advice.get("speedup_interval") or (0.0, 0.0)
        return (
            "",
            "Speculation should be off at the load this run saw",
            f": even the best k ({advice['best_k']}) is at most {hi:.3f}x "
            f"({advice.get('coverage', '')} interval {lo:.3f}-{hi:.3f}; {cost}).",
        )
    return (
        f"By the cost model no k is faster than speculation off ({cost}): ",
        "it does not pay",
        ".",
    )


__all__ = ["advice_said"]
