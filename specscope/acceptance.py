"""Weighted acceptance: sum the counts, then divide. Never an average of interval ratios.

    acceptance rate         = Σ accepted / Σ draft tokens
    mean acceptance length  τ = 1 + Σ accepted / Σ drafts
    per-position a_i        = Σ accepted at position i / Σ drafts   (unconditional)

Rows without drafts (a 0.8.3 line with no per-position list and no known k) still count
in the rate but not in τ or a_i. Where no row has counts (SGLang prints only each
interval's mean length) τ is the mean of the printed values, flagged ``estimated``.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def _sum(column: str) -> pl.Expr:
    """The sum, or null when no row has the count (not a misleading 0)."""
    return pl.when(pl.col(column).count() > 0).then(pl.col(column).sum()).alias(column)


def weighted_acceptance(
    spec: pl.LazyFrame | pl.DataFrame, by: Sequence[str] = ("run_id",)
) -> pl.DataFrame:
    """One row per group of ``by``: records, counts, rate, τ and the per-position curve."""
    lf = spec.lazy()
    keys = list(by)
    with_drafts = pl.col("drafts").is_not_null()
    totals = lf.group_by(keys, maintain_order=True).agg(
        pl.len().alias("records"),
        _sum("draft_tokens"),
        _sum("accepted_tokens"),
        _sum("drafts"),
        pl.col("accepted_tokens").filter(with_drafts).sum().alias("_acc_with_drafts"),
        pl.col("ts").min().alias("first_ts"),
        pl.col("ts").max().alias("last_ts"),
    )
    # Servers that print no counts (SGLang) give only each interval's mean length: their
    # mean is the one estimate there is, and says so.
    printed = lf.group_by(keys, maintain_order=True).agg(
        pl.col("mean_acceptance_length")
        .filter(pl.col("drafts").is_null())
        .mean()
        .alias("_printed_tau"),
    )
    # The most common k; the first seen among equals (as ingest's run summary counts it).
    common_k = (
        lf.filter(pl.col("k").is_not_null())
        .group_by([*keys, "k"], maintain_order=True)
        .agg(pl.len().alias("_n"))
        .sort("_n", descending=True, maintain_order=True)
        .unique(keys, keep="first", maintain_order=True)
        .drop("_n")
    )
    totals = totals.join(printed, on=keys, how="left", nulls_equal=True, maintain_order="left")
    totals = totals.join(
        common_k, on=keys, how="left", nulls_equal=True, maintain_order="left"
    ).select(
        *keys,
        "records",
        "draft_tokens",
        "accepted_tokens",
        "drafts",
        "_acc_with_drafts",
        "k",
        "first_ts",
        "last_ts",
        "_printed_tau",
    )
    totals = (
        totals.with_columns(
            pl.when(pl.col("draft_tokens") > 0)
            .then(pl.col("accepted_tokens") / pl.col("draft_tokens"))
            .otherwise(None)
            .alias("acceptance_rate"),
            pl.when(pl.col("drafts") > 0)
            .then(1 + pl.col("_acc_with_drafts") / pl.col("drafts"))
            .otherwise(None)
            .alias("mean_acceptance_length"),
        )
        .with_columns(
            (
                pl.col("mean_acceptance_length").is_null() & pl.col("_printed_tau").is_not_null()
            ).alias("estimated"),
        )
        .with_columns(
            pl.coalesce("mean_acceptance_length", "_printed_tau").alias("mean_acceptance_length"),
        )
        .drop("_acc_with_drafts", "_printed_tau")
    )
    per_pos = (
        lf.filter(pl.col("accepted_per_pos").is_not_null() & with_drafts)
        .select(
            *keys,
            "drafts",
            pl.col("accepted_per_pos").alias("count"),
            pl.int_ranges(pl.col("accepted_per_pos").list.len()).alias("position"),
        )
        .explode("count", "position")
        .group_by([*keys, "position"])
        .agg(pl.col("count").sum(), pl.col("drafts").sum())
        .sort([*keys, "position"])
        .group_by(keys, maintain_order=True)
        .agg(
            pl.when(pl.col("drafts") > 0)
            .then(pl.col("count") / pl.col("drafts"))
            .otherwise(None)
            .alias("per_position"),
            pl.col("count").alias("accepted_per_pos"),
        )
    )
    return totals.join(
        per_pos, on=keys, how="left", nulls_equal=True, maintain_order="left"
    ).collect(engine="streaming")


__all__ = ["weighted_acceptance"]
