"""The bulk reader's classifier when the compiled core (``specscope._core``) is missing:
polars over whole blocks (Rust regex, no Python per line), as before issue 17. It stays
the reference the compiled scanner is held to (``tests/test_core.py``)."""

from __future__ import annotations

import numpy as np
import polars as pl

from specscope.logs.blocks import lines_of
from specscope.logs.bulkplan import (
    DATED,
    ENVELOPE,
    INNER_HEAD,
    PREFIX,
    QUIET,
    RECORD,
    SLOW,
    UNDATED,
    WRAPPED,
    BulkGrammar,
    Prepared,
    prepared,
    typed_records,
)
from specscope.logs.clean import ANSI
from specscope.logs.grammar import Envelope
from specscope.logs.plain import clean_enough
from specscope.logs.staging import clock_seconds_expr


class SeriesLines:
    """A block's lines as a polars string column."""

    def __init__(self, text: pl.Series) -> None:
        self.text = text

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, i: int) -> str:
        return str(self.text[i])

    def filled(self) -> np.ndarray:
        return np.flatnonzero(self.text.str.contains(r"\S").fill_null(True).to_numpy())

    def opens(self) -> np.ndarray:
        # OPENS in Rust's regex syntax, anchored ('\r?$' as the line's end: a line here has
        # no newline).
        opened = self.text.str.contains(r"^[ \t]*(?:>[ \t]?)*[ \t]*(?:\{|\[[ \t]*(?:\{|\r?$))")
        return np.flatnonzero(opened.fill_null(False).to_numpy())


def prepare_block(plan: BulkGrammar, block: bytes) -> Prepared | None:
    text = lines_of(block)
    if len(text) == 0:
        return None
    frame = classify(plan, text)
    kind = frame["_kind"].to_numpy()
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
    records = _records(plan, frame.with_columns(pl.Series("_key", key_of)))
    header = frame.select("_proc", "_pid", "_level", "_month", "_day", "_time", "_year")

    def process(i: int) -> tuple[str, int]:
        return header["_proc"][i], header["_pid"][i]

    def envelope(i: int) -> Envelope:
        proc, pid, level, month, day, clock, year = header.row(i)
        return Envelope(
            proc=proc, pid=pid, level=level, month=int(month), day=int(day), time=clock, year=year
        )

    return prepared(
        SeriesLines(text),
        kind,
        records,
        dated=header["_month"].is_not_null().to_numpy(),
        key_of=key_of,
        process=process,
        envelope=envelope,
    )


# How many times a line's prefixes are peeled (`PEELS` of rust/src/scan.rs).
PEELS = 3


def classify(plan: BulkGrammar, text: pl.Series) -> pl.DataFrame:
    raw = pl.col("text")
    # What the line parser strips first (``clean.clean_line``): colour, then a container
    # timestamp or compose service name, the timestamp giving the year.
    coloured = raw.str.contains("\x1b", literal=True)
    t = pl.col("_clean")
    df = pl.DataFrame([text]).with_columns(
        pl.when(coloured).then(raw.str.replace_all(ANSI, "")).otherwise(raw).alias("_clean")
    )
    # Prefixes stack (`docker logs -t` of a log a container stamped already): peeled as
    # the core peels them, each peel a compose name and a stamp (two of the line parser's
    # six decorations), the first stamp's year kept.
    df = df.with_columns(pl.lit(None, pl.String).alias("_y"), pl.lit(False).alias("_odd_year"))
    for _ in range(PEELS):
        prefixed = ~t.str.starts_with("(")
        year = pl.when(prefixed).then(t.str.extract(PREFIX, 1))
        df = df.with_columns(
            pl.when(prefixed).then(t.str.replace(PREFIX, "")).otherwise(t).alias("_clean"),
            pl.coalesce(pl.col("_y"), year).alias("_y"),
            # A year in digits that are not ASCII: the line parser reads it (Python's int does).
            (
                pl.col("_odd_year")
                | (year.is_not_null() & year.cast(pl.Int64, strict=False).is_null())
            ).alias("_odd_year"),
        )
    df = df.with_columns(pl.col("_y").cast(pl.Int64, strict=False).alias("_year")).drop("_y")
    candidate = t.str.starts_with("(") & t.str.contains("pid=", literal=True) & ~pl.col("_odd_year")
    for wrapped in WRAPPED:
        candidate = candidate & ~t.str.contains(wrapped)
    candidate = candidate & ~raw.str.contains("\r", literal=True)
    cand_text = pl.when(candidate).then(t)
    df = df.with_columns(
        cand_text.str.extract_groups(DATED).alias("_dated"),
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
    df = df.with_columns(undated.str.extract_groups(UNDATED).alias("_undated"))
    df = df.with_columns(
        pl.coalesce("_proc", pl.col("_undated").struct.field("_proc")).alias("_proc"),
        pl.coalesce("_pid", pl.col("_undated").struct.field("_pid")).cast(pl.Int64).alias("_pid"),
        pl.coalesce("_body", pl.col("_undated").struct.field("_body")).alias("_body"),
    ).drop("_undated")
    body = pl.col("_body")
    # After the process name: what the line parser searches for literals and anchors.
    quiet_body = (
        ~body.str.contains_any([*plan.literals, "pid="])
        & ~body.str.contains(INNER_HEAD)
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


def _records(plan: BulkGrammar, frame: pl.DataFrame) -> pl.DataFrame:
    """Every plain record of the block as a row of its table's columns (line numbers
    relative to the block), whether or not the walk ends up reading it in bulk."""
    out = []
    idx = frame.with_row_index("_i").filter(pl.col("_kind") == RECORD)
    for i in range(len(plan.shapes)):
        rows = idx.filter(pl.col("_shape") == i)
        if rows.is_empty():
            continue
        fields = (
            rows.select(
                pl.col("_i").cast(pl.Int64),
                "_key",
                "_month",
                "_day",
                clock_seconds_expr(pl.col("_time")),
                "_year",
                pl.col(f"_shape{i}"),
            )
            .unnest(f"_shape{i}")
            .drop("__m")
        )
        out.append(typed_records(plan, i, fields))
    if not out:
        return pl.DataFrame()
    return pl.concat(out, how="diagonal_relaxed").sort("_i")


__all__ = ["SeriesLines", "classify", "prepare_block"]
