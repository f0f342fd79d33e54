"""What an author says in words, as the detectors of a claim without counts read it
(``acceptance_words``, ``positions_words``, ``depth_words``): the claim record's words, the
place they stand, and the finding's sample and confidence. The words are the whole sample,
so the level is suggestive and never more."""

from __future__ import annotations

import json
from typing import Any

from specscope.analysis.evidence import Evidence, engine_rows, scalar
from specscope.analysis.findings import Confidence


def claim_said(extra: Any, claim: str) -> dict[str, Any] | None:
    """The claim record's ``extra`` (JSON) where it states ``claim`` ('low', 'cliff',
    'deeper'), else None."""
    if not extra:
        return None
    try:
        said: Any = json.loads(extra)
    except ValueError:
        return None
    return said if isinstance(said, dict) and said.get("claim") == claim else None


def claim_words(extra: Any, claim: str) -> str | None:
    """The author's words of a ``claim`` record, or None."""
    said = claim_said(extra, claim)
    return (str(said.get("stated") or "") or None) if said is not None else None


def where_said(ev: Evidence, run_id: str) -> tuple[Any, str]:
    """The run's rows and 'line N: ' for its first line ('' without one)."""
    rows = engine_rows(ev, run_id, None)
    line = scalar(rows["line"].min(), int) if not rows.is_empty() else None
    return rows, f"line {line}: " if line is not None else ""


def has_curve(agg: Any) -> bool:
    """The run has rates by position of its own (counted, printed or stated as a list): a
    detector of words leaves it to the counted one."""
    printed = [x for x in (agg.get("per_position") or []) if x is not None]
    return len(printed) >= 2 or len(agg.get("stated_curve") or []) >= 2


def on_words(words: str, test: str, assumption: str) -> tuple[dict[str, str], Confidence]:
    """The sample and confidence of a finding on the author's ``words`` alone."""
    sample = {"author's words": f"\u201c{words}\u201d"}
    return sample, Confidence("suggestive", test, dict(sample), [assumption])


__all__ = ["claim_said", "claim_words", "has_curve", "on_words", "where_said"]
