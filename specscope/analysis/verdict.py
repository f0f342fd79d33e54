"""The verdict: what the findings about a set of runs come to, in two sentences."""

from __future__ import annotations

from specscope.analysis.evidence import Evidence
from specscope.analysis.findings import Finding, Severity


def verdict_of(ev: Evidence, found: list[Finding]) -> str:
    """How many runs and drafts were judged, and the worst finding with its confidence; or
    that nothing is wrong, or that nothing could be judged."""
    n_runs = len(ev.per_run)
    drafts = sum(int(a.get("drafts") or 0) for a in ev.per_run.values())
    tokens = sum(int(a.get("draft_tokens") or 0) for a in ev.per_run.values())
    sample = (
        f"{drafts:,} drafts" if drafts else f"{tokens:,} draft tokens" if tokens else "no counts"
    )
    head = f"{n_runs} run{'s' if n_runs != 1 else ''} with speculative decoding, {sample}."
    worst = [f for f in found if f.severity == Severity.CRITICAL] or [
        f for f in found if f.severity == Severity.WARNING
    ]
    if not worst:
        if found and all(f.kind == "insufficient_data" for f in found):
            # The whole explanation: it says what was measured and what would settle it.
            return f"{head} Too little to judge. {found[0].explanation}"
        return (
            head + " No warning or critical finding: speculative decoding behaves as its "
            "method and configuration lead one to expect."
        )
    kinds = sorted({f.kind for f in worst})
    first = worst[0]
    sure = f", {first.confidence.level}" if first.confidence is not None else ""
    return (
        f"{head} {len(worst)} {first.severity!s} finding{'s' if len(worst) != 1 else ''} "
        f"({', '.join(kinds)}). The most serious: {first.kind} in run {first.run_id}{sure}. "
        f"{first.explanation.split('. ')[0].rstrip('.')}."
    )


__all__ = ["verdict_of"]
