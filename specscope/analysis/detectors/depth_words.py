"""'Deeper is worse' an author states in words, with no per-position counts or curve in the
paste ('any increase from this will just cause latencies to increase', 'Deeper speculation on
this model mostly drafts tokens that get rejected': ``deeper`` of
parsers/stated_claims_acceptance.toml, read by specscope/logs/claim_depth.py): a
k_too_large on the author's word, suggestive and no more, with the words as its sample. A
run with rates by position of its own is ``positions.k_too_large``'s, judged on those."""

from __future__ import annotations

from specscope.analysis.detectors.said import claim_words, has_curve, on_words, where_said
from specscope.analysis.evidence import Evidence, finding_for, nothing_accepted
from specscope.analysis.findings import Finding, Severity

# What the finding rests on, said as its assumption (it makes the level suggestive).
WORDS = "the author's word, not counts: no rate or speed of either depth is stated"


def deeper_in_words(ev: Evidence) -> list[Finding]:
    """A k_too_large for each run whose author says drafting deeper costs more than it
    gives (``stated_words`` with the claim ``deeper``) and that has no rates by position."""
    out: list[Finding] = []
    for run_id, agg in ev.per_run.items():
        words = claim_words(agg.get("stated_words"), "deeper")
        if words is None or has_curve(agg) or nothing_accepted(ev, run_id, agg):
            continue  # (nothing accepted anywhere: zero_acceptance speaks for it)
        rows, where = where_said(ev, run_id)
        sample, confidence = on_words(
            words, "the author's word, without per-position counts", WORDS
        )
        out.append(
            finding_for(
                ev,
                "k_too_large",
                Severity.WARNING,
                run_id,
                rows,
                explanation="The author says drafting deeper does not pay "
                f"({where}\u201c{words}\u201d), with no per-position counts in the paste to "
                "tell from which position the drafts are wasted.",
                next_step="draft at the depth the author found best, and paste the "
                "per-position acceptance of the deeper setting (vLLM's 'Per-position "
                "acceptance rate', SGLang's accept length at each depth): counts tell which "
                "positions do not pay for their verification",
                measured={"stated": "deeper is worse"},
                expected={"k": "the shallower depth the author found to pay"},
                sample=sample,
                confidence=confidence,
            )
        )
    return out


__all__ = ["deeper_in_words"]
