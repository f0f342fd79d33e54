"""Rows on their way from the parser to the store: block by block, the line parser's dicts
and the bulk reader's frames become one frame per table, in log order, kept in memory
while they are few (most logs: written to Parquet straight from the frames) and in stage
files once they are not, so that memory stays flat however long the log. What a row's
year needs from the rows before it (the months that rolled over, the last year a line
printed) is worked out as the rows pass (``Years``).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from specscope.logs.parser import LineParser
from specscope.logs.results import BulkRow, Row
from specscope.schema import TABLES, polars_schema

RECORD_TABLES = ("spec_decode", "engine_stats", "events", "bench")


INTERNAL_COLUMNS = pl.Schema(
    {
        "_run": pl.Int64,
        "_year": pl.Int64,  # printed in the line (a container or SGLang timestamp)
        "_month": pl.Int64,
        "_day": pl.Int64,
        "_time": pl.Int32,  # the second of the day (``clock_seconds``)
        "_dt": pl.Boolean,  # the record printed its draft tokens (so k may come from config)
        "_off": pl.Int64,  # years the months rolled over since the first timestamp
        "_yr": pl.Int64,  # the year printed on this line or the last dated one before it
    }
)


_ROLLOVER = 6  # a month that jumps back by this much or more is a new year

# Staged rows held in memory (polars' estimate) before the stage goes to files. The Arrow
# IPC round trip costs 0.3 CPU s per 100 MB of server log (bench/README, issue 17), and
# the rows of 100 MB take about 80 MB in memory: a log of up to some 20 MB skips it, and a
# longer one spills what it held and goes on in files, its peak RSS up by at most this.
MEMORY_BYTES = 16 << 20


def _arrow_type(dtype: Any) -> pa.DataType:
    return pl.DataFrame(schema={"x": dtype}).to_arrow().schema[0].type


_ROW_SCHEMAS = {
    table: pa.schema(
        [*TABLES[table], *(pa.field(k, _arrow_type(t)) for k, t in INTERNAL_COLUMNS.items())]
    )
    for table in RECORD_TABLES
}


def _dict_rows(rows: list[Row], table: str) -> pl.DataFrame:
    names = TABLES[table].names
    out = []
    for r in rows:
        ts = r.get("_ts") or (None, None, None, None)
        row = {k: r.get(k) for k in names}
        row.update(
            _run=r["_run"],
            _year=ts[0],
            _month=ts[1],
            _day=ts[2],
            _time=clock_seconds(ts[3]),
            _dt="draft_tokens" in r,
        )
        out.append(row)
    return pl.DataFrame(pa.Table.from_pylist(out, schema=_ROW_SCHEMAS[table]))


def clock_seconds(clock: str | None) -> int | None:
    """The second of the day of a header's ``HH:MM:SS`` (``Envelope.time``, always a valid
    clock): a row carries its time as a number, which its timestamp takes without parsing
    text (``assemble``) and the stage holds in 4 bytes."""
    if clock is None:
        return None
    return int(clock[:2]) * 3600 + int(clock[3:5]) * 60 + int(clock[6:8])


def clock_seconds_expr(clock: pl.Expr) -> pl.Expr:
    """``clock_seconds`` of a column of ``HH:MM:SS`` text (the polars classifier's)."""
    h, m, s = (clock.str.slice(i, 2).cast(pl.Int32) for i in (0, 3, 6))
    return h * 3600 + m * 60 + s


def conform(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """A frame with exactly the table's columns and types, plus the internal ones."""
    if "_dt" not in frame.columns:
        frame = frame.with_columns(
            (
                pl.col("draft_tokens").is_not_null()
                if "draft_tokens" in frame.columns
                else pl.lit(False)
            ).alias("_dt")
        )
    return frame.select(_conforming(table, tuple(frame.schema.items())))


_CONFORMING: dict[tuple[str, tuple[tuple[str, Any], ...]], list[pl.Expr]] = {}


def _conforming(table: str, have: tuple[tuple[str, Any], ...]) -> list[pl.Expr]:
    """What ``conform`` selects from a frame of the columns ``have``: kept by the columns a
    frame has, since the bulk reader's frames of a table come in a few shapes over and
    over (making 36 expressions a frame cost 0.5 ms, 0.03 CPU s per 100 MB of log)."""
    key = (table, have)
    steps = _CONFORMING.get(key)
    if steps is None:
        if len(_CONFORMING) > 256:
            _CONFORMING.clear()
        columns = dict(have)
        steps = _CONFORMING[key] = [
            (
                (pl.col(c) if columns[c] == t else pl.col(c).cast(t))
                if c in columns
                else pl.lit(None, t)
            ).alias(c)
            for c, t in {**polars_schema(table), **INTERNAL_COLUMNS}.items()
        ]
    return steps


@dataclass
class _Years:
    """What the rows so far say about years (``timestamps.resolve``, a block at a time)."""

    month: int | None = None  # the last month seen
    offset: int = 0
    carried: int | None = None  # the last year printed on a dated line
    first_explicit: tuple[int, int] | None = None  # (year, offset) of the first printed year
    last: tuple[int, int] | None = None  # (month, day) of the last dated row

    def stamp(self, rows: pl.DataFrame) -> pl.DataFrame:
        """``_off`` and ``_yr`` for rows in log order."""
        has = rows["_month"].is_not_null()
        previous = rows["_month"].forward_fill().shift(1)
        if self.month is not None:
            previous = previous.fill_null(self.month)
        rolled = (has & ((previous - rows["_month"]) >= _ROLLOVER).fill_null(False)).cast(pl.Int64)
        offsets = rolled.cum_sum() + self.offset
        carried = rows.select(pl.when(has).then(pl.col("_year")).forward_fill())["_year"]
        if self.carried is not None:
            carried = carried.fill_null(self.carried)
        out = rows.with_columns(
            offsets.alias("_off"), pl.coalesce(rows["_year"], carried).alias("_yr")
        )
        explicit = rows["_year"].is_not_null()
        if self.first_explicit is None and explicit.any():
            at = int(explicit.arg_true()[0])
            self.first_explicit = (int(rows["_year"][at]), int(offsets[at]))
        if len(rows):
            self.offset = int(offsets[-1])
        if has.any():
            at = int(has.arg_true()[-1])
            self.month = int(rows["_month"][at])
            self.last = (self.month, int(rows["_day"][at] or 1))
            if carried[at] is not None:
                self.carried = int(carried[at])
        return out

    def first_year(self, year: int | None, mtime: datetime) -> tuple[int | None, str]:
        if self.last is None:
            return None, "none"
        if self.first_explicit is not None:
            return self.first_explicit[0] - self.first_explicit[1], "log"
        if year is not None:
            return year, "--year"
        last_year = mtime.year
        if self.last > (mtime.month, mtime.day):
            last_year -= 1  # a December log whose file was touched in January
        return last_year - self.offset, "mtime"


@dataclass
class Stage:
    """Rows out of the parser, table by table, in log order: in memory up to ``memory``
    bytes, then in Arrow files under ``directory`` (removed by ``close``); all in memory
    without one (``watch``, tests)."""

    directory: Path | None = None
    memory: int | None = None  # MEMORY_BYTES
    parts: dict[str, list[pl.DataFrame | Path]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    years: _Years = field(default_factory=_Years)
    flushes: int = 0
    bulk_rows: int = 0  # of them, rows read in bulk
    _waiting: dict[str, pl.DataFrame] = field(default_factory=dict)
    _made: bool = False  # the directory, by this stage
    _held: int = 0  # bytes of the frames in ``parts``; -1 once they went to files
    _files: int = 0
    _last_line: dict[str, int] = field(default_factory=dict)  # a table's last line out

    def flush(
        self,
        rows: Mapping[str, list[Row]],
        frames: Mapping[str, list[pl.DataFrame]] | None = None,
        *,
        keep_from: int | None = None,
    ) -> None:
        """Take the rows made so far (emptying the lists) and the frames read in bulk.
        Rows from line ``keep_from`` on wait for the next flush: the parser may still make
        more rows of that line (records glued on it), and a line's rows go out together."""
        tables = {}
        for table in RECORD_TABLES:
            parts = [conform(f, table) for f in (frames or {}).get(table, ())]
            self.bulk_rows += sum(len(p) for p in parts)
            if table in self._waiting:
                parts.insert(0, self._waiting.pop(table))
            if rows.get(table):
                parts.append(_dict_rows(rows[table], table))
                rows[table].clear()
            if parts:
                frame = pl.concat(parts)
                lines = frame["line"]
                # Mostly in order already (the bulk reader's rows): a sort would copy every
                # column of every row (0.03-0.05 CPU s per 100 MB of log) to move none.
                if lines.null_count() or not lines.is_sorted():
                    frame = frame.sort("line", maintain_order=True)
                if keep_from is not None and not lines.null_count():
                    # In line order: the rows that wait are the frame's end, a slice (two
                    # filters copied every row of every block).
                    at = int(frame["line"].search_sorted(keep_from, side="left"))
                    if at < len(frame):
                        self._waiting[table] = frame.slice(at)
                        frame = frame.slice(0, at)
                elif keep_from is not None:
                    later = frame.filter(pl.col("line") >= keep_from)
                    if len(later):
                        self._waiting[table] = later
                        frame = frame.filter(pl.col("line") < keep_from)
                if len(frame):
                    tables[table] = frame
        if not tables:
            return
        # Years are read across tables: every row in log order, a line's rows in table order.
        stamps = pl.concat(
            [
                t.select("line", "_year", "_month", "_day").with_columns(
                    pl.lit(RECORD_TABLES.index(name), pl.Int64).alias("_table"),
                    pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
                )
                for name, t in tables.items()
            ]
        ).sort("line", "_table", "_row", maintain_order=True)
        stamped = self.years.stamp(stamps)
        for name, t in tables.items():
            mine = stamped.filter(pl.col("_table") == RECORD_TABLES.index(name)).sort("_row")
            t = t.with_columns(mine["_off"], mine["_yr"])
            self.counts[name] = self.counts.get(name, 0) + len(t)
            t = self._place_late(name, t)
            if len(t):
                self.parts.setdefault(name, []).append(self._keep(name, t))
                if t["line"].null_count() == 0:
                    self._last_line[name] = int(t["line"][-1])
        self.flushes += 1

    def _place_late(self, table: str, frame: pl.DataFrame) -> pl.DataFrame:
        """Rows of lines before what already went out (an author's sentence is kept or
        dropped only once the whole paste is read, after the bulk reader flushed the rows
        below it) go into the part that holds their place, so the table stays in log order
        as the line parser's single flush leaves it; the rest is returned. Rare (a paste
        with prose and telemetry), so a part rewritten here costs nothing in a server log."""
        last = self._last_line.get(table)
        if last is None or frame["line"].null_count():
            return frame
        late_mask = frame["line"] < last
        if not late_mask.any():
            return frame
        late, rest = frame.filter(late_mask), frame.filter(~late_mask)
        parts = self.parts[table]
        for i in range(len(parts)):
            part = parts[i]
            held = part if isinstance(part, pl.DataFrame) else pl.read_ipc(part)
            top = held["line"].max()
            mine = late if i == len(parts) - 1 else late.filter(pl.col("line") <= top)
            if not len(mine):
                continue
            late = late.filter(pl.col("line") > top) if i < len(parts) - 1 else late.clear()
            # An undated row between dated ones takes its year from the row before it, as
            # the stamp of one flush in log order gives it.
            merged = (
                pl.concat(
                    [
                        held.with_columns(pl.lit(False).alias("_late")),
                        mine.with_columns(pl.lit(True).alias("_late")),
                    ]
                )
                .sort("line", maintain_order=True)
                .with_columns(
                    [
                        pl.when(pl.col("_late") & pl.col("_month").is_null())
                        .then(None)
                        .otherwise(pl.col(c))
                        .forward_fill()
                        .fill_null(pl.col(c))
                        .alias(c)
                        for c in ("_off", "_yr")
                    ]
                )
                .drop("_late")
            )
            if isinstance(part, pl.DataFrame):
                parts[i] = merged
            else:
                merged.write_ipc(part, compression="lz4")
            if not len(late):
                break
        return rest

    def _keep(self, table: str, frame: pl.DataFrame) -> pl.DataFrame | Path:
        if self.directory is None:
            return frame
        if self._held >= 0:
            size = int(frame.estimated_size())
            if self._held + size <= (MEMORY_BYTES if self.memory is None else self.memory):
                self._held += size
                return frame
            self._spill()
        return self._file(table, frame)

    def _spill(self) -> None:
        """The frames held so far go to files, in their places: from here on every part
        is a file (memory holds none, however long the log goes on)."""
        for table, parts in self.parts.items():
            # In place: ``flush`` holds the list it appends the part being kept to.
            parts[:] = [self._file(table, p) if isinstance(p, pl.DataFrame) else p for p in parts]
        self._held = -1

    def _file(self, table: str, frame: pl.DataFrame) -> Path:
        assert self.directory is not None
        if not self._made:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._made = True
        path = self.directory / f"{table}-{self._files:06d}.arrow"
        self._files += 1
        frame.write_ipc(path, compression="lz4")
        return path

    @property
    def in_memory(self) -> bool:
        """No part of the stage went to a file."""
        return not self._made

    def lazy(self, table: str) -> pl.LazyFrame:
        parts = self.parts.get(table, [])
        empty = conform(pl.DataFrame(), table).lazy()
        frames = [p.lazy() if isinstance(p, pl.DataFrame) else pl.scan_ipc(p) for p in parts]
        return pl.concat([empty, *frames]) if frames else empty

    def close(self) -> None:
        if self._made and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
        self._made = False


def detach(parser: LineParser) -> None:
    """Records that left the parser may still be completed by a later line (a prefix-cache
    line after a stats line): what remains of them in the parser's memory becomes a
    ``BulkRow``, whose additions are kept as patches."""
    run = parser.run
    if run is None:
        return
    for key, (table, row) in list(run.last_record.items()):
        if not isinstance(row, BulkRow):
            run.last_record[key] = (table, BulkRow(line=row["line"], engine=row.get("engine")))


__all__ = ["INTERNAL_COLUMNS", "MEMORY_BYTES", "RECORD_TABLES", "Stage", "conform", "detach"]
