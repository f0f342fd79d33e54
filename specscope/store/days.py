"""A source's rows of one write on their way into folders: by day in a dated table
(``layout.DATED``), in row groups worth their footer.

- **A part of one day** (a pull, a stretch of a log) is a row group of its own, as
  before partitions.
- **A part over several days** is cut by day, and each day's small cuts are gathered
  (up to ``GATHER_ROWS`` held, then every day's go out, a group a day; a cut of
  ``GROUP_ROWS`` or more is a group at once): a fleet's part is a server's run over ten
  days, and a group a cut made 41-row groups, a footer of 259 KB for a file of 4,400 rows
  that every reader opens. Held rows are memory an ingest did not hold before, so only
  small cuts wait: with every cut held a 100 MB generated log's ingest (parts of ~5,000
  rows over 24 days, cut at each day's end into pieces of thousands) peaked 15-20 MB
  higher; holding cuts under ``GROUP_ROWS`` it holds none.

A file holds one day, whatever its rows: hive readers take the day from the folder, and
polars' hive glob fails on a table whose files are not all at one depth (a source's thin
days in its own folder beside the days' folders: ``ShapeError``), so a log spread over a
year keeps a file a day (``specscope compact`` merges a day's files, not days).
"""

from __future__ import annotations

from datetime import date

import polars as pl

from specscope.store.layout import NO_DAY, partition

GATHER_ROWS = 65_536  # rows of cuts held before they go out, a group a day
GROUP_ROWS = 1_024  # a cut of this many rows is a group of its own, not held

Group = tuple[str, list[pl.DataFrame]]  # a folder and the frames of one row group, in order


class Folders:
    """Where the parts of one source's write go (``add``, then ``end``): each answer is
    the row groups to write now, in order, as (folder, frames)."""

    def __init__(self, table: str, source_id: str, *, dated: bool) -> None:
        self.table = table
        self.source_id = source_id
        self.dated = dated  # the table's rows go by day (``layout.DATED``)
        self.held: list[tuple[str, pl.DataFrame]] = []  # cuts of parts, in order
        self.rows = 0

    def add(self, part: pl.DataFrame) -> list[Group]:
        cuts = _by_day(self.table, self.source_id, part, self.dated)
        out: list[Group] = []
        for folder, rows in cuts:
            if len(cuts) > 1 and len(rows) < GROUP_ROWS:
                self.held.append((folder, rows))
                self.rows += len(rows)
                continue
            # A part of one day, or a cut big enough: a group, after what its folder holds.
            if any(f == folder for f, _ in self.held):
                out.extend(self._out({folder}))
            out.append((folder, [rows]))
        if self.rows >= GATHER_ROWS:
            out.extend(self._out())
        return out

    def end(self) -> list[Group]:
        return self._out()

    def take(self, folder: str) -> list[Group]:
        """The cuts held for ``folder``, a group: its file is about to close."""
        return self._out({folder}) if any(f == folder for f, _ in self.held) else []

    def _out(self, only: set[str] | None = None) -> list[Group]:
        """The cuts held (of the folders ``only``), a group a folder, in the order they
        came."""
        cuts: dict[str, list[pl.DataFrame]] = {}
        kept: list[tuple[str, pl.DataFrame]] = []
        for folder, rows in self.held:
            if only is not None and folder not in only:
                kept.append((folder, rows))
            else:
                cuts.setdefault(folder, []).append(rows)
        self.held = kept
        self.rows = sum(len(rows) for _, rows in kept)
        return list(cuts.items())


def _by_day(
    name: str, source_id: str, part: pl.DataFrame, dated: bool
) -> list[tuple[str, pl.DataFrame]]:
    """A part's rows by the folder they go in (``layout.partition``): by day where
    ``dated``, in the order the days first come; the whole part otherwise."""
    if part.is_empty():
        return []
    if not dated:
        return [(partition(name, source_id), part)]
    when = [pl.col(c).dt.date() for c in ("ts_utc", "ts") if c in part.columns]
    day = pl.coalesce(when) if when else pl.lit(None, pl.Date)
    # Dates, not their text: a part of a fleet's pull is formatted once, not row by row.
    days = part.select(day.alias(_DAY_KEY)).to_series()
    first = days.unique(maintain_order=True)
    if len(first) == 1:  # the common case: a part of one day, not copied
        return [(partition(name, source_id, _day_name(first[0])), part)]
    runs = days.rle().struct.unnest()
    if len(runs) == len(first):
        # Each day's rows are together (a log's days go by): a big cut is a slice of the
        # part, not a copy. Grouping copied every row of every part that crossed a day
        # (two parts in three of the generated 100 MB log): 0.045-0.052 -> 0.025-0.029
        # CPU s.
        out, at = [], 0
        for n, key in runs.iter_rows():
            rows = part.slice(at, n)
            if n < GROUP_ROWS:
                # A cut that may wait for its day (``Folders.add``) is a copy: a slice
                # would keep the whole part's columns in memory while it waits.
                rows = part.select(pl.all().gather(pl.int_range(at, at + n)))
            out.append((partition(name, source_id, _day_name(key)), rows))
            at += n
        return out
    keyed = part.with_columns(days)
    return [
        (partition(name, source_id, _day_name(key[0])), rows.drop(_DAY_KEY))
        for key, rows in keyed.partition_by(_DAY_KEY, as_dict=True, maintain_order=True).items()
    ]


def _day_name(day: date | None) -> str:
    return NO_DAY if day is None else day.isoformat()


_DAY_KEY = "__specscope_day"

__all__ = ["GATHER_ROWS", "GROUP_ROWS", "Folders"]
