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

__all__ = ["RunSums", "per_run"]

_KEYS = ["run_id"]
_TOTALS = {
    "records": pl.Int64,
    "draft_tokens": pl.Int64,
    "draft_tokens_n": pl.Int64,
    "accepted_tokens": pl.Int64,
    "accepted_tokens_n": pl.Int64,
    "drafts": pl.Int64,
    "drafts_n": pl.Int64,
    "acc_with_drafts": pl.Int64,
    "tau_sum": pl.Float64,
    "tau_n": pl.Int64,
    "first_ts": pl.Datetime("ms"),
    "last_ts": pl.Datetime("ms"),
}


class RunSums:
    """The sums of one source's spec-decode rows, added a part at a time as they are
    written; ``table`` is the ``run_sums`` rows."""

    def __init__(self) -> None:
        self.totals = Folded(lambda f: add_totals(f, _KEYS))
        self.positions = Folded(lambda f: add_positions(f, _KEYS))
        self.ks = Folded(lambda f: add_k_counts(f, _KEYS))

    def add(self, part: pl.DataFrame) -> None:
        lf = part.lazy()
        totals, positions = sums(lf, _KEYS)
        self.totals.add(totals.collect().cast(_TOTALS))  # type: ignore[arg-type]
        self.positions.add(positions.collect())
        self.ks.add(k_counts(lf, _KEYS).collect())

    def table(self, schema: pa.Schema) -> pa.Table:
        totals = self.totals.total()
        if totals.is_empty():
            return schema.empty_table()
        positions = self.positions.total()
        if positions.is_empty():
            lists = pl.DataFrame(
                schema={
                    "run_id": pl.String,
                    "position_counts": pl.List(pl.Int64),
                    "position_drafts": pl.List(pl.Int64),
                }
            )
        else:
            lists = (
                positions.sort("run_id", "position")
                .group_by("run_id", maintain_order=True)
                .agg(
                    pl.col("count").alias("position_counts"),
                    pl.col("drafts").alias("position_drafts"),
                )
            )
        ks = self.ks.total()
        if ks.is_empty():
            ks = pl.DataFrame(schema={"run_id": pl.String, "k": pl.Int32, "n": pl.Int64})
        kept = ks.group_by("run_id", maintain_order=True).agg(
            pl.col("k").alias("k_values"), pl.col("n").alias("k_records")
        )
        rows = totals.join(lists, on="run_id", how="left", maintain_order="left").join(
            kept, on="run_id", how="left", maintain_order="left"
        )
        return rows.select(schema.names).to_arrow().cast(schema)


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
