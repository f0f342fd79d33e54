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
    "insufficient_data",
    "error_signature",
)


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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = str(self.severity)
        d["lines"] = list(self.lines)
        d["window"] = [t.isoformat() if t is not None else None for t in self.window]
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


__all__ = ["KINDS", "Finding", "Severity", "json_safe"]
