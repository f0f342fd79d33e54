"""The runs of a store with their weighted acceptance (what ``specscope runs`` lists)."""

from __future__ import annotations

import polars as pl

from specscope.acceptance import weighted_acceptance
from specscope.store.reading import Store
from specscope.store.rollup import per_run


def acceptance_by_run(store: Store) -> pl.DataFrame:
    """``weighted_acceptance`` by run of all the store's spec-decode rows: from the rollups
    where every file has one, else from the rows."""
    if store.sums_cover_rows():
        return per_run(store.run_sums)
    return weighted_acceptance(store.spec_decode, ["run_id"])


def runs_overview(store: Store) -> pl.DataFrame:
    """One row per run: its configuration, record counts and weighted acceptance."""
    runs = store.runs.collect()
    acceptance = acceptance_by_run(store).select(
        "run_id",
        "drafts",
        "draft_tokens",
        "accepted_tokens",
        "acceptance_rate",
        "mean_acceptance_length",
        "per_position",
    )
    out = runs.join(acceptance, on="run_id", how="left")
    return out.sort(["source", "ordinal"])


__all__ = ["runs_overview"]
