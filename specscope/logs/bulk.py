"""Reading big logs in bulk: the lines that vLLM releases print, exactly as they print
them, are found and cut over whole blocks (the compiled scanner, or polars' Rust regex:
no Python per line); every other line goes through the line parser, which keeps the
state that spans lines (runs, processes, records wrapped over lines) for both.

A line is read in bulk only where the line parser would read it the same way on its
own: it starts with a plain log header (``(Proc pid=N) INFO MM-DD HH:MM:SS [f.py:N] ``),
holds a record in one of its definition's ``plain`` shapes or nothing the grammar looks
for, and comes while the parser holds nothing over and its process is the run's. The
rest (the first line of a process, wrapped, glued, coloured or prefixed lines, config,
events) is fed line by line. ``tests/test_bulk.py`` checks that both ways give the same
tables, on every fixture and on generated logs.

Blocks are classified by the compiled scanner (``specscope.logs.core``, Rust) when the
package was built with it, else by polars (``specscope.logs.bulk_polars``); the result
says which (``ParseResult.scanner``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import polars as pl

from specscope.logs import bulk_polars, core
from specscope.logs.blocks import BLOCK_LINES, Blank, pieces
from specscope.logs.bulkplan import ENVELOPE, QUIET, RECORD, REST, BulkGrammar, Prepared, plan_for
from specscope.logs.grammar import Grammar
from specscope.logs.limits import LongLines, max_line_bytes, refresh
from specscope.logs.parser import LineParser, noted, parse_lines
from specscope.logs.results import BulkRow, ParseResult
from specscope.logs.source import Source
from specscope.logs.staging import Stage, detach

# polars pays per call above, memory grows with it below (22 MB per MB of block). The
# compiled scanner's blocks are the same size: peak RSS on 100 MB of server log was 252,
# 282 and 348 MB with 3, 6 and 10 MB blocks (the typed records and the stage's frames of
# two blocks in flight), for no reliable gain in time. Its reader also cuts a block at
# ``BLOCK_LINES`` lines (a block of blank lines costs ``pieces`` 8 bytes a line).
BLOCK_BYTES = 3 << 20
CORE_BLOCK_BYTES = BLOCK_BYTES
Progress = Callable[[int], None]  # told the bytes of text read so far


def parse_source(
    source: Source,
    grammar: Grammar,
    stage: Stage,
    *,
    bulk: bool = True,
    block_bytes: int | None = None,
    progress: Progress | None = None,
    compiled: bool = True,
) -> ParseResult:
    """Parse a whole source into ``stage``: in bulk where the lines allow it (``bulk=True``),
    else (or for a source that is not UTF-8, or a pretty-printed JSON document) line by
    line. The result holds the runs, the skipped lines and the counts; the rows are in
    the stage. Blocks are classified by the compiled scanner when it is there and
    ``compiled`` (else by polars)."""
    refresh()
    plan = plan_for(grammar)
    long = LongLines(max_line_bytes())
    if bulk and plan.usable and source.encoding() == "utf-8":
        # SPECSCOPE_CORE=0: the polars classifier (to compare, or should the core misread).
        compiled = compiled and core.available() and os.environ.get("SPECSCOPE_CORE") != "0"
        size = block_bytes or (CORE_BLOCK_BYTES if compiled else BLOCK_BYTES)
        blocks = (core.blocks(source, size, long) if compiled else None) or source.blocks(
            size, long
        )
        first = next(blocks, b"")
        if first[: first.find(b"\n") if b"\n" in first else None].strip() != b"{":
            scanner = core.scanner(plan) if compiled else None
            reader = _BulkReader(LineParser(grammar), plan, stage, scanner)
            base = 0
            # Two cores: the next block is prepared (in Rust without the GIL, or by polars)
            # while Python walks this one.
            done = 0
            with ThreadPoolExecutor(max_workers=1) as pool:
                ahead: tuple[Future[list[Prepared | int]], bytes] | None = None
                for block in _chain(first, blocks):
                    following = (pool.submit(reader.prepare, block), block)
                    if ahead is not None:
                        base = _walked(reader, ahead, done, base, long)
                        done += len(ahead[1])
                        if progress is not None:
                            progress(done)
                    ahead = following
                if ahead is not None:
                    base = _walked(reader, ahead, done, base, long)
                    if progress is not None:
                        progress(done + len(ahead[1]))
            long.place(None, done, base)
            result = reader.finish()
            result.scanner = "core" if compiled else "polars"
            return _noted(result, long, source)
        long.lines.clear()  # read again, line by line
        long.unplaced.clear()
    result = parse_lines(source.lines(long), grammar)
    stage.flush(result.tables)
    return _noted(result, long, source)


def _walked(
    reader: _BulkReader,
    ahead: tuple[Future[list[Prepared | int]], bytes],
    offset: int,
    base: int,
    long: LongLines,
) -> int:
    """Walk a prepared block (``offset`` bytes into the text, after ``base`` lines), and
    number the lines over the limit that it holds."""
    prepared, block = ahead[0].result(), ahead[1]
    if long.unplaced:
        long.place(block, offset, base)
    for part in prepared:
        base = reader.walk(part, base)
    return base


def _noted(result: ParseResult, long: LongLines, source: Source) -> ParseResult:
    """The lines over the line limit as skipped lines, and the first few as notes."""
    source.notes.extend(long.notes())
    return noted(result, long)


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


class _BulkReader:
    def __init__(self, parser: LineParser, plan: BulkGrammar, stage: Stage, scanner: Any) -> None:
        self.parser = parser
        self.plan = plan
        self.stage = stage
        self.scanner = scanner  # the compiled one, or None: polars
        self.servers = {s.definition.name: s.definition.engine for s in plan.shapes}
        self.frames: dict[str, list[pl.DataFrame]] = {}  # this block's, until flushed

    # -- one block -------------------------------------------------------------------------

    def prepare(self, block: bytes) -> list[Prepared | int]:
        """What can be known of a block before the parser reaches it (Rust, polars and
        numpy only, so that it runs in a thread beside the walk of the block before), in
        parts of at most ``BLOCK_LINES`` lines; of a run of blank lines, how many there are."""
        out: list[Prepared | int] = []
        for part in pieces(block, BLOCK_LINES):
            if isinstance(part, Blank):
                out.append(part.lines)
                continue
            if self.scanner is not None:
                prepared = core.prepare_block(self.scanner, self.plan, part)
            else:
                prepared = bulk_polars.prepare_block(self.plan, part)
            if prepared is not None:
                out.append(prepared)
        return out

    def walk(self, prepared: Prepared | int, base: int) -> int:
        if isinstance(prepared, int):  # blank lines: they end a block, nothing else held
            self.parser.blank()
            self.parser.lines = max(self.parser.lines, base + prepared)
            return base + prepared
        self._walk(prepared, base)
        detach(self.parser)
        self.parser.read_elsewhere(self.parser.tables, self.frames)
        self.stage.flush(self.parser.tables, self.frames, keep_from=self.parser.open_line())
        self.frames = {}
        return base + len(prepared.lines)

    # -- the walk: bulk stretches and lines fed one by one ---------------------------------

    def _walk(self, p: Prepared, base: int) -> None:
        walk = _Walk(self, p, base)
        kind, records = p.kind, p.records
        start = 0
        for j, line_text in zip(p.slow.tolist(), p.slow_texts, strict=True):
            # A line of nothing the parser looks for just before one it reads is fed as
            # the line parser feeds it: an author's sentence may start there, wrapped onto
            # the line with its words (ClaimWatch.before).
            before = j - 1 if start < j and kind[j - 1] == QUIET else j
            if start < before:
                walk.stretch(start, before)
            if before < j:
                walk.feed(before, walk.text[before])
            walk.feed(j, line_text)
            start = j + 1
            # As ``_feed_one``: a record held after a glued or wrapped line ends at the next
            # line's header, so that line (an access line, as a rule) is read in bulk.
            if start < len(kind) and walk.has_env[start]:
                self.parser.close_record()
        if start < len(kind):
            walk.stretch(start, len(kind))
        if len(records):
            self._keep(records, walk)

    def _keep(self, records: pl.DataFrame, walk: _Walk) -> None:
        base = walk.base
        i = records["_i"].to_numpy()
        taken = records.with_columns(
            pl.Series("_run", walk.run_of[i]), pl.Series("_stretch", walk.stretch_of[i])
        ).filter(pl.col("_run") > 0)
        if taken.is_empty():
            return
        if "engine" not in taken.columns:
            taken = taken.with_columns(pl.lit(None, pl.Int32).alias("engine"))
        # The record before each one of the same process in the same stretch; the first of
        # a stretch looks at what the parser had (the seed).
        key = ["_stretch", "_key"]
        taken = taken.with_columns(
            pl.col("_table").shift(1).over(key).alias("_prev_table"),
            pl.col("engine").shift(1).over(key).alias("_prev_engine"),
            (pl.col("_i").shift(1).over(key) + base + 1).alias("_prev_line"),
        )
        seed = pl.DataFrame(
            walk.seeds,
            schema={
                "_stretch": pl.Int64,
                "_key": pl.Int64,
                "_seed_table": pl.String,
                "_seed_engine": pl.Int32,
                "_seed_line": pl.Int64,
            },
            orient="row",
        )
        taken = taken.join(seed, on=key, how="left", maintain_order="left")
        first = pl.col("_prev_line").is_null()
        taken = taken.with_columns(
            pl.when(first)
            .then(pl.col(f"_seed_{c}"))
            .otherwise(pl.col(f"_prev_{c}"))
            .alias(f"_prev_{c}")
            for c in ("table", "engine", "line")
        )
        after_stats = pl.col("_prev_table") == "engine_stats"
        wrapped = pl.col("_n") if "_n" in taken.columns else pl.lit(0, pl.Int64)
        taken = taken.with_columns(
            (pl.col("_i") + base + 1).alias("line"),
            (pl.col("_i") + base + 1 + wrapped).alias("end_line"),
            pl.when(pl.col("_table") == "spec_decode")
            .then(pl.when(after_stats).then(pl.col("_prev_engine")))
            .otherwise(pl.col("engine"))
            .alias("engine"),
            pl.when((pl.col("_table") == "spec_decode") & after_stats)
            .then(pl.col("_prev_line"))
            .alias("stats_line"),
        )
        for (table,), rows in taken.partition_by("_table", as_dict=True).items():
            scratch = {"_i", "_n", "_stretch", "_table", "_key"}
            if table != "spec_decode":
                scratch.add("stats_line")
            rows = rows.select(
                c for c in rows.columns if c not in scratch and not c.startswith(("_prev", "_seed"))
            )
            self.frames.setdefault(str(table), []).append(rows)

    def finish(self) -> ParseResult:
        self.parser.read_elsewhere({}, self.frames)
        result = self.parser.finish()
        self.stage.flush(result.tables, self.frames)
        return result


class _Walk:
    """One block's walk: stretches of plain lines read in bulk, the other lines fed."""

    def __init__(self, reader: _BulkReader, p: Prepared, base: int) -> None:
        self.parser = reader.parser
        self.text, self.kind, self.base = p.lines, p.kind, base
        kind = p.kind
        self.has_env = kind >= ENVELOPE
        # The header's parts are read for a few lines per stretch: by index, not as lists.
        self._process = p.process
        self.envelope = p.envelope
        self.dated = p.dated
        self.filled: np.ndarray | None = None  # the lines that are not blank, when asked
        n = len(kind)
        self.run_of = np.zeros(n, np.int64)  # the run a bulk record went to (0: fed)
        self.stretch_of = np.full(n, -1, np.int64)
        self.seeds: list[tuple[int, int, str, Any, Any]] = []
        self.stretches = 0
        # Per line: its process as a number; per record: its line and its table's code.
        self.key_of = p.key_of
        self.positions = p.positions
        self.table_names = p.table_names
        self.rec_table = p.rec_table
        self.records = p.records
        # Per record: the lines after its own that it goes on over (wrapped, read by the core).
        self.rec_more = p.records["_n"].to_numpy() if "_n" in p.records.columns else None
        self.servers = reader.servers

    def _engine(self, row: int) -> Any:
        if "engine" not in self.records.columns:
            return None
        return self.records["engine"][row]

    def feed(self, i: int, line_text: str) -> None:
        self.parser.feed(self.base + i + 1, line_text)

    def _feed_one(self, i: int, b: int) -> int:
        """Feed line ``i`` (and after it the blank lines it starts, at once: they end a
        block and change nothing else the parser holds, and a record held open by them
        would cost a feed per line). Returns the next line to feed."""
        text = self.text[i]
        if not text or text.isspace():
            return self._pass_blank(i, b)
        self.feed(i, text)
        if i + 1 < b and self.has_env[i + 1]:
            self.parser.close_record()
        return i + 1

    def _pass_blank(self, a: int, b: int) -> int:
        if self.filled is None:  # the lines that are not blank (a blank one was met)
            self.filled = self.text.filled()
        at = int(np.searchsorted(self.filled, a + 1))  # line a is blank (Python's view)
        c = min(int(self.filled[at]) if at < len(self.filled) else b, b)
        self.parser.blank()
        self.parser.lines = max(self.parser.lines, self.base + c)
        if c < b and self.has_env[c]:
            self.parser.close_record()
        return c

    def stretch(self, a: int, b: int) -> None:
        """Lines ``a`` to ``b`` (exclusive), none of which the parser must see by itself."""
        parser = self.parser
        # A record that ends a stretch is fed: the line after it meets it held (it may
        # continue it, or be held itself), as it would reading line by line. A record
        # wrapped over two lines is fed as both.
        end = b
        tail = int(self.kind[b - 1] == RECORD) or 2 * int(self.kind[b - 1] == REST)
        b -= tail
        while a < b:
            while a < b and not parser.quiet:
                a = self._feed_one(a, b)
            if a >= b:
                break
            # The first line of a process that is not the run's own is fed: it may start a run.
            j = b
            env_idx = np.flatnonzero(self.has_env[a:b]) + a
            _, first = np.unique(self.key_of[env_idx], return_index=True)
            for i in sorted(env_idx[first].tolist()):
                if not parser.steady(*self._process(i)):
                    j = i
                    break
            if j > a:
                self._bulk(a, j)
            if j < b:
                self._feed_one(j, b)
            a = j + 1
        for i in range(b, end):
            self._feed_one(i, end)

    def _bulk(self, a: int, b: int) -> None:
        parser = self.parser
        env_idx = np.flatnonzero(self.has_env[a:b]) + a
        if not len(env_idx):  # lines the parser would pass over (nothing it looks for)
            parser.lines = max(parser.lines, self.base + b)
            return
        run = parser.run
        assert run is not None
        # The stretch's records (a line of two glued holds two), as rows of the block's.
        lo, hi = np.searchsorted(self.positions, [a, b]).tolist()
        rec_idx = self.positions[lo:hi]
        sid = self.stretches
        self.stretches += 1
        counts: dict[str, int] = {}
        last: dict[tuple[Any, Any], tuple[str, Any]] = {}
        server = None
        if len(rec_idx):
            tables = self.rec_table[lo:hi]
            for code, n in enumerate(np.bincount(tables, minlength=len(self.table_names))):
                if n:
                    counts[self.table_names[code]] = int(n)
            # Per process: its first record looks at what the parser had; its last is kept.
            keys = self.key_of[rec_idx]
            _, firsts = np.unique(keys, return_index=True)
            _, from_end = np.unique(keys[::-1], return_index=True)
            lasts = len(keys) - 1 - from_end
            for first, final in zip(firsts.tolist(), lasts.tolist(), strict=True):
                i, j = int(rec_idx[first]), int(rec_idx[final])
                key = self._process(i)
                before = run.last_record.get(key)
                if before is not None:
                    self.seeds.append(
                        (
                            sid,
                            int(keys[first]),
                            before[0],
                            before[1].get("engine"),
                            before[1]["line"],
                        )
                    )
                last[key] = (
                    self.table_names[int(tables[final])],
                    BulkRow(line=self.base + j + 1, engine=self._engine(lo + final)),
                )
            server = self.servers.get(self.records["format"][lo])
        last_seen = None
        dated = env_idx[self.dated[env_idx]]
        if len(dated):
            last_seen = self.envelope(int(dated[-1]))
        # The run goes on to the end of its last record (``Origin.end_line``): the rest's
        # line of one wrapped over two.
        end_env = int(env_idx[-1])
        end_env += int(end_env + 1 < len(self.kind) and self.kind[end_env + 1] == REST)
        ordinal = parser.take_bulk(
            last_line=self.base + b,
            envelope_line=self.base + end_env + 1,
            last_seen=last_seen,
            counts=counts,
            last_records=last,
            server=server,
        )
        if self.rec_more is not None:  # the line parser counts each line of a record
            parser.telemetry_lines += int(self.rec_more[lo:hi].sum())
        self.run_of[rec_idx] = ordinal
        self.stretch_of[rec_idx] = sid
