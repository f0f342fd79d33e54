"""The fleet queries and specscope's own answer to each.

Every query sums counts and divides the sums, as ``specscope.acceptance`` does, so an
engine's answer can equal specscope's to the last digit: acceptance rate = Σ accepted /
Σ draft tokens, τ = 1 + Σ accepted (of rows with drafts) / Σ drafts, a_i = Σ accepted
at i / Σ drafts. A ratio of sums of integers below 2^53 is one IEEE division of two exact
doubles in any engine; an average of ratios, or a sum of printed floats (SGLang's mean
lengths), would depend on the order rows are added in, so no query takes one: a group
whose rows carry no counts has no τ here (specscope shows the printed mean, ``estimated``).

The rows of every query: ``spec_runs``, each spec_decode row with its run's model,
server (vllm, sglang, llama.cpp, trtllm), instance (the Prometheus ``instance`` of a
pulled run, else the run's source: the log it was read from) and day (the date of
``ts_utc`` where a row has it, else of ``ts``, the server's local time).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from specscope.acceptance import sums, weighted_acceptance
from specscope.errors import UsageError
from specscope.schema import TABLES
from specscope.store.reading import Store


@dataclass(frozen=True)
class Query:
    """A question for the fleet: acceptance, or the per-position curve, per group of keys."""

    name: str
    keys: tuple[str, ...]
    positions: bool
    about: str

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.keys, *(POSITION_COLUMNS if self.positions else ACCEPTANCE_COLUMNS))


ACCEPTANCE_COLUMNS = (
    "records",
    "draft_tokens",
    "accepted_tokens",
    "drafts",
    "acceptance_rate",
    "mean_acceptance_length",
)
POSITION_COLUMNS = ("position", "accepted", "drafts", "rate")

QUERIES: dict[str, Query] = {
    q.name: q
    for q in (
        Query("acceptance_by_model", ("model",), False, "acceptance rate and τ per model"),
        Query(
            "acceptance_by_server",
            ("server", "instance"),
            False,
            "per server (vllm, sglang, ...) and instance (a pull's instance, else the log)",
        ),
        Query("acceptance_by_day", ("day",), False, "per day (UTC where known, else local)"),
        Query("acceptance_by_run", ("run_id",), False, "per run, as `specscope runs` has it"),
        Query("positions_by_model", ("model",), True, "per-position curve a_i per model"),
        Query("positions_by_run", ("run_id",), True, "per-position curve a_i per run"),
    )
}

# spec_decode's columns the queries read, and runs' (joined on run_id).
SPEC_COLUMNS = ("run_id", "ts", "drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos")
RUN_COLUMNS = ("model", "server")


def has_utc() -> bool:
    """Whether spec_decode has a UTC time beside the local one (a later schema's ``ts_utc``)."""
    return "ts_utc" in TABLES["spec_decode"].names


def query(name: str) -> Query:
    if name not in QUERIES:
        raise UsageError(f"no query {name!r}; queries: {', '.join(QUERIES)}")
    return QUERIES[name]


def spec_runs(store: Store) -> pl.LazyFrame:
    """The rows every query groups: spec_decode with each row's run, instance and day."""
    when = pl.col("ts")
    if has_utc():  # the UTC instant as a UTC wall clock, beside ts's clock
        when = pl.coalesce(
            pl.col("ts_utc").dt.convert_time_zone("UTC").dt.replace_time_zone(None), when
        )
    runs = store.runs.select(
        "run_id",
        *RUN_COLUMNS,
        pl.coalesce(pl.col("pids").str.json_path_match("$.instance"), pl.col("source")).alias(
            "instance"
        ),
    )
    return (
        store.spec_decode.with_columns(when.dt.date().alias("day"))
        .join(runs, on="run_id", how="left")
        .select("day", "k", "mean_acceptance_length", *SPEC_COLUMNS, *RUN_COLUMNS, "instance")
    )


def answer(store: Store, name: str) -> pl.DataFrame:
    """specscope's own answer to a query, in its columns, sorted by its keys (nulls
    first): ``weighted_acceptance`` (and its per-position sums) over ``spec_runs``."""
    q = query(name)
    keys = list(q.keys)
    rows = spec_runs(store)
    if q.positions:
        _, positions = sums(rows, keys)
        out = (
            positions.filter(pl.col("position").is_not_null())  # an empty list adds nothing
            .with_columns(pl.col("position").cast(pl.Int64))
            .rename({"count": "accepted"})
            .with_columns(
                pl.when(pl.col("drafts") > 0)
                .then(pl.col("accepted") / pl.col("drafts"))
                .otherwise(None)
                .alias("rate")
            )
            .collect()
        )
        keys.append("position")
    else:
        out = weighted_acceptance(rows, by=keys).with_columns(
            # A τ printed by the server, not counted, is no sum: no engine can repeat it.
            pl.when(pl.col("estimated"))
            .then(None)
            .otherwise(pl.col("mean_acceptance_length"))
            .alias("mean_acceptance_length")
        )
    return out.select(q.columns).sort(keys, nulls_last=False)


__all__ = [
    "ACCEPTANCE_COLUMNS",
    "POSITION_COLUMNS",
    "QUERIES",
    "Query",
    "answer",
    "has_utc",
    "query",
    "spec_runs",
]
