"""Weighted acceptance: sum the counts, then divide. Never an average of interval ratios.

    acceptance rate         = Σ accepted / Σ draft tokens
    mean acceptance length  τ = 1 + Σ accepted / Σ drafts
    per-position a_i        = Σ accepted at position i / Σ drafts that drafted position i
                              (unconditional; the drafts, where no count per position says
                              fewer drafted it)

Rows without drafts (a 0.8.3 line with no per-position list and no known k) still count
in the rate but not in τ or a_i. Where no row has counts (SGLang prints only each
interval's mean length) τ is the mean of the printed values, flagged ``estimated``.

The sums add up across parts (``sums``, ``add_totals``, ``add_positions``, ``from_sums``):
ingest sums a log a part at a time, ``weighted_acceptance`` a table at once, with the same
arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

_COUNTS = ("draft_tokens", "accepted_tokens", "drafts")
_WITH_DRAFTS = pl.col("drafts").is_not_null()


def sums(spec: pl.LazyFrame, keys: Sequence[str]) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Per group of ``keys``: the counts, how many rows had each, and the printed mean
    lengths of rows without counts; and per group and position, the accepted counts and
    the drafts that reached it. Groups come in the order they first appear."""
    keys = list(keys)
    totals = spec.group_by(keys, maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("records"),
        *(e for c in _COUNTS for e in (pl.col(c).sum(), pl.col(c).count().alias(f"{c}_n"))),
        pl.col("accepted_tokens").filter(_WITH_DRAFTS).sum().alias("acc_with_drafts"),
        # Servers that print no counts (SGLang) give only each interval's mean length.
        pl.col("mean_acceptance_length").filter(~_WITH_DRAFTS).sum().alias("tau_sum"),
        pl.col("mean_acceptance_length").filter(~_WITH_DRAFTS).count().alias("tau_n"),
        pl.col("ts").min().alias("first_ts"),
        pl.col("ts").max().alias("last_ts"),
    )
    accepted = pl.col("accepted_per_pos")
    # A position's denominator is the drafts that drafted it: the row's drafts, or, where an
    # engine counts what was drafted at each position (TensorRT-LLM; k varies with dynamic
    # or adaptive drafting), that count, so a position drafted on some steps only is judged
    # on those steps and never called dead for not being drafted.
    every = pl.col("drafts").repeat_by(accepted.list.len())
    if "drafted_per_pos" in spec.collect_schema().names():
        drafted = pl.col("drafted_per_pos")
        same = drafted.is_not_null() & (drafted.list.len() == accepted.list.len())
        reached = pl.when(same).then(drafted).otherwise(every)
    else:
        reached = every
    positions = (
        spec.filter(accepted.is_not_null() & _WITH_DRAFTS)
        .select(
            *keys,
            reached.alias("drafts"),
            accepted.alias("count"),
            pl.int_ranges(accepted.list.len()).alias("position"),
        )
        .explode("count", "drafts", "position")
        .group_by([*keys, "position"])
        .agg(pl.col("count").sum(), pl.col("drafts").sum())
    )
    return totals, positions


