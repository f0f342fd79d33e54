"""The year rule, written plainly as a test oracle: the store gets it from
``specscope.logs.assemble`` (over columns, block by block), and must agree with this.

Giving vLLM's year-less timestamps (``MM-DD HH:MM:SS``) a year.

The year comes from the log itself where a container or SGLang timestamp carries one;
otherwise from ``--year`` (the year of the first timestamp) or from the file's mtime (the
year of the last one). A month that jumps back by half a year or more is a new year.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

Stamp = tuple[int | None, int | None, int | None, str | None]  # year, month, day, HH:MM:SS


def _rolls_over(previous: int, month: int) -> bool:
    return previous - month >= 6


def resolve(
    stamps: Sequence[Stamp | None], *, year: int | None, mtime: datetime
) -> tuple[list[datetime | None], int | None, str]:
    """Datetimes for ``stamps`` (in log order), the year of the first and its basis."""
    months = [s[1] for s in stamps if s is not None and s[1] is not None]
    if not months:
        return [None] * len(stamps), None, "none"
    explicit = [s[0] for s in stamps if s is not None and s[0] is not None]
    offsets: list[int] = []
    offset = 0
    previous: int | None = None
    for s in stamps:
        if s is not None and s[1] is not None:
            if previous is not None and _rolls_over(previous, s[1]):
                offset += 1
            previous = s[1]
        offsets.append(offset)
    if explicit:
        basis = "log"
        first = explicit[0] - _offset_of_first_explicit(stamps, offsets)
    elif year is not None:
        basis, first = "--year", year
    else:
        basis = "mtime"
        last = next(s for s in reversed(stamps) if s is not None and s[1] is not None)
        last_year = mtime.year
        if (last[1], last[2] or 1) > (mtime.month, mtime.day):
            last_year -= 1  # a December log whose file was touched in January
        first = last_year - offset
    out: list[datetime | None] = []
    carried: int | None = None
    for s, off in zip(stamps, offsets, strict=True):
        if s is None or s[1] is None:
            out.append(None)
            continue
        y = s[0] if s[0] is not None else (carried if carried is not None else first + off)
        if s[0] is not None:
            carried = s[0]
        out.append(_make(y, s))
    return out, first, basis


def _offset_of_first_explicit(stamps: Sequence[Stamp | None], offsets: Sequence[int]) -> int:
    for s, off in zip(stamps, offsets, strict=True):
        if s is not None and s[0] is not None:
            return off
    return 0


def _make(year: int, s: Stamp) -> datetime | None:
    try:
        h, m, sec = (int(x) for x in (s[3] or "00:00:00").split(":"))
        return datetime(year, s[1] or 1, s[2] or 1, h, m, sec)
    except ValueError:
        return None


def stamp_of(row: dict[str, Any]) -> Stamp | None:
    return row.get("_ts")


__all__ = ["resolve", "stamp_of"]
