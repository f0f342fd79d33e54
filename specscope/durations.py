"""Durations and times as users write them on the command line (``6h``, ``1h30m``, RFC 3339
or unix seconds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import regex

from specscope.errors import UsageError

_DURATION = regex.compile(r"(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m|h|d|w)")


_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """``"6h"``, ``"90m"``, ``"1h30m"``, ``"10s"`` as a timedelta."""
    parts = list(_DURATION.finditer(text.strip()))
    if not parts or "".join(m.group(0) for m in parts).replace(" ", "") != text.replace(" ", ""):
        raise UsageError(f"not a duration: {text!r} (write 6h, 90m, 1h30m, 10s)")
    return timedelta(seconds=sum(float(m["n"]) * _UNIT_S[m["unit"]] for m in parts))


def parse_time(text: str) -> datetime:
    """An RFC 3339 time or unix seconds, as an aware UTC datetime."""
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except ValueError:
        pass
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"not a time: {text!r} (RFC 3339 or unix seconds)") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


__all__ = ["parse_duration", "parse_time"]
