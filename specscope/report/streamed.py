"""What a report over a fleet's rows reads of them, a batch of sources at a time.

A report draws its charts and weighs its factors from every interval row; a fleet's store
holds millions (a month of 1,000 servers sampled at 0.5%: 2.6 M rows, 1.1 GB held at once).
What it keeps of them is small: per chart name (a setup) and time bucket, per number of
requests running, per name and prefix-cache hit-rate bin, the counts summed; per run, the
counts summed and the median requests running. Each is a sum, or is made within one run,
and a run's rows all come from one source: so the sources are read a batch at a time (the
columns these need only, each batch joined to its engine stats as detectors join them) and
the partial sums added up. The frames that come out are those the in-memory path gives
the same chart functions (``tests/test_report_streamed.py`` holds the two to each other).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from specscope.analysis.evidence import evidence_from
from specscope.analysis.factors import factor_sums
from specscope.report import charts
from specscope.report.setups import OTHERS, OVER_TIME_POINTS, over_time_bucket
from specscope.schema import polars_schema
from specscope.store.order import LINE, sort_shuffled
from specscope.store.reading import Store
from specscope.thresholds import Config

BATCH_ROWS = 200_000  # spec-decode rows stored a batch reads at most (a source whole)

_SPEC = (
    "run_id",
    "engine",
    "ts",
    "line",
    "stats_line",
    "drafts",
    "draft_tokens",
    "accepted_tokens",
)
_STATS = (
    "run_id",
    "engine",
    "ts",
    "line",
    "running_reqs",
    "waiting_reqs",
    "prefix_cache_hit_rate",
    "kv_cache_usage",
)
_COUNTS = ("drafts", "draft_tokens", "accepted_tokens")


@dataclass
class Streamed:
    """What the charts and ``what_moves`` take, summed over every row of the store."""

    over_time: pl.DataFrame  # as ``setups.over_time_rows`` gives it
    running: pl.DataFrame  # counts by requests running (``charts.against_running``)
    prefix_cache: pl.DataFrame | None  # by name and bin (``charts.prefix_cache_chart``)
    factor_sums: pl.DataFrame  # ``factors.factor_sums`` of every run


def streamed(
    store: Store,
    names: Mapping[str, str],
    config: Config,
    *,
    run_ids: Iterable[str] | None = None,
    batch_rows: int | None = None,
) -> Streamed:
    """The sums over the store's rows (of ``run_ids`` only, if given), each run under its
    chart name (``names``; a run not named is ``OTHERS``), reading ``batch_rows`` rows or
    so at a time."""
    wanted = sorted(set(run_ids or ()))
    only = pl.col("run_id").is_in(wanted) if wanted else pl.lit(True)
    files = {t: _by_source(store, t) for t in ("spec_decode", "engine_stats")}
    shuffled = {t: store.shuffled(t) for t in files}
    batches = _batches(_rows_by_source(store), batch_rows or BATCH_ROWS)
    runs = store.runs.collect()
    # First pass, the times alone: the buckets of acceptance over time span every row.
    first: datetime | None = None
    last: datetime | None = None
    timed_names: set[str] = set()
    for batch in batches:
        spans = (
            _scan(
                files["spec_decode"],
                batch,
                "spec_decode",
                ("run_id", "ts"),
                shuffled["spec_decode"],
            )
            .filter(only & pl.col("ts").is_not_null())
            .group_by("run_id")
            .agg(pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last"))
            .collect()
        )
        for run_id, lo, hi in spans.iter_rows():
            timed_names.add(names.get(str(run_id), OTHERS))
            first = lo if first is None or lo < first else first
            last = hi if last is None or hi > last else last
    bucket = (
        over_time_bucket(first, last, len(timed_names), points=OVER_TIME_POINTS)
        if timed_names
        else None
    )
    # The in-memory path bins by the names that have hit rates; in a grouped report those
    # are a few (``CHART_SETUPS`` and ``OTHERS``), and so many or fewer make the same bins.
    bins = charts.prefix_cache_bins(len(set(names.values()) | {OTHERS}))
    parts: dict[str, list[pl.DataFrame]] = {
        k: [] for k in ("over_time", "running", "prefix", "hits", "sums")
    }
    for batch in batches:
        spec = (
            _scan(files["spec_decode"], batch, "spec_decode", _SPEC, shuffled["spec_decode"])
            .filter(only)
            .collect()
        )
        stats = (
            _scan(files["engine_stats"], batch, "engine_stats", _STATS, shuffled["engine_stats"])
            .filter(only)
            .collect()
        )
        of_runs = runs.filter(pl.col("source_id").is_in(batch))
        joined = _joined(spec, stats, of_runs, config)
        named = joined.with_columns(
            pl.col("run_id").cast(pl.String).replace_strict(names, default=OTHERS)
        )
        parts["sums"].append(factor_sums(joined))
        parts["running"].append(
            named.filter(pl.col("running_reqs").is_not_null() & pl.col("drafts").is_not_null())
            .group_by("running_reqs")
            .agg(pl.col(*_COUNTS).sum())
        )
        if bucket is not None:
            parts["over_time"].append(
                named.filter(pl.col("ts").is_not_null())
                .with_columns(pl.col("ts").dt.truncate(bucket))
                .group_by("run_id", "ts")
                .agg(
                    pl.col(*_COUNTS).sum(),
                    pl.col("running_reqs").sum().alias("running_sum"),
                    pl.col("running_reqs").count().alias("running_n"),
                )
            )
        hits = named.filter(
            pl.col("prefix_cache_hit_rate").is_not_null() & (pl.col("draft_tokens") > 0)
        )
        parts["hits"].append(
            hits.select(
                pl.len().alias("n"),
                pl.col("prefix_cache_hit_rate").min().alias("low"),
                pl.col("prefix_cache_hit_rate").max().alias("high"),
            )
        )
        parts["prefix"].append(charts.prefix_cache_sums(hits, bins))
    return Streamed(
        over_time=_over_time(parts["over_time"]),
        running=_summed(parts["running"], ["running_reqs"]),
        prefix_cache=_prefix_cache(parts["hits"], parts["prefix"]),
        factor_sums=pl.concat(parts["sums"]) if parts["sums"] else factor_sums(pl.DataFrame()),
    )


def _joined(
    spec: pl.DataFrame, stats: pl.DataFrame, runs: pl.DataFrame, config: Config
) -> pl.DataFrame:
    """The batch's spec rows with their engine stats, joined as detectors join them."""
    cat = pl.col("run_id").cast(pl.Categorical)
    none = pl.DataFrame(schema={"run_id": pl.String})
    ev = evidence_from(
        spec.with_columns(cat),
        stats.with_columns(cat),
        runs,
        none,
        none,
        config=config,
        reference=[],
        per_run=none,
    )
    return ev.spec


