"""Detection that reads the interval rows of the runs a question needs, not of the store.

A fleet's store may hold hundreds of millions of intervals: more than a process can hold,
and more than detection needs. Each run's acceptance is in the rollups (``run_sums``), and
the detectors that judge acceptance from it need a run's rows only to say where a finding
is (its lines and window). So, with rollups for every row:

1. the per-run detectors run on the rollups alone, to learn which runs they report on
   (``insufficient`` with nothing judged: every run it could report on);
2. the screens (``screens``) run over the sources a batch at a time, each batch's rows
   read with only the columns the screens need and let go after it, the batches on
   ``workers`` threads (polars reads and aggregates outside the GIL);
3. the rows of the runs the screens let through, and of the sources whose benchmarks may
   speak of any run, are read in full; a run only a per-run detector names is stood for by
   two rows with its first and last line and time (all a finding takes of its rows); and
   every detector runs on them as on the whole store.

The findings are those of ``gather`` and ``findings_of`` over every row
(``tests/test_fleet.py`` holds the two paths to each other).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

import specscope.analysis.detectors.screens as screens
from specscope.analysis.detectors.acceptance import insufficient, low, zero
from specscope.analysis.detectors.positions import cliff, k_too_large
from specscope.analysis.drafter_cost import cost_rows
from specscope.analysis.evidence import (
    STATED_RATE_FORMATS,
    Evidence,
    detector_rows,
    evidence_from,
    with_stated_rates,
)
from specscope.analysis.findings import Finding
from specscope.analysis.requests import request_rows
from specscope.analysis.siblings import side_rows
from specscope.schema import polars_schema
from specscope.store import rollup
from specscope.store.order import sort_shuffled
from specscope.store.reading import Store
from specscope.thresholds import Config, load_config, load_reference

# Spec-decode rows stored a screening batch reads at most (a source whole; two batches at
# once). Counted from the files, not the rollups: a sampled store keeps 1 of 200 intervals,
# and sized by the rollups a store of a source per server was 143 batches of 9 k rows.
BATCH_ROWS = 100_000
WORKERS = 2

# What the screens read of the rows (and the stats join needs).
_SPEC = (
    "source_id",
    "run_id",
    "engine",
    "ts",
    "line",
    "end_line",
    "stats_line",
    "drafts",
    "draft_tokens",
    "accepted_tokens",
)
_STATS = (
    "source_id",
    "run_id",
    "engine",
    "ts",
    "line",
    "running_reqs",
    "waiting_reqs",
    "prefix_cache_hit_rate",
    "kv_cache_usage",
    "generation_throughput",
)
_PER_RUN: tuple[Callable[[Evidence], list[Finding]], ...] = (zero, low, cliff, k_too_large)
_BATCH_SCREENS = (screens.drift, screens.concurrency, screens.kv_saturation, screens.prefix_cache)


def gather_needed(
    store: Store,
    *,
    run_ids: Iterable[str] | None = None,
    config: Config | None = None,
    reference: list[dict[str, Any]] | None = None,
    workers: int = WORKERS,
    batch_rows: int = BATCH_ROWS,
) -> Evidence:
    """The evidence ``findings_of`` needs, with the rows of the runs it needs only. The
    store's rollups must cover its rows (``Store.sums_cover_rows``)."""
    config = config or load_config()
    reference = reference if reference is not None else load_reference()
    wanted = list(run_ids) if run_ids else None
    per_run = rollup.per_run(store.run_sums)
    if wanted:
        per_run = per_run.filter(pl.col("run_id").is_in(wanted))
    per_run = with_stated_rates(store.spec_decode, per_run)  # as gather's
    spec_all, stats_all = detector_rows(store)  # every file checked once, here
    runs, events, bench = (store.table(t).collect() for t in ("runs", "events", "bench"))

    def evidence(
        spec: pl.DataFrame, stats: pl.DataFrame, of_runs: pl.DataFrame, sums: pl.DataFrame
    ) -> Evidence:
        return evidence_from(
            spec,
            stats,
            of_runs,
            events,
            bench,
            config=config,
            reference=reference,
            per_run=sums,
        )

    if wanted:  # unknown ids are the user's mistake, said as over every row
        evidence_from(
            spec_all.clear().collect(),
            stats_all.clear().collect(),
            runs,
            events,
            bench,
            run_ids=wanted,
            per_run=per_run,
            config=config,
            reference=reference,
        )
        runs = runs.filter(pl.col("run_id").is_in(wanted))
        events, bench = (t.filter(pl.col("run_id").is_in(wanted)) for t in (events, bench))
    base = evidence(spec_all.clear().collect(), stats_all.clear().collect(), runs, per_run)
    # Runs a per-run detector may report on: their rows only say where (``_where``).
    placed: set[str] = set()
    for detector in _PER_RUN:
        placed.update(r for f in detector(base) for r in (f.run_id or "").split(","))
    placed.update(f.run_id or "" for f in insufficient(base, ()))
    need: set[str] = set()
    for screen in (screens.prefix_cache, screens.no_speedup):
        kept = screen(base)
        need.update(set(base.runs) if kept is None else kept)
    if not bench.is_empty():  # a benchmark speaks of a run of its source: read them whole
        told = set(bench["source_id"].to_list())
        need.update(r for r, run in base.runs.items() if run.get("source_id") in told)
    files = {t: _by_source(store, t) for t in ("spec_decode", "engine_stats")}
    shuffled = {t: store.shuffled(t) for t in files}
    stored: dict[str, int] = {}
    for path, rows in store.file_rows("spec_decode"):
        source = path.parent.name.split("=", 1)[1]
        stored[source] = stored.get(source, 0) + (rows or 0)
    size: dict[str, int] = {}
    for run_id, run in base.runs.items():  # in the runs' order, as the rows are
        source = str(run.get("source_id"))
        records = int(base.per_run.get(run_id, {}).get("records") or 0)
        size[source] = stored[source] if source in stored else size.get(source, 0) + records

    def screened(batch: list[str]) -> set[str]:
        spec = _read(files["spec_decode"], batch, _SPEC, shuffled["spec_decode"])
        stats = _read(files["engine_stats"], batch, _STATS, shuffled["engine_stats"])
        of_runs = runs.filter(pl.col("source_id").is_in(batch))
        ids = of_runs["run_id"].to_list()
        ev = evidence(spec, stats, of_runs, per_run.filter(pl.col("run_id").is_in(ids)))
        out: set[str] = set()
        for screen in _BATCH_SCREENS:
            kept = screen(ev)
            out.update(set(ev.runs) if kept is None else kept)
        return out

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for kept in pool.map(screened, _batches(size, batch_rows)):
            need.update(kept)
    # The sides one paste compares: their runs read whole.
    sides = side_rows(store, wanted, stated=STATED_RATE_FORMATS)
    need.update(side.run_id for side in sides)
    need.discard("")
    chosen = pl.col("run_id").is_in(sorted(need))

    def holding(ids: Iterable[str]) -> list[str]:
        """The sources that hold these runs, in the store's order of folders."""
        return sorted({str(base.runs[r].get("source_id")) for r in ids if r in base.runs})

    # Only the files of the sources that hold the runs: a fleet's store has a folder per
    # server, and a scan over every file opens every file whatever its filter.
    # Filtered in the scan and streamed: else every file of the sources is read whole (a
    # source pulled 30 times: 1.2 GB where the rows kept take a fifth of it).
    spec = _rows_of(
        files["spec_decode"],
        holding(need),
        "spec_decode",
        spec_all,
        shuffled["spec_decode"],
        chosen,
    )
    spec_rows = spec.collect(engine="streaming")
    stats = _rows_of(
        files["engine_stats"],
        holding(need),
        "engine_stats",
        stats_all,
        shuffled["engine_stats"],
        chosen,
    )
    placed = placed - need - {""}
    where = _where(
        _rows_of(
            files["spec_decode"], holding(placed), "spec_decode", spec_all, shuffled["spec_decode"]
        ),
        sorted(placed),
        spec_rows.schema,
    )
    ev = evidence(
        pl.concat([spec_rows, where]).rechunk(),
        stats.collect(engine="streaming").rechunk(),
        runs,
        per_run,
    )
    # In the order of the rollups, which is that of the rows (as over every row).
    return replace(
        ev,
        per_run={r: ev.per_run[r] for r in base.per_run if r in ev.per_run},
        requests=request_rows(store, wanted),
        costs=cost_rows(store),
        sides=sides,
    )


