"""Reading big logs in bulk: the lines that vLLM releases print, exactly as they print
them, are parsed by polars over whole blocks (Rust regex, no Python per line); every
other line goes through the line parser, which keeps the state that spans lines (runs,
processes, records wrapped over lines) for both.

A line is read in bulk only where the line parser would read it the same way on its
own: it starts with a plain log header (``(Proc pid=N) INFO MM-DD HH:MM:SS [f.py:N] ``),
holds a record in one of its definition's ``plain`` shapes or nothing the grammar looks
for, and comes while the parser holds nothing over and its process is the run's. The
rest (the first line of a process, wrapped, glued, coloured or prefixed lines, config,
events) is fed line by line. ``tests/test_bulk.py`` checks that both ways give the same
tables, on every fixture and on generated logs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import regex

from specscope.logs.blocks import BLOCK_LINES, Blank, lines_of, pieces
from specscope.logs.clean import ANSI
from specscope.logs.definitions import Definition, PlainShape
from specscope.logs.grammar import Envelope, Grammar
from specscope.logs.limits import LongLines, max_k, max_line_bytes, refresh
from specscope.logs.parser import LineParser, noted, parse_lines
from specscope.logs.plain import FRAME_DERIVATIONS, clean_enough, contradicts, convert
from specscope.logs.results import BulkRow, ParseResult
from specscope.logs.source import Source
from specscope.logs.staging import Stage, detach

BLOCK_BYTES = 3 << 20  # polars pays per call above, memory grows with it below

_LEVELS = "DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL"
# The vLLM logger's header as it prints it; anything looser is left to the line parser.
_HEAD = r"^\((?P<_proc>[A-Za-z][A-Za-z0-9_]{0,60}) pid=(?P<_pid>[0-9]{1,9})\) "
# The dated header up to the message, which must start with a non-space: the message is
# the rest of the line, cut off by length (capturing it would scan the whole line again).
_DATED = (
    r"(?P<_head>"
    + _HEAD
    + rf"(?P<_level>{_LEVELS}) (?P<_month>0[1-9]|1[0-2])-(?P<_day>0[1-9]|[12][0-9]|3[01]) "
    r"(?P<_time>(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]) \[[A-Za-z0-9_./-]{1,200}:[0-9]{1,6}\] "
    r")\S"
)
_UNDATED = _HEAD + r"(?P<_body>\S.*)$"
# What the line parser would clean away or read as more than one line's worth: colour,
# markdown, full-width punctuation, trailing space, a carriage return.
_WRAPPED = ("[\x1b\r`*<\uff1a\uff0c]", r"\s$")  # two searches: far faster than one
# Of the prefixes ``clean.clean_line`` peels, those the bulk reader peels too (the rest go
# to the line parser): a compose service name, a docker/kubectl/CRI timestamp (the year).
_PREFIX = (
    r"^(?:[A-Za-z0-9][\w.-]{0,80}\s*\|\s?)?"
    r"(?:(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"(?:\s+(?:stdout|stderr)\s+[FP])?\s+)?"
)
# A second header inside the message (records glued on one line).
_INNER_HEAD = rf"\(|\)|\[|\]|pid=|(?:{_LEVELS})\s+\d\d-\d\d"

SLOW, QUIET, ENVELOPE, RECORD = 0, 1, 2, 3
Progress = Callable[[int], None]  # told the bytes of text read so far


@dataclass(frozen=True)
class _Shape:
    definition: Definition
    shape: PlainShape
    prefix: str  # the literal start of the message, to skip the regex on other lines
    pattern: str
    names: frozenset[str]  # its groups


def _literal_prefix(pattern: str) -> str:
    out = []
    for ch in pattern:
        if ch in "\\()[]{}.*+?|^$":
            break
        out.append(ch)
    return "".join(out)


class BulkGrammar:
    """The grammar's plain shapes, and the literals that make a line worth a closer look."""

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.shapes = [
            _Shape(
                d,
                s,
                _literal_prefix(s.pattern),
                "^(?P<__m>)" + s.pattern + "$",
                frozenset(regex.findall(r"\(\?P<(\w+)>", s.pattern)),
            )
            for d in grammar.definitions
            for s in d.plain
        ]
        self.max_k = max_k()
        self.literals = list(grammar.literals)
        prefixes = sorted(grammar.literal_prefixes, key=len, reverse=True)
        self.ends_in_literal = (
            "(?:" + "|".join(_escape(p) for p in prefixes) + ")$" if prefixes else None
        )
        # Bulk reading needs every definition to be found by a literal (none always looked for).
        self.usable = (
            bool(self.shapes) and not grammar.always and all(e.literals for e in grammar.events)
        )


