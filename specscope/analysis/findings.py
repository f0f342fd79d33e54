"""What detection reports: a finding, its severity, and its plain dict."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import IntEnum
from typing import Any


class Severity(IntEnum):
    INFO = 1
    WARNING = 2
    CRITICAL = 3

    @classmethod
    def parse(cls, name: str) -> Severity:
        try:
            return cls[name.upper()]
        except KeyError as exc:
            raise ValueError(f"severity must be info, warning or critical, not {name!r}") from exc

    def __str__(self) -> str:
        return self.name.lower()


# The names are part of the interface (JSON consumers key on them).
KINDS = (
    "zero_acceptance",
    "low_acceptance",
    "position_cliff",
    "k_too_large",
    "concurrency_collapse",
    "prefix_cache_penalty",
    "no_speedup",
    "kv_cache_saturation",
    "acceptance_drift",
    "request_outlier",
    "request_acceptance",
    "forced_acceptance",
    "insufficient_data",
    "error_signature",
)


# How strongly the data supports a finding, strongest first. A claim is "certain" when it
# holds with the intervals at 99.9%, "likely" when it holds at the configured level (95%);
# a finding that also rests on an assumption (the method or k not stated, a count read
# from a printed mean) is at most "suggestive", whatever its intervals say.
LEVELS = ("certain", "likely", "suggestive")


@dataclass
class Confidence:
    """The strength of a finding: the word a reader acts on, the test that decided it (the
    bound against the threshold, in words), the sample it rests on, and what it assumes."""

    level: str
    test: str
    sample: dict[str, Any] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"confidence level must be one of {LEVELS}, not {self.level!r}")
        if self.assumptions and self.level != "suggestive":
            self.level = "suggestive"

    def phrase(self) -> str:
        """One short phrase: ``likely (95% upper bound 2.3% < 20%; 164 drafts)``."""
        sample = ", ".join(
            f"{v:,} {_counted(k, v)}" if isinstance(v, int) else f"{k} {v}"
            for k, v in self.sample.items()
        )
        inside = "; ".join(p for p in (self.test, sample) if p)
        assumed = f"; assumes {'; '.join(self.assumptions)}" if self.assumptions else ""
        return f"{self.level} ({inside}{assumed})"


def _counted(noun: str, count: int) -> str:
    """The sample's keys are plural nouns ("drafts", "events"): one of them reads singular."""
    return noun[:-1] if count == 1 and noun.endswith("s") else noun


@dataclass
class Finding:
    kind: str
    severity: Severity
    run_id: str | None
    source: str | None
    explanation: str  # what the numbers mean, in plain words
    next_step: str  # what to try or check
    measured: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    sample: dict[str, Any] = field(default_factory=dict)  # drafts, records: how much evidence
    lines: tuple[int | None, int | None] = (None, None)  # evidence in the source
    window: tuple[datetime | None, datetime | None] = (None, None)
    confidence: Confidence | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = str(self.severity)
        d["lines"] = list(self.lines)
        d["window"] = [t.isoformat() if t is not None else None for t in self.window]
        if self.confidence is not None:
            d["confidence"]["phrase"] = self.confidence.phrase()
        return json_safe(d)


def json_safe(value: Any) -> Any:
    """A value as JSON can hold it: datetimes as ISO text, NaN and infinities as None."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


__all__ = ["KINDS", "LEVELS", "Confidence", "Finding", "Severity", "json_safe"]
