"""Acceptance an author calls low in words, with no rate, no length and no counts in the paste
('the acceptance rate is very low', 'almost no draft tokens are accepted'): a low_acceptance
on the author's word, suggestive and no more, with the words as its sample. A run with any
number to judge is the counted detectors' (acceptance.low and zero)."""

from __future__ import annotations

from specscope.analysis.detectors.said import claim_words, on_words, where_said
from specscope.analysis.evidence import Evidence, finding_for, trials_of
from specscope.analysis.findings import Finding, Severity

# What the finding rests on, said as its assumption (it makes the level suggestive).
WORDS = "the author's word, not counts: no rate, length or count of the run is stated"


def low_in_words(ev: Evidence) -> list[Finding]:
    """A low_acceptance for each run whose only word on its acceptance is the author's
    'low' (``stated_words``, parsers/stated_claims_acceptance.toml)."""
    out: list[Finding] = []
    for run_id, agg in ev.per_run.items():
        extra = agg.get("stated_words")
        if not extra or trials_of(ev, run_id, agg) is not None:
            continue  # nothing said in words, or a number the counted detectors judge
        words = claim_words(extra, "low")
        if not words:
            continue
        rows, where = where_said(ev, run_id)
        sample, confidence = on_words(words, "the author's word, without a rate", WORDS)
        out.append(
            finding_for(
                ev,
                "low_acceptance",
                Severity.WARNING,
                run_id,
                rows,
                explanation="The author says acceptance is low "
                f"({where}\u201c{words}\u201d), with no rate, length or count in the paste "
                "to tell how low, or whether it is a fault (a quantized target, a drafter "
                "trained for another model or template) or the workload.",
                next_step="paste the server's spec-decode lines or counters the author read "
                "this from (vLLM's 'SpecDecoding metrics', SGLang's 'accept len', "
                "llama.cpp's draft acceptance): counts tell how low, and against what the "
                "method reaches",
                measured={"stated": "low"},
                expected={"acceptance": "what the method reaches (reference.toml)"},
                sample=sample,
                confidence=confidence,
            )
        )
    return out


__all__ = ["low_in_words"]