def add_totals(totals: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """The ``sums`` totals of several parts (concatenated in order) as those of one."""
    return totals.group_by(list(keys), maintain_order=True).agg(
        pl.exclude("first_ts", "last_ts").sum(),
        pl.col("first_ts").min(),
        pl.col("last_ts").max(),
    )


def add_positions(positions: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """The ``sums`` position counts of several parts as those of one."""
    return positions.group_by([*keys, "position"]).agg(
        pl.col("count").sum(), pl.col("drafts").sum()
    )


def from_sums(totals: pl.LazyFrame, positions: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """Records, counts, rate, τ (``estimated`` when printed, not counted) and the
    per-position curve, from ``sums``."""
    keys = list(keys)
    counted = {c: pl.when(pl.col(f"{c}_n") > 0).then(pl.col(c)).alias(c) for c in _COUNTS}
    printed = pl.when(pl.col("tau_n") > 0).then(pl.col("tau_sum") / pl.col("tau_n"))
    tau = (
        pl.when(pl.col("drafts") > 0)
        .then(1 + pl.col("acc_with_drafts") / pl.col("drafts"))
        .otherwise(None)
    )
    out = (
        totals.with_columns(counted.values())
        .with_columns(
            pl.when(pl.col("draft_tokens") > 0)
            .then(pl.col("accepted_tokens") / pl.col("draft_tokens"))
            .otherwise(None)
            .alias("acceptance_rate"),
            pl.coalesce(tau, printed).alias("mean_acceptance_length"),
            (tau.is_null() & printed.is_not_null()).alias("estimated"),
        )
        .select(
            *keys,
            "records",
            *_COUNTS,
            "first_ts",
            "last_ts",
            "acceptance_rate",
            "mean_acceptance_length",
            "estimated",
        )
    )
    curves = (
        positions.sort([*keys, "position"])
        .group_by(keys, maintain_order=True)
        .agg(
            pl.when(pl.col("drafts") > 0)
            .then(pl.col("count") / pl.col("drafts"))
            .otherwise(None)
            .alias("per_position"),
            pl.col("count").alias("accepted_per_pos"),
            pl.col("drafts").alias("drafted_per_pos"),
        )
    )
    return out.join(curves, on=keys, how="left", nulls_equal=True, maintain_order="left")


def weighted_acceptance(
    spec: pl.LazyFrame | pl.DataFrame, by: Sequence[str] = ("run_id",)
) -> pl.DataFrame:
    """One row per group of ``by``: records, counts, k, rate, τ and the per-position curve."""
    lf = spec.lazy()
    keys = list(by)
    return assemble(*sums(lf, keys), k_counts(lf, keys), keys).collect(engine="streaming")


def k_counts(spec: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """Per group of ``keys``: how many rows had each k, in the order the k first appear."""
    keys = list(keys)
    return (
        spec.filter(pl.col("k").is_not_null())
        .group_by([*keys, "k"], maintain_order=True)
        .agg(pl.len().cast(pl.Int64).alias("n"))
    )


def add_k_counts(counts: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """The ``k_counts`` of several parts (concatenated in order) as those of one."""
    return counts.group_by([*keys, "k"], maintain_order=True).agg(pl.col("n").sum())


def most_common_k(counts: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """Per group of ``keys``, the k of most rows in ``k_counts``; the first seen among
    equals (Counter's way)."""
    return (
        counts.sort("n", descending=True, maintain_order=True)
        .unique(list(keys), keep="first", maintain_order=True)
        .drop("n")
    )


def assemble(
    totals: pl.LazyFrame, positions: pl.LazyFrame, counts: pl.LazyFrame, keys: Sequence[str]
) -> pl.LazyFrame:
    """``weighted_acceptance`` from ``sums`` and ``k_counts``, of a table or of its parts."""
    keys = list(keys)
    out = from_sums(totals, positions, keys).join(
        most_common_k(counts, keys), on=keys, how="left", nulls_equal=True, maintain_order="left"
    )
    columns = out.collect_schema().names()
    at = columns.index("drafts") + 1  # k beside the counts, as before
    return out.select(*columns[:at], "k", *columns[at:-1])


class Folded:
    """Partial aggregates, one per part, folded into one every so often (thousands of tiny
    frames hold more memory than their rows)."""

    def __init__(self, fold: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
        self.fold = fold
        self.parts: list[pl.DataFrame] = []

    def add(self, frame: pl.DataFrame) -> None:
        self.parts.append(frame)
        if len(self.parts) >= 64:
            self.parts = [self.total()]

    def total(self) -> pl.DataFrame:
        return self.fold(pl.concat(self.parts)) if self.parts else pl.DataFrame()


__all__ = [
    "Folded",
    "add_k_counts",
    "add_positions",
    "add_totals",
    "assemble",
    "from_sums",
    "k_counts",
    "most_common_k",
    "sums",
    "weighted_acceptance",
]