def _escape(text: str) -> str:
    return "".join("\\" + c if c in "\\.^$|?*+()[]{}-&~#" or c.isspace() else c for c in text)


def parse_source(
    source: Source,
    grammar: Grammar,
    stage: Stage,
    *,
    bulk: bool = True,
    block_bytes: int = BLOCK_BYTES,
    progress: Progress | None = None,
) -> ParseResult:
    """Parse a whole source into ``stage``: in bulk where the lines allow it (``bulk=True``),
    else (or for a source that is not UTF-8, or a pretty-printed JSON document) line by
    line. The result holds the runs, the skipped lines and the counts; the rows are in
    the stage."""
    refresh()
    plan = BulkGrammar(grammar)
    long = LongLines(max_line_bytes())
    if bulk and plan.usable and source.encoding() == "utf-8":
        blocks = source.blocks(block_bytes, long)
        first = next(blocks, b"")
        if first[: first.find(b"\n") if b"\n" in first else None].strip() != b"{":
            reader = _BulkReader(LineParser(grammar), plan, stage)
            base = 0
            # Two cores: polars prepares the next block while Python walks this one.
            done = 0
            with ThreadPoolExecutor(max_workers=1) as pool:
                ahead: tuple[Future[list[_Prepared | int]], bytes] | None = None
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
            return _noted(reader.finish(), long, source)
        long.lines.clear()  # read again, line by line
        long.unplaced.clear()
    result = parse_lines(source.lines(long), grammar)
    stage.flush(result.tables)
    return _noted(result, long, source)


