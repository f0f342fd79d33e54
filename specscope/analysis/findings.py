"""What `detect` reports: a finding, its severity, and how it prints."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import IntEnum
from typing import Any

import numpy as np


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
        return _plain(d)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def wilson(successes: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (drafts as trials: tokens within a draft
    are not independent, so drafts, not tokens, are the sample size)."""
    if n <= 0:
        return (0.0, 1.0)
    p = min(1.0, max(0.0, successes / n))
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[float, float]:
    """Newcombe's interval for rate_b - rate_a from two Wilson intervals (drafts as trials)."""
    ka, kb = a["draft_tokens"] / a["drafts"], b["draft_tokens"] / b["drafts"]
    pa, pb = a["accepted_tokens"] / a["draft_tokens"], b["accepted_tokens"] / b["draft_tokens"]
    la, ua = wilson(a["accepted_tokens"] / ka, a["drafts"])
    lb, ub = wilson(b["accepted_tokens"] / kb, b["drafts"])
    d = pb - pa
    return (
        d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2),
        d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2),
    )


def wilson_arrays(
    successes: np.ndarray, n: np.ndarray, z: float = 1.96
) -> tuple[np.ndarray, np.ndarray]:
    """``wilson`` over arrays, the same arithmetic in the same order (``n`` > 0)."""
    p = np.minimum(1.0, np.maximum(0.0, successes / n))
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (np.maximum(0.0, centre - half), np.minimum(1.0, centre + half))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def finding_text(f: Finding) -> str:
    where = f.source or ""
    if f.lines[0] is not None:
        where += f":{f.lines[0]}" + (
            f"-{f.lines[1]}" if f.lines[1] not in (None, f.lines[0]) else ""
        )
    when = ""
    if f.window[0] is not None:
        when = f"  {f.window[0]:%Y-%m-%d %H:%M:%S}"
        if f.window[1] is not None and f.window[1] != f.window[0]:
            when += f" -> {f.window[1]:%H:%M:%S}"
    lines = [f"{str(f.severity).upper():8} {f.kind}  run {f.run_id or '-'}  {where}{when}"]
    if f.measured:
        lines.append("  measured: " + ", ".join(f"{k} {_fmt(v)}" for k, v in f.measured.items()))
    if f.expected:
        lines.append("  expected: " + ", ".join(f"{k} {_fmt(v)}" for k, v in f.expected.items()))
    if f.sample:
        lines.append("  evidence: " + ", ".join(f"{k} {_fmt(v)}" for k, v in f.sample.items()))
    lines.append(f"  {f.explanation}")
    lines.append(f"  next: {f.next_step}")
    return "\n".join(lines)


__all__ = ["KINDS", "Finding", "Severity", "finding_text", "wilson"]
