"""The runs of a store with their weighted acceptance (what ``specscope runs`` lists)."""

from __future__ import annotations

import polars as pl

from specscope.store.reading import Store
from specscope.store.rollup import acceptance_by_run


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