def _walked(
    reader: _BulkReader,
    ahead: tuple[Future[list[_Prepared | int]], bytes],
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


@dataclass
class _Prepared:
    text: pl.Series
    frame: pl.DataFrame  # the log header's parts, per line
    kind: np.ndarray
    records: pl.DataFrame
    # What the walk reads by index, made beside the walk of the block before:
    dated: np.ndarray  # the line has a timestamp
    key_of: np.ndarray  # the line's process as a number (0: none)
    slow: np.ndarray  # the lines fed one by one, and their text
    slow_texts: list[str]
    positions: list[int]  # the records' lines (within the block)
    rec_table: list[str]
    rec_engine: list[Any]
    rec_format: list[str]


class _BulkReader:
    def __init__(self, parser: LineParser, plan: BulkGrammar, stage: Stage) -> None:
        self.parser = parser
        self.plan = plan
        self.stage = stage
        self.frames: dict[str, list[pl.DataFrame]] = {}  # this block's, until flushed

    # -- one block -------------------------------------------------------------------------

    def prepare(self, block: bytes) -> list[_Prepared | int]:
        """What can be known of a block before the parser reaches it (polars and numpy
        only, so that it runs in a thread beside the walk of the block before), in parts
        of at most ``BLOCK_LINES`` lines; of a run of blank lines, how many there are."""
        out: list[_Prepared | int] = []
        for part in pieces(block, BLOCK_LINES):
            prepared = part.lines if isinstance(part, Blank) else self._prepare(part)
            if prepared is not None:
                out.append(prepared)
        return out

    def _prepare(self, block: bytes) -> _Prepared | None:
        text = lines_of(block)
        if len(text) == 0:
            return None
        frame = self._classify(text)
        kind = frame["_kind"].to_numpy()
        records = self._records(frame)
        bad = contradicts(records) if len(records) else None
        if bad is not None and bad.any():  # the line parser says what is wrong with them
            kind = kind.copy()
            kind[records.filter(bad)["_i"].to_numpy()] = SLOW
            records = records.filter(~bad)
        # After a record the line parser holds it until the next line shows it ended, so a
        # line it would otherwise pass over is read then (offered to an open record, or
        # held as the start of a wrapped one): such lines go to the parser.
        after_record = np.zeros(len(text), bool)
        after_record[1:] = (kind[:-1] == RECORD) & (kind[1:] == QUIET)
        kind = np.where(after_record, SLOW, kind)
        frame = frame.select("_proc", "_pid", "_level", "_month", "_day", "_time", "_year")
        key_of = (
            frame.select(
                pl.concat_str([pl.col("_proc"), pl.col("_pid").cast(pl.String)], separator=" ")
                .rank("dense")
                .fill_null(0)
                .cast(pl.Int64)
            )
            .to_series()
            .to_numpy()
        )
        slow = np.flatnonzero(kind == SLOW)
        has = len(records) > 0
        return _Prepared(
            text,
            frame,
            kind,
            records,
            dated=frame["_month"].is_not_null().to_numpy(),
            key_of=key_of,
            slow=slow,
            slow_texts=text.gather(slow).to_list() if len(slow) else [],
            positions=records["_i"].to_list() if has else [],
            rec_table=records["_table"].to_list() if has else [],
            rec_engine=(records["engine"].to_list() if has and "engine" in records.columns else []),
            rec_format=records["format"].to_list() if has else [],
        )

    def walk(self, prepared: _Prepared | int, base: int) -> int:
        if isinstance(prepared, int):  # blank lines: nothing the parser holds changes
            self.parser.lines = max(self.parser.lines, base + prepared)
            return base + prepared
        self._walk(prepared, base)
        detach(self.parser)
        self.stage.flush(self.parser.tables, self.frames, keep_from=self.parser.open_line())
        self.frames = {}
        return base + len(prepared.text)

    def _classify(self, text: pl.Series) -> pl.DataFrame:
        plan = self.plan
        raw = pl.col("text")
        # What the line parser strips first (``clean.clean_line``): colour, then a container
        # timestamp or compose service name, the timestamp giving the year.
        coloured = raw.str.contains("\x1b", literal=True)
        t = pl.col("_clean")
        df = pl.DataFrame([text]).with_columns(
            pl.when(coloured).then(raw.str.replace_all(ANSI, "")).otherwise(raw).alias("_clean")
        )
        prefixed = ~t.str.starts_with("(")
        df = df.with_columns(
            pl.when(prefixed).then(t.str.replace(_PREFIX, "")).otherwise(t).alias("_clean"),
            pl.when(prefixed).then(t.str.extract(_PREFIX, 1)).cast(pl.Int64).alias("_year"),
        )
        candidate = t.str.starts_with("(") & t.str.contains("pid=", literal=True)
        for wrapped in _WRAPPED:
            candidate = candidate & ~t.str.contains(wrapped)
        candidate = candidate & ~raw.str.contains("\r", literal=True)
        cand_text = pl.when(candidate).then(t)
        df = df.with_columns(
            cand_text.str.extract_groups(_DATED).alias("_dated"),
            (
                ~raw.str.contains_any([*plan.literals, "pid="])
                & ~raw.str.starts_with("{")
                & ~raw.str.contains("\r", literal=True)
            ).alias("_no_literal"),
            (t.str.contains(plan.ends_in_literal) if plan.ends_in_literal else pl.lit(False)).alias(
                "_ends_in_literal"
            ),
            candidate.alias("_candidate"),
        )
        df = df.unnest("_dated").with_columns(
            pl.col("_clean").str.slice(pl.col("_head").str.len_chars()).alias("_body")
        )
        undated = pl.when(pl.col("_candidate") & pl.col("_body").is_null()).then(pl.col("_clean"))
        df = df.with_columns(undated.str.extract_groups(_UNDATED).alias("_undated"))
        df = df.with_columns(
            pl.coalesce("_proc", pl.col("_undated").struct.field("_proc")).alias("_proc"),
            pl.coalesce("_pid", pl.col("_undated").struct.field("_pid"))
            .cast(pl.Int64)
            .alias("_pid"),
            pl.coalesce("_body", pl.col("_undated").struct.field("_body")).alias("_body"),
        ).drop("_undated")
        body = pl.col("_body")
        # After the process name: what the line parser searches for literals and anchors.
        quiet_body = (
            ~body.str.contains_any([*plan.literals, "pid="])
            & ~body.str.contains(_INNER_HEAD)
            & ~body.str.contains(r"[0-9]$")
        )
        shape_cols = []
        for i, shape in enumerate(plan.shapes):
            hit = pl.when(body.str.starts_with(shape.prefix)).then(body)
            shape_cols.append(hit.str.extract_groups(shape.pattern).alias(f"_shape{i}"))
        df = df.with_columns(shape_cols)
        matched = [
            pl.col(f"_shape{i}").struct.field("__m").is_not_null()
            & clean_enough(pl.col(f"_shape{i}"), shape.names, plan.max_k)
            for i, shape in enumerate(plan.shapes)
        ]
        shape_index = pl.lit(None, pl.Int32)
        for i in reversed(range(len(plan.shapes))):
            shape_index = pl.when(matched[i]).then(pl.lit(i, pl.Int32)).otherwise(shape_index)
        ok_line = ~pl.col("_ends_in_literal")
        df = df.with_columns(shape_index.alias("_shape"))
        kind = (
            pl.when(body.is_not_null() & ok_line & pl.col("_shape").is_not_null())
            .then(pl.lit(RECORD, pl.Int8))
            .when(body.is_not_null() & ok_line & quiet_body)
            .then(pl.lit(ENVELOPE, pl.Int8))
            .when(pl.col("_no_literal") & ok_line)
            .then(pl.lit(QUIET, pl.Int8))
            .otherwise(pl.lit(SLOW, pl.Int8))
        )
        return df.with_columns(kind.alias("_kind"))

    def _records(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Every plain record of the block as a row of its table's columns (line numbers
        relative to the block), whether or not the walk ends up reading it in bulk."""
        out = []
        idx = frame.with_row_index("_i").filter(pl.col("_kind") == RECORD)
        for i, shape in enumerate(self.plan.shapes):
            rows = idx.filter(pl.col("_shape") == i)
            if rows.is_empty():
                continue
            d = shape.definition
            fields = (
                rows.select(
                    "_i", "_proc", "_pid", "_month", "_day", "_time", "_year", pl.col(f"_shape{i}")
                )
                .unnest(f"_shape{i}")
                .drop("__m")
            )
            types = {f.column: f.type for f in d.fields.values()}
            conv = []
            for name in fields.columns:
                if name.startswith("_"):
                    continue
                conv.append(convert(name, types.get(name, "int")))
            fields = fields.with_columns(conv)
            fields = fields.with_columns(
                pl.lit(d.name).alias("format"),
                pl.lit(d.table or d.name).alias("_table"),
                *(pl.lit(v).alias(k) for k, v in shape.shape.set.items()),
            )
            for derivation in d.derive.values():
                fields = FRAME_DERIVATIONS[derivation](fields)
            out.append(fields)
        if not out:
            return pl.DataFrame()
        return pl.concat(out, how="diagonal_relaxed").sort("_i")

    # -- the walk: bulk stretches and lines fed one by one ---------------------------------

    def _walk(self, p: _Prepared, base: int) -> None:
        walk = _Walk(self, p, base)
        kind, records = p.kind, p.records
        start = 0
        for j, line_text in zip(p.slow.tolist(), p.slow_texts, strict=True):
            if start < j:
                walk.stretch(start, j)
            walk.feed(j, line_text)
            start = j + 1
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
        key = ["_stretch", "_proc", "_pid"]
        taken = taken.with_columns(
            pl.col("_table").shift(1).over(key).alias("_prev_table"),
            pl.col("engine").shift(1).over(key).alias("_prev_engine"),
            (pl.col("_i").shift(1).over(key) + base + 1).alias("_prev_line"),
        )
        seed = pl.DataFrame(
            walk.seeds,
            schema={
                "_stretch": pl.Int64,
                "_proc": pl.String,
                "_pid": pl.Int64,
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
        taken = taken.with_columns(
            (pl.col("_i") + base + 1).alias("line"),
            (pl.col("_i") + base + 1).alias("end_line"),
            pl.when(pl.col("_table") == "spec_decode")
            .then(pl.when(after_stats).then(pl.col("_prev_engine")))
            .otherwise(pl.col("engine"))
            .alias("engine"),
            pl.when((pl.col("_table") == "spec_decode") & after_stats)
            .then(pl.col("_prev_line"))
            .alias("stats_line"),
        )
        for (table,), rows in taken.partition_by("_table", as_dict=True).items():
            scratch = {"_i", "_stretch", "_table", "_proc", "_pid"}
            if table != "spec_decode":
                scratch.add("stats_line")
            rows = rows.select(
                c for c in rows.columns if c not in scratch and not c.startswith(("_prev", "_seed"))
            )
            self.frames.setdefault(str(table), []).append(rows)

    def finish(self) -> ParseResult:
        result = self.parser.finish()
        self.stage.flush(result.tables, self.frames)
        return result


class _Walk:
    """One block's walk: stretches of plain lines read in bulk, the other lines fed."""

    def __init__(self, reader: _BulkReader, p: _Prepared, base: int) -> None:
        self.parser = reader.parser
        self.text, self.kind, self.base = p.text, p.kind, base
        frame, kind = p.frame, p.kind
        self.has_env = kind >= ENVELOPE
        # The header's parts are read for a few lines per stretch: by index, not as lists.
        self.header = frame
        self.dated = p.dated
        self.filled: np.ndarray | None = None  # the lines that are not blank, when asked
        n = len(kind)
        self.run_of = np.zeros(n, np.int64)  # the run a bulk record went to (0: fed)
        self.stretch_of = np.full(n, -1, np.int64)
        self.seeds: list[tuple[int, str, int, str, Any, Any]] = []
        self.stretches = 0
        positions = p.positions
        self.rec_pos = {i: j for j, i in enumerate(positions)}
        # Per line: its process as a number, and its record's table as a number.
        self.key_of = p.key_of
        table_list = p.rec_table
        self.table_names = sorted(set(table_list))
        self.table_of = np.zeros(len(kind), np.int64)
        if positions:
            codes = {t: c for c, t in enumerate(self.table_names)}
            self.table_of[np.asarray(positions)] = [codes[t] for t in table_list]
        self.rec_table = table_list
        self.rec_engine = p.rec_engine or [None] * len(positions)
        servers = {s.definition.name: s.definition.engine for s in reader.plan.shapes}
        self.rec_server = [servers.get(f) for f in p.rec_format]

    def _process(self, i: int) -> tuple[str, int]:
        return self.header["_proc"][i], self.header["_pid"][i]

    def feed(self, i: int, line_text: str) -> None:
        self.parser.feed(self.base + i + 1, line_text)

    def _feed_one(self, i: int, b: int) -> int:
        """Feed line ``i`` (and after it the blank lines it starts, at once: they change
        nothing the parser holds, and a record held open by them would cost a feed per
        line). Returns the next line to feed."""
        text = self.text[i]
        if not text or text.isspace():
            return self._pass_blank(i, b)
        self.feed(i, text)
        if i + 1 < b and self.has_env[i + 1]:
            self.parser.close_record()
        return i + 1

    def _pass_blank(self, a: int, b: int) -> int:
        if self.filled is None:  # the lines that are not blank (a blank one was met)
            self.filled = np.flatnonzero(self.text.str.contains(r"\S").fill_null(True).to_numpy())
        at = int(np.searchsorted(self.filled, a + 1))  # line a is blank (Python's view)
        c = min(int(self.filled[at]) if at < len(self.filled) else b, b)
        self.parser.lines = max(self.parser.lines, self.base + c)
        if c < b and self.has_env[c]:
            self.parser.close_record()
        return c

    def stretch(self, a: int, b: int) -> None:
        """Lines ``a`` to ``b`` (exclusive), none of which the parser must see by itself."""
        parser = self.parser
        # A record that ends a stretch is fed: the line after it meets it held (it may
        # continue it, or be held itself), as it would reading line by line.
        tail = bool(self.kind[b - 1] == RECORD)
        if tail:
            b -= 1
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
        if tail:
            self._feed_one(b, b + 1)

    def _bulk(self, a: int, b: int) -> None:
        parser = self.parser
        env_idx = np.flatnonzero(self.has_env[a:b]) + a
        if not len(env_idx):  # lines the parser would pass over (nothing it looks for)
            parser.lines = max(parser.lines, self.base + b)
            return
        run = parser.run
        assert run is not None
        rec_idx = np.flatnonzero(self.kind[a:b] == RECORD) + a
        sid = self.stretches
        self.stretches += 1
        counts: dict[str, int] = {}
        last: dict[tuple[Any, Any], tuple[str, Any]] = {}
        server = None
        if len(rec_idx):
            tables = self.table_of[rec_idx]
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
                        (sid, key[0], key[1], before[0], before[1].get("engine"), before[1]["line"])
                    )
                p = self.rec_pos[j]
                last[key] = (
                    self.rec_table[p],
                    BulkRow(line=self.base + j + 1, engine=self.rec_engine[p]),
                )
            server = self.rec_server[self.rec_pos[int(rec_idx[0])]]
        last_seen = None
        dated = env_idx[self.dated[env_idx]]
        if len(dated):
            proc, pid, level, month, day, clock, year = self.header.row(int(dated[-1]))
            last_seen = Envelope(
                proc=proc,
                pid=pid,
                level=level,
                month=int(month),
                day=int(day),
                time=clock,
                year=year,
            )
        ordinal = parser.take_bulk(
            last_line=self.base + b,
            envelope_line=self.base + int(env_idx[-1]) + 1,
            last_seen=last_seen,
            counts=counts,
            last_records=last,
            server=server,
        )
        self.run_of[rec_idx] = ordinal
        self.stretch_of[rec_idx] = sid