def _summed(parts: list[pl.DataFrame], keys: list[str]) -> pl.DataFrame:
    if not parts:
        return pl.DataFrame(schema={k: pl.Int64 for k in (*keys, *_COUNTS)})
    return pl.concat(parts).group_by(keys).agg(pl.col(*_COUNTS).sum())


def _over_time(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """The buckets of every batch added up, as ``setups.over_time_rows`` makes them."""
    if not parts:
        return pl.DataFrame(
            schema={
                "run_id": pl.String,
                "ts": pl.Datetime("us"),
                **dict.fromkeys(_COUNTS, pl.Int64),
            }
        )
    return (
        pl.concat(parts)
        .group_by("run_id", "ts")
        .agg(pl.col(*_COUNTS, "running_sum", "running_n").sum())
        .with_columns(
            pl.when(pl.col("running_n") > 0)
            .then(pl.col("running_sum") / pl.col("running_n"))
            .alias("running_reqs")
        )
        .drop("running_sum", "running_n")
        .sort("run_id", "ts")
    )


def _prefix_cache(hits: list[pl.DataFrame], parts: list[pl.DataFrame]) -> pl.DataFrame | None:
    """The binned sums, or None where the chart would not be drawn (fewer than two rows
    with a hit rate, or a single hit rate)."""
    seen = (
        pl.concat(hits).select(pl.col("n").sum(), pl.col("low").min(), pl.col("high").max())
        if hits
        else None
    )
    if seen is None:
        return None
    n, low, high = seen.row(0)
    if n < 2 or low is None or low == high:
        return None
    return charts.prefix_cache_added(pl.concat(parts))


def _by_source(store: Store, table: str) -> dict[str, list[Path]]:
    """The committed files of a table by source (its partition folder)."""
    out: dict[str, list[Path]] = {}
    for path in store.files(table):
        out.setdefault(path.parent.name.split("=", 1)[1], []).append(path)
    return out


def _rows_by_source(store: Store) -> dict[str, int]:
    """The spec-decode rows each source's files hold, from the manifest's entries (a
    file's footer for one committed before files were listed), in the order of its files."""
    out: dict[str, int] = {}
    for path, rows in store.file_rows("spec_decode"):
        source = path.parent.name.split("=", 1)[1]
        if rows is None:
            rows = int(pl.scan_parquet(path).select(pl.len()).collect().item())
        out[source] = out.get(source, 0) + rows
    return out


def _batches(sources: Mapping[str, int], rows: int) -> list[list[str]]:
    """Sources in batches of about ``rows`` stored rows (a source is never split)."""
    out: list[list[str]] = [[]]
    held = 0
    for source, n in sources.items():
        if out[-1] and held + n > rows:
            out.append([])
            held = 0
        out[-1].append(source)
        held += n
    return [b for b in out if b]


def _scan(
    files: Mapping[str, list[Path]],
    sources: list[str],
    table: str,
    columns: tuple[str, ...],
    shuffled: frozenset[str] = frozenset(),
) -> pl.LazyFrame:
    """The ``columns`` of the sources' files with ``source_id`` from the folder (a file
    written before a column was added reads it as null, as ``Store.table`` does), each
    source's rows in line order (those of ``shuffled`` sources sorted: ``store.order``)."""
    schema = polars_schema(table)
    mixed = shuffled & set(sources)
    read = columns if not mixed or LINE in columns else (*columns, LINE)
    frames = [
        pl.scan_parquet(path, schema=schema, missing_columns="insert", extra_columns="ignore")
        .select(read)
        .with_columns(pl.lit(source).alias("source_id"))
        for source in sources
        for path in files.get(source, [])
    ]
    if not frames:
        return pl.DataFrame(
            schema={**{c: schema[c] for c in columns}, "source_id": pl.String}
        ).lazy()
    whole = pl.concat(frames, how="vertical")
    return sort_shuffled(whole, mixed).select(*columns, "source_id") if mixed else whole


__all__ = ["BATCH_ROWS", "Streamed", "streamed"]
