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
    """The plain records whose counts contradict each other (more tokens accepted than
    drafted), which the line parser refuses with its reason; ``None`` when none can."""
    if "accepted_tokens" not in records.columns or "draft_tokens" not in records.columns:
        return None
    return (records["accepted_tokens"] > records["draft_tokens"]).fill_null(False)


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
