"""The UTC offset of a log's clock, read off lines that a container runtime stamped.

vLLM and SGLang print the server's local time without a zone, so a log's ``ts`` is local.
``docker logs -t``, ``kubectl logs --timestamps`` and CRI files put an RFC 3339 stamp with
its zone before each line: where one line has both, the difference between the two clocks
is the server's offset from UTC (plus the moment the runtime took to stamp the line), and
``ts_utc = ts - offset``. Offsets are whole quarter hours (every zone in use is), so the
difference is rounded to one, and only taken where it is within two minutes of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import regex

# How many lines to look at, and how many stamped lines settle the offset: the stamps
# are on every line or on none.
_HEAD_LINES = 20_000
_ENOUGH = 25
_QUARTER = 900
_SLACK_S = 120
_MAX_OFFSET_S = 14 * 3600

_STAMP = regex.compile(
    r"\s*(?P<date>\d{4}-\d\d-\d\d)T(?P<clock>\d\d:\d\d:\d\d)(?:[.,]\d+)?"
    r"(?P<zone>Z|[+-]\d\d:?\d\d)\s"
)
# The server's own clock in the line: vLLM's ``INFO 04-07 17:19:59`` or SGLang's
# ``[2025-07-01 12:34:56]``.
_PRINTED = regex.compile(
    r"\b(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\s+(?P<md>\d\d-\d\d)\s+(?P<clock>\d\d:\d\d:\d\d)\b"
    r"|\[(?P<date>\d{4}-\d\d-\d\d)\s(?P<clock2>\d\d:\d\d:\d\d)(?:[.,]\d+)?\]"
)


def utc_offset(lines: Iterable[str]) -> timedelta | None:
    """The offset (local minus UTC) the stamped lines among ``lines`` agree on most; None
    where no line carries both clocks."""
    seen: Counter[int] = Counter()
    for n, line in enumerate(lines):
        if n >= _HEAD_LINES or sum(seen.values()) >= _ENOUGH:
            break
        offset = _offset_of(line)
        if offset is not None:
            seen[offset] += 1
    if not seen:
        return None
    return timedelta(seconds=seen.most_common(1)[0][0])


def _offset_of(line: str) -> int | None:
    stamp = _STAMP.match(line)
    if stamp is None:
        return None
    printed = _PRINTED.search(line, stamp.end(), stamp.end() + 400)
    if printed is None:
        return None
    try:
        utc = _utc(stamp["date"], stamp["clock"], stamp["zone"])
        if printed["md"]:
            local = _nearest_year(printed["md"], printed["clock"], utc)
        else:
            local = datetime.fromisoformat(f"{printed['date']}T{printed['clock2']}")
    except ValueError:
        return None
    seconds = (local - utc.replace(tzinfo=None)).total_seconds()
    quarter = round(seconds / _QUARTER) * _QUARTER
    if abs(seconds - quarter) > _SLACK_S or abs(quarter) > _MAX_OFFSET_S:
        return None
    return int(quarter)


def _utc(date: str, clock: str, zone: str) -> datetime:
    zone = "+00:00" if zone == "Z" else zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
    return datetime.fromisoformat(f"{date}T{clock}{zone}").astimezone(UTC)


def _nearest_year(month_day: str, clock: str, utc: datetime) -> datetime:
    """A month, day and time without a year: in the year that puts it nearest ``utc``
    (a log stamped 31 December UTC may print 1 January local)."""
    near = utc.replace(tzinfo=None)
    candidates = []
    for year in (near.year - 1, near.year, near.year + 1):
        try:
            candidates.append(datetime.fromisoformat(f"{year}-{month_day}T{clock}"))
        except ValueError:
            continue  # 29 February in a year that has none
    if not candidates:
        raise ValueError(f"no date {month_day}")
    return min(candidates, key=lambda t: abs(t - near))


__all__ = ["utc_offset"]
