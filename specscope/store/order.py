"""A source's rows in line order, whatever partitions they are in.

A dated table (``layout.DATED``) holds a source's rows in a folder per day, and a log's
days need not come in order: a paste, MM-DD stamps across a year boundary, or rows
without a time (the default partition) between timed ones. Files are listed by source,
ingest and folder (``layout.live_files``), so reading them in that order would give a
source's rows by day, not as its log printed them. Every row carries the line its
record starts at, and a writer writes a source's rows in line order, so each file is
sorted by ``line``; the reader puts them back together:

- a source in one folder (a store written before partitions, or a log of one day) is
  read as listed: nothing is opened to order it;
- a source over several folders has its files ordered by the lines they hold (the range
  its manifest entry keeps, taken from the footer's row groups' min and max of ``line``
  when the file was committed; read from the footer for an entry written before entries
  kept it: a fleet's month has thousands of files to order). Where those ranges follow one
  another (a log whose days go forward, the common case) that order is line order and no
  row is moved;
- where they interleave (a log whose days go back), the source is "shuffled": its rows
  are sorted by line (stable, so rows of one line keep the order they were written in).

Rows without a line (pulled intervals, which have a time and no line) keep the listed
order: their files follow the pulls, each a later stretch of time.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from itertools import groupby, pairwise
from pathlib import Path
from typing import TypeVar

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from specscope.store.layout import UNSAID, DataFile, Unsaid

LINE = "line"
_AT = "__specscope_at"

_ranges: dict[tuple[str, int, int], tuple[int, int] | None] = {}

Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)


def source_of(path: Path) -> str:
    """The source id of a data file: its ``source_id=<id>`` folder (in either layout)."""
    return path.parent.name.split("=", 1)[1]


def line_range(path: Path) -> tuple[int, int] | None:
    """The least and greatest ``line`` a file holds, from its footer's statistics; None
    where it holds no line (pulled rows), has no statistics, or cannot be read (the
    check that reads it names the problem). Kept per process while the file is unchanged."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _ranges:
        _ranges[key] = _footer_range(path)
    return _ranges[key]


def _footer_range(path: Path) -> tuple[int, int] | None:
    try:
        with pq.ParquetFile(path) as parquet:
            return footer_lines(parquet.metadata)
    except (OSError, ValueError, pa.ArrowException):
        return None


def footer_lines(meta: pq.FileMetaData) -> tuple[int, int] | None:
    """The least and greatest ``line`` the row groups of a file's footer bound; None where
    a group holding rows does not bound them (no statistics, or rows without a line)."""
    column = next(
        (
            i
            for i in range(meta.num_columns)
            if meta.num_row_groups and meta.row_group(0).column(i).path_in_schema == LINE
        ),
        None,
    )
    if column is None:
        return None
    low: int | None = None
    high: int | None = None
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        if not group.num_rows:
            continue
        stats = group.column(column).statistics
        # Rows the footer does not bound, or rows without a line: their place is the
        # file's, as listed.
        if stats is None or not stats.has_min_max or stats.null_count:
            return None
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    return None if low is None or high is None else (int(low), int(high))


def lines_of(file: DataFile) -> tuple[int, int] | None:
    """The line range of ``file``'s committed rows: from its manifest entry, else (an entry
    written before entries kept it, or a legacy file) from its footer."""
    said = UNSAID if file.entry is None else file.entry.lines
    return line_range(file.path) if isinstance(said, Unsaid) else said


def in_line_order(files: Sequence[DataFile]) -> tuple[list[DataFile], frozenset[str]]:
    """``files`` (listed by source) with each source's files in the order of their lines,
    and the sources whose files' lines interleave (their rows need sorting by line)."""
    out: list[DataFile] = []
    shuffled: set[str] = set()
    for folder, group in groupby(files, key=lambda f: f.path.parent.name):
        mine = list(group)
        if "=" not in folder or len({f.path.parent for f in mine}) < 2:
            out.extend(mine)
            continue
        ranges = [lines_of(f) for f in mine]
        held = [(r, i) for i, r in enumerate(ranges) if r is not None]
        if len(held) < len(mine):
            out.extend(mine)
            continue
        held.sort()
        out.extend(mine[i] for _, i in held)
        if any(a[1] >= b[0] for (a, _), (b, _) in pairwise(held)):
            shuffled.add(folder.split("=", 1)[1])
    return out, frozenset(shuffled)


def sort_shuffled(frame: Frame, shuffled: Collection[str]) -> Frame:
    """``frame`` (rows of several sources, each source's together, with ``source_id`` and
    ``line``) with the rows of each ``shuffled`` source sorted by line; every other row
    stays where it is, and the sources stay in their order. Nothing is done (nor read)
    where no shuffled source is in ``frame``'s list."""
    if not shuffled:
        return frame
    indexed = frame.with_row_index(_AT)
    at = pl.col(_AT).cast(pl.Int64)
    key = pl.when(pl.col("source_id").is_in(list(shuffled))).then(pl.col(LINE)).otherwise(at)
    return indexed.sort(at.min().over("source_id"), key, maintain_order=True).drop(_AT)


__all__ = [
    "footer_lines",
    "in_line_order",
    "line_range",
    "lines_of",
    "sort_shuffled",
    "source_of",
]
