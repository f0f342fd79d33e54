"""Keeping what a pull or a scrape read: the intervals past each target's watermark go to
the store's tables, one run per target (instance, model and engine), and the source's row
keeps the watermarks the next pull continues from."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from specscope.prometheus.intervals import Intervals
from specscope.schema import store_columns
from specscope.store.reading import Store
from specscope.store.sources import sources_row
from specscope.store.writing import StoreWriter


@dataclass
class PullReport:
    url: str
    selector: str | None
    source_id: str
    start: datetime
    end: datetime
    requests: int = 0
    samples: int = 0
    added: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    notes: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # windows that could not be read
    watermark: datetime | None = None
    kind: str = "prometheus"  # or "scrape": a /metrics endpoint read directly

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for key in ("start", "end", "watermark"):
            d[key] = d[key].isoformat() if d[key] is not None else None
        return d


def store_intervals(
    writer: StoreWriter,
    store: Store,
    got: Intervals,
    report: PullReport,
    marks: dict[str, float],
    previous: dict[str, Any] | None,
    read_until: float,
    known: list[dict[str, Any]],
) -> None:
    """Keep the intervals past their target's watermark (or the window's start) and up to
    the end of what was read, then move the watermarks to the newest interval kept."""
    start = report.start.timestamp()
    new_marks = dict(marks)
    kept: dict[str, pl.DataFrame] = {}
    for table in ("spec_decode", "engine_stats"):
        rows = getattr(got, table)
        if rows.is_empty():
            kept[table] = rows
            continue
        keys = rows["_key"].unique().to_list()
        since = pl.DataFrame(
            {"_key": keys, "_since": [marks.get(k, start) for k in keys]},
            schema={"_key": pl.String, "_since": pl.Float64},
        )
        target = ["_instance", "_model", "_engine"]
        runs = rows.select(target).unique()
        runs = runs.with_columns(
            pl.Series(
                "run_id",
                [_run_id(report.source_id, *t) for t in runs.iter_rows()],
                pl.String,
            )
        )
        rows = (
            rows.join(since, on="_key", maintain_order="left")
            .filter((pl.col("_t") > pl.col("_since")) & (pl.col("_t") <= read_until))
            .join(runs, on=target, nulls_equal=True, maintain_order="left")
        )
        for key, newest in rows.group_by("_key").agg(pl.col("_t").max()).iter_rows():
            if newest > new_marks.get(key, 0.0):
                new_marks[key] = newest
        kept[table] = rows.with_columns(pl.lit(report.url).alias("source"))
        report.added[table] = writer.add_parts(
            table, report.source_id, [store_columns(kept[table], table)]
        )
    run_rows = _run_rows(store, report, got, kept)
    writer.add("runs", report.source_id, run_rows)
    report.runs = len(run_rows)
    if new_marks:
        report.watermark = datetime.fromtimestamp(min(new_marks.values()), UTC)
    row = _source_row(report, previous, new_marks, writer.ingest_id)
    writer.replace_sources([k for k in known if k["source_id"] != report.source_id] + [row])


def _run_id(
    source_id: str, instance: str | None, model: str | None, engine: str | None = None
) -> str:
    # A target without an engine label keeps the id it had before engines were told apart.
    name = f"{instance}|{model}" + ("" if engine is None else f"|{engine}")
    tag = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{source_id}-{tag}"


def _run_rows(
    store: Store, report: PullReport, got: Intervals, added: Mapping[str, pl.DataFrame]
) -> list[dict[str, Any]]:
    """The source's runs (one per instance, model and engine): those stored before, updated
    with what this pull saw, with their record counts."""
    before = {
        r["run_id"]: r
        for r in store.runs.filter(pl.col("source_id") == report.source_id).collect().to_dicts()
    }
    for (instance, model, engine), config in got.runs.items():
        run_id = _run_id(report.source_id, instance, model, engine)
        row = before.setdefault(run_id, {"run_id": run_id, "ordinal": len(before) + 1})
        who = {"instance": instance} | ({} if engine is None else {"engine": engine})
        row.update(
            source=report.url,
            server=config.get("server", "vllm"),
            model=model,
            pids=json.dumps(who),
        )
        for key in ("enable_prefix_caching", "kv_cache_dtype", "k"):
            if config.get(key) is not None:
                row[key] = config[key]
    for table, column in (("spec_decode", "spec_records"), ("engine_stats", "stats_records")):
        stored = (
            getattr(store, table)
            .filter(pl.col("source_id") == report.source_id)
            .group_by("run_id")
            .agg(pl.len().alias("n"))
            .collect()
        )
        counts = dict(zip(stored["run_id"], stored["n"], strict=True))
        if not added[table].is_empty():
            spans = (
                added[table]
                .group_by("run_id")
                .agg(pl.len(), pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last"))
            )
            for run_id, n, first, last in spans.iter_rows():
                counts[run_id] = counts.get(run_id, 0) + n
                # When each run was seen: two engines of one server overlap in time, one
                # setup restarted at another load does not.
                if run_id in before:
                    row = before[run_id]
                    row["first_ts"] = min(t for t in (row.get("first_ts"), first) if t)
                    row["last_ts"] = max(t for t in (row.get("last_ts"), last) if t)
        for run_id, row in before.items():
            row[column] = counts.get(run_id, 0)
    # Where no per-position series names k, the k its rows drafted (SGLang's setup gauges:
    # a chain's steps), when they all say one.
    rows = added["spec_decode"]
    if not rows.is_empty() and "k" in rows.columns:
        said = rows.filter(pl.col("k").is_not_null()).group_by("run_id").agg(pl.col("k").unique())
        for run_id, ks in said.iter_rows():
            if run_id in before and before[run_id].get("k") is None and len(ks) == 1:
                before[run_id]["k"] = ks[0]
    for row in before.values():
        row.pop("source_id", None)
    return list(before.values())


def _source_row(
    report: PullReport, previous: dict[str, Any] | None, marks: dict[str, float], ingest_id: str
) -> dict[str, Any]:
    prev = previous or {}
    return sources_row(
        report.source_id,
        report.url + (f" {report.selector}" if report.selector else ""),
        report.kind,
        ingest_id,
        spec_records=(prev.get("spec_records") or 0) + report.added.get("spec_decode", 0),
        stats_records=(prev.get("stats_records") or 0) + report.added.get("engine_stats", 0),
        runs=report.runs,
        events=0,
        bench_records=0,
        skipped_lines=0,
        watermark=report.watermark.replace(tzinfo=None) if report.watermark else None,
        watermarks=json.dumps(marks) if marks else prev.get("watermarks"),
    )


__all__ = ["PullReport", "store_intervals"]
