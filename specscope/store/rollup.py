"""Each run's acceptance sums, kept beside the spec-decode rows they sum.

``detect`` and ``report`` need every run's weighted acceptance. Summed from the rows, that
means reading and exploding every per-position list of the store (150 M values for 12 M
rows: seconds). Whoever writes spec-decode rows writes, in the same ingest and partition,
a ``run_sums`` row per run with the sums of exactly those rows (``acceptance.sums`` and
``k_counts``); sums add up, so the store's rollups together give what the rows give. A
store with spec-decode files that have no rollup beside them (written before rollups
were) is summed from its rows.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from specscope.acceptance import (
    Folded,
    add_k_counts,
    add_positions,
    add_totals,
    assemble,
    k_counts,
    sums,
)
from specscope.schema import empty_table, polars_schema

__all__ = ["RunSums", "per_run"]

_KEYS = ["run_id"]
# The totals columns of ``acceptance.sums``, typed as the table stores them.
_TOTALS = pl.Schema(
    {
        name: dtype
        for name, dtype in polars_schema("run_sums").items()
        if name != "run_id" and not name.startswith(("position_", "k_"))
    }
)


class RunSums:
    """The sums of one source's spec-decode rows, added a part at a time as they are
    written; ``table`` is the ``run_sums`` rows. ``key``: the column that tells runs apart
    in the parts (``run_id``, or ingest's run ordinal before run ids are made)."""

    def __init__(self, key: str = "run_id") -> None:
        self.key = [key]
        self.totals = Folded(lambda f: add_totals(f, self.key))
        self.positions = Folded(lambda f: add_positions(f, self.key))
        self.ks = Folded(lambda f: add_k_counts(f, self.key))

    def add(self, part: pl.DataFrame) -> None:
        lf = part.lazy()
        totals, positions, ks = pl.collect_all([*sums(lf, self.key), k_counts(lf, self.key)])
        self.totals.add(totals.cast(_TOTALS))
        self.positions.add(positions)
        self.ks.add(ks)

    def merge(self, other: RunSums) -> None:
        for mine, theirs in (
            (self.totals, other.totals),
            (self.positions, other.positions),
            (self.ks, other.ks),
        ):
            if theirs.parts:
                mine.add(theirs.total())

    def table(self, schema: pa.Schema, run_id: pl.Expr | None = None) -> pa.Table:
        """The ``run_sums`` rows; ``run_id``: how to make the run id from ``key``."""
        run_id = pl.col(self.key[0]) if run_id is None else run_id
        totals = self.totals.total()
        if totals.is_empty():
            return empty_table(schema)
        positions = self.positions.total()
        lists = (
            positions.sort([*self.key, "position"])
            .group_by(self.key, maintain_order=True)
            .agg(
                pl.col("count").alias("position_counts"),
                pl.col("drafts").alias("position_drafts"),
            )
            if not positions.is_empty()
            else None
        )
        ks = self.ks.total()
        kept = (
            ks.group_by(self.key, maintain_order=True).agg(
                pl.col("k").alias("k_values"), pl.col("n").alias("k_records")
            )
            if not ks.is_empty()
            else None
        )
        rows = totals
        for extra in (lists, kept):
            if extra is not None:
                rows = rows.join(extra, on=self.key, how="left", maintain_order="left")
        rows = rows.with_columns(run_id.alias("run_id"))
        return (
            rows.with_columns(pl.lit(None).alias(c) for c in schema.names if c not in rows.columns)
            .select(schema.names)
            .to_arrow()
            .cast(schema)
        )


def per_run(rollups: pl.LazyFrame) -> pl.DataFrame:
    """``weighted_acceptance`` by run from a store's rollups (all of them: see
    ``Store.sums_cover_rows``), in the order their rows come."""
    frame = rollups.collect()
    totals = add_totals(frame.select("run_id", *_TOTALS), _KEYS)
    positions = add_positions(
        frame.select(
            "run_id",
            pl.col("position_counts").alias("count"),
            pl.col("position_drafts").alias("drafts"),
            pl.int_ranges(pl.col("position_counts").list.len()).alias("position"),
        )
        .explode("count", "drafts", "position")
        .drop_nulls("position"),
        _KEYS,
    )
    ks = add_k_counts(
        frame.select("run_id", pl.col("k_values").alias("k"), pl.col("k_records").alias("n"))
        .explode("k", "n")
        .drop_nulls("k"),
        _KEYS,
    )
    return assemble(totals.lazy(), positions.lazy(), ks.lazy(), _KEYS).collect()
