"""Giving vLLM's year-less timestamps (``MM-DD HH:MM:SS``) a year.

The year comes from the log itself where a container or SGLang timestamp carries one;
otherwise from ``--year`` (the year of the first timestamp) or from the file's mtime (the
year of the last one). A month that jumps back by half a year or more is a new year.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import polars as pl

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


def resolve_frame(
    stamps: pl.DataFrame, *, year: int | None, mtime: datetime
) -> tuple[pl.Series, int | None, str]:
    """``resolve`` over columns: ``_year``, ``_month``, ``_day`` (integers) and ``_time``
    (``HH:MM:SS``), rows in log order. The timestamps (ms), the first year, its basis."""
    n = len(stamps)
    empty = pl.Series("ts", [None] * n, pl.Datetime("ms"))
    month = stamps["_month"]
    if month.null_count() == n:
        return empty, None, "none"
    has = month.is_not_null()
    previous = month.forward_fill().shift(1)
    offsets = (has & ((previous - month) >= 6).fill_null(False)).cast(pl.Int64).cum_sum()
    explicit = stamps["_year"].is_not_null()
    if explicit.any():
        basis = "log"
        at = int(explicit.arg_true()[0])
        first = int(stamps["_year"][at]) - int(offsets[at])
    elif year is not None:
        basis, first = "--year", year
    else:
        basis = "mtime"
        last = int(has.arg_true()[-1])
        last_year = mtime.year
        if (int(month[last]), int(stamps["_day"][last] or 1)) > (mtime.month, mtime.day):
            last_year -= 1
        first = last_year - int(offsets[-1])
    frame = pl.DataFrame(
        {
            "explicit": stamps["_year"].cast(pl.Int64),
            "has": has,
            "off": offsets,
            "m": month.cast(pl.Int64),
            "d": stamps["_day"].cast(pl.Int64).fill_null(1),
            "t": stamps["_time"].fill_null("00:00:00"),
        }
    ).with_columns(
        pl.coalesce(
            "explicit",
            pl.when("has").then("explicit").forward_fill(),
            pl.col("off") + first,
        ).alias("y")
    )
    ts = frame.select(
        pl.when(pl.col("m").is_not_null() & pl.col("y").is_between(1, 9999))
        .then(
            pl.format(
                "{}-{}-{} {}",
                pl.col("y").cast(pl.String).str.zfill(4),
                pl.col("m").cast(pl.String).str.zfill(2),
                pl.col("d").cast(pl.String).str.zfill(2),
                pl.col("t"),
            )
        )
        .str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="ms")
        .alias("ts")
    )["ts"]
    return ts, first, basis


def stamp_of(row: dict[str, Any]) -> Stamp | None:
    return row.get("_ts")


__all__ = ["resolve", "resolve_frame", "stamp_of"]