def _where(spec: pl.LazyFrame, run_ids: list[str], schema: pl.Schema) -> pl.DataFrame:
    """Two rows per run that stand for its spec rows where a finding is placed: the first
    and last line (and last end line) and the first and last time, every count null. What
    ``finding_for`` makes of them is what it makes of the run's rows; the screens and the
    detectors that count find nothing in them (the runs passed no screen)."""
    if not run_ids:
        return pl.DataFrame(schema=schema)
    bounds = (
        spec.filter(pl.col("run_id").is_in(run_ids))
        .group_by("run_id", "source_id")
        .agg(
            pl.col("line").min().alias("first_line"),
            pl.col("line").max().alias("last_line"),
            pl.col("end_line").max().alias("last_end"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
        .collect(engine="streaming")
    )
    first = bounds.select(
        "run_id",
        "source_id",
        pl.col("first_line").alias("line"),
        pl.col("last_end").alias("end_line"),
        pl.col("first_ts").alias("ts"),
    )
    last = bounds.select(
        "run_id",
        "source_id",
        pl.col("last_line").alias("line"),
        pl.col("last_end").alias("end_line"),
        pl.col("last_ts").alias("ts"),
    )
    rows = pl.concat([first, last]).sort("run_id", maintain_order=True)
    return rows.select(
        (pl.col(c) if c in rows.columns else pl.lit(None)).cast(t).alias(c)
        for c, t in schema.items()
    )


def _rows_of(
    files: dict[str, list[Path]],
    sources: list[str],
    table: str,
    like: pl.LazyFrame,
    shuffled: frozenset[str],
    only: pl.Expr | None = None,
) -> pl.LazyFrame:
    """The rows of the sources' files with the columns and types of ``like`` (a file
    written before a column was added reads it as null, as ``Store.table`` does), each
    source's in line order (``store.order``: ``shuffled`` sources sorted); ``only``:
    those it keeps, filtered in the scan, before the casts (else every row is read)."""
    want = like.collect_schema()
    paths = {str(path): source for source in sources for path in files.get(source, [])}
    if not paths:
        return like.clear()
    scan = pl.scan_parquet(
        list(paths),
        schema=polars_schema(table),
        missing_columns="insert",
        extra_columns="ignore",
        include_file_paths=_PATH,
    )
    if only is not None:
        scan = scan.filter(only)
    rows = scan.with_columns(_source(paths)).select(pl.col(c).cast(t) for c, t in want.items())
    return sort_shuffled(rows, shuffled & set(sources))


# One scan over many files (a fleet's store has a file per server or per pull in each
# table, and a scan a file cost more than its rows): each row's source from its file.
_PATH = "__specscope_file"


def _source(paths: dict[str, str]) -> pl.Expr:
    return pl.col(_PATH).replace_strict(paths, return_dtype=pl.String).alias("source_id")


def _by_source(store: Store, table: str) -> dict[str, list[Path]]:
    """The committed files of a table by source (its partition folder)."""
    out: dict[str, list[Path]] = {}
    for path in store.files(table):
        out.setdefault(path.parent.name.split("=", 1)[1], []).append(path)
    return out


def _read(
    files: dict[str, list[Path]],
    sources: list[str],
    columns: tuple[str, ...],
    shuffled: frozenset[str],
) -> pl.DataFrame:
    """The ``columns`` of the sources' files (``source_id`` from the folder; each source's
    rows in line order, ``shuffled`` sources sorted), the run as a category as
    ``detector_rows`` gives it."""
    paths = {str(path): source for source in sources for path in files.get(source, [])}
    if not paths:  # the columns' own types: a screen compares them (a store of no stats)
        types = {**polars_schema("engine_stats"), **polars_schema("spec_decode")}
        empty = pl.DataFrame(schema={c: types.get(c, pl.String) for c in columns})
        return empty.with_columns(pl.col("run_id").cast(pl.Categorical))
    scan = pl.scan_parquet(list(paths), include_file_paths=_PATH, extra_columns="ignore")
    return (
        sort_shuffled(
            scan.select(*(c for c in columns if c != "source_id"), _source(paths)),
            shuffled & set(sources),
        )
        .with_columns(pl.col("run_id").cast(pl.Categorical))
        .collect()
        .rechunk()
    )


def _batches(sources: dict[str, int], rows: int) -> list[list[str]]:
    """Sources in batches of about ``rows`` rows (a source is never split)."""
    out: list[list[str]] = [[]]
    held = 0
    for source, n in sources.items():
        if out[-1] and held + n > rows:
            out.append([])
            held = 0
        out[-1].append(source)
        held += n
    return [b for b in out if b]


__all__ = ["BATCH_ROWS", "gather_needed"]
