"""A cliff an author states in words, with no per-position counts or curve in the paste
('per-position acceptance collapses after position 0', 第三个token的接受率基本为0,
parsers/stated_claims_acceptance.toml's ``cliff``): a position_cliff on the author's word,
suggestive and no more, with the words as its sample. A run with counts or a curve of its
own is ``positions.cliff``'s, judged on those."""

from __future__ import annotations

from typing import Any

from specscope.analysis.detectors.said import claim_said, has_curve, on_words, where_said
from specscope.analysis.evidence import Evidence, finding_for, nothing_accepted
from specscope.analysis.findings import Finding, Severity

# What the finding rests on, said as its assumption (it makes the level suggestive).
WORDS = "the author's word, not counts: no per-position count or curve of the run is stated"


def cliff_in_words(ev: Evidence, judged: set[str]) -> list[Finding]:
    """A position_cliff for each run whose author says acceptance breaks past a position
    (``stated_cliff``) and that has no per-position rates to judge; ``judged``: the runs
    the counted detector already spoke of."""
    out: list[Finding] = []
    for run_id, agg in ev.per_run.items():
        said = claim_said(agg.get("stated_cliff"), "cliff")
        if run_id in judged or said is None or has_curve(agg) or nothing_accepted(ev, run_id, agg):
            continue  # (nothing accepted anywhere: zero_acceptance speaks for it)
        words = str(said.get("stated") or "")
        rate, first = said.get("rate_at_position"), said.get("first_position_rate")
        rows, where = where_said(ev, run_id)
        sample, confidence = on_words(
            words, "the author's word, without per-position counts", WORDS
        )
        at = _stated(first, rate)
        out.append(
            finding_for(
                ev,
                "position_cliff",
                Severity.WARNING,
                run_id,
                rows,
                explanation="The author says acceptance breaks past a draft position "
                f"({where}\u201c{words}\u201d){at}, with no per-position counts in the paste "
                "to tell where, or whether the later positions are broken rather than weaker.",
                next_step="paste the per-position acceptance the author read this from "
                "(vLLM's 'Per-position acceptance rate', its Prometheus per-position counters): "
                "counts tell which position breaks; meanwhile check the drafter's multi-step "
                "support (MTP heads forwarded several times, a k above what the head was "
                "trained for), or draft fewer tokens",
                measured={
                    "stated": "cliff",
                    **({"a_first": first} if first is not None else {}),
                    **({"a_position": rate} if rate is not None else {}),
                },
                expected={"conditional about": ev.config["position_cliff"]["typical_conditional"]},
                sample=sample,
                confidence=confidence,
            )
        )
    return out


def _stated(first: Any, rate: Any) -> str:
    """The shares the author states by position, as the explanation says them."""
    parts = [
        f"{what} stated at {value:.0%}"
        for what, value in (("the first position", first), ("a later position", rate))
        if isinstance(value, (int, float))
    ]
    return f" ({', '.join(parts)})" if parts else ""


__all__ = ["cliff_in_words"]
