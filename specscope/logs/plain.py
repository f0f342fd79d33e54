"""What the bulk reader makes of a plain shape's groups (``specscope.logs.bulk``): typed
columns, the frame form of the derivations, and whether a record is clean enough to be
read in bulk at all.

A plain record the line parser would refuse (a per-position list over ``limits.max_k``,
more accepted than drafted tokens) is left to the line parser, which says why; so both
readers give the same rows and skipped lines.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np
import polars as pl
import pyarrow as pa

from specscope.logs.derive import drafts_from_tokens_column
from specscope.logs.runbook import SUM_SLACK as _SUM_SLACK


def clean_enough(groups: pl.Expr, names: Collection[str], max_k: int) -> pl.Expr:
    """True where a plain record's groups (a struct) hold a per-position list the line
    parser keeps: at most ``max_k`` entries. The plain shape prints each as ``d.ddd``
    with ``, `` between (so a list of k is 7k - 2 bytes long: no need to count them), no
    higher than 1, and counts of at most 15 digits; ``contradicts`` is the rest."""
    if "per_position_rate" not in names:
        return pl.lit(True)
    size = groups.struct.field("per_position_rate").str.len_bytes()
    return (size <= 7 * max_k - 2).fill_null(False)


def contradicts(records: pl.DataFrame) -> pl.Series | None:
    """The plain records the line parser must read itself: those whose counts contradict
    each other (more tokens accepted than drafted), which it refuses with its reason, and
    those where a process's k may change (``runbook.shape_of``), where it may start a run;
    ``None`` when none can."""
    bad = None
    if "accepted_tokens" in records.columns and "draft_tokens" in records.columns:
        bad = (records["accepted_tokens"] > records["draft_tokens"]).fill_null(False)
    shaped = reshaping(records)
    if shaped is not None:
        bad = shaped if bad is None else bad | shaped
    return bad


def reshaping(records: pl.DataFrame) -> pl.Series | None:
    """Spec records read in bulk must leave each process's k (``RunBook.reshape``) as it
    was: the first record of a process that shows its k in the block, one whose k differs
    from the process's record before it, and one that shows no k or follows one that did
    not, go to the line parser. The rest repeat a k the line parser has already seen."""
    if "per_position_rate" not in records.columns or "_key" not in records.columns:
        return None
    rates = pl.col("per_position_rate")
    k = rates.list.len()
    slack = _SUM_SLACK + 0.0005 * k
    mean = (
        pl.col("mean_acceptance_length")
        if "mean_acceptance_length" in records.columns
        else pl.lit(None, pl.Float64)
    )
    fits = mean.is_null() | ((1 + rates.list.sum() - mean).abs() <= slack)
    shown = pl.when(rates.is_not_null() & (k > 0) & fits).then(k)
    # Records without a list (V1's first form) show no k in either reader.
    spec = rates.is_not_null()
    if "_table" in records.columns:
        spec = spec & (pl.col("_table") == "spec_decode")
    frame = records.select(
        spec.alias("spec"), pl.col("_key").alias("key"), shown.alias("k")
    ).with_row_index("row")
    mine = frame.filter(pl.col("spec"))
    if mine.is_empty():
        return None
    before = pl.col("k").shift(1).over("key")
    first = pl.int_range(pl.len()).over("key") == 0
    flagged = mine.select(
        "row",
        (first | pl.col("k").is_null() | before.is_null() | (pl.col("k") != before))
        .fill_null(True)
        .alias("flag"),
    )
    out = np.zeros(len(records), bool)
    rows = flagged["row"].to_numpy()
    out[rows] = flagged["flag"].to_numpy()
    return pl.Series(out)


def convert(name: str, kind: str) -> pl.Expr:
    """A plain group's text as its column's type, as the line parser converts it."""
    c = pl.col(name)
    if name == "engine":
        return c.cast(pl.Int32)
    if kind == "int":
        return c.cast(pl.Int64)
    if kind == "float":
        return c.cast(pl.Float64)
    if kind == "percent":
        # As the line parser rounds: the printed digits over a power of ten.
        digits = c.str.replace(".", "", literal=True).cast(pl.Int64)
        scale = (c.str.len_bytes() - c.str.find(".", literal=True) - 1 + 2).cast(pl.Int64)
        return (digits / pl.lit(10.0).pow(scale)).alias(name)
    if kind == "float_list":
        return c.str.split(", ").cast(pl.List(pl.Float64))
    raise ValueError(f"plain shapes cannot carry a {kind} field ({name})")


def _spec_counts(rows: pl.DataFrame) -> pl.DataFrame:
    """The bulk form of ``derive.vllm_v1_spec_decode``: k from the list, drafts = draft
    tokens / k, per-position counts = printed rate times drafts (rounded half to even,
    as Python's round)."""
    if "per_position_rate" not in rows.columns:
        return rows
    rows = rows.with_columns(pl.col("per_position_rate").list.len().cast(pl.Int32).alias("k"))
    rows = rows.with_columns(drafts_from_tokens_column().alias("drafts"))
    rates = rows["per_position_rate"]
    lengths = rates.list.len().fill_null(0).to_numpy()
    values = rates.explode().to_numpy()
    drafts = np.repeat(rows["drafts"].fill_null(0).to_numpy(), lengths)
    counts = np.rint(values * drafts).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    arr = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(counts))
    per_pos = pl.Series("accepted_per_pos", arr).cast(pl.List(pl.Int64))
    return rows.with_columns(
        pl.when(pl.col("per_position_rate").is_not_null()).then(per_pos).alias("accepted_per_pos")
    )


FRAME_DERIVATIONS: dict[str, Callable[[pl.DataFrame], pl.DataFrame]] = {
    "vllm_v1_spec_decode": _spec_counts,
    "vllm_engine_stats": lambda rows: rows,
}

__all__ = ["FRAME_DERIVATIONS", "clean_enough", "contradicts", "convert"]
