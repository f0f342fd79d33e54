"""From a parse result to the store's tables: run ids, timestamps with years, k that only
the run's config tells, and one row per run. Rows the line parser made (dicts) and rows
read in bulk (frames) end up in the same frames, in log order."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl
import pyarrow as pa

from specscope.derive import DRAFTER_KINDS, fill_drafts, quantization_from_model_name
from specscope.parse import ParseResult, Run
from specscope.schema import CONFIG_COLUMNS, TABLES
from specscope.timestamps import resolve_frame

RECORD_TABLES = ("spec_decode", "engine_stats", "events", "bench")
_INTERNAL = {
    "_run": pl.Int64,
    "_year": pl.Int64,
    "_month": pl.Int64,
    "_day": pl.Int64,
    "_time": pl.String,
    "_dt": pl.Boolean,  # the record printed its draft tokens (so k may come from config)
}


@dataclass
class Finished:
    tables: dict[str, pl.DataFrame]  # the record tables, store columns plus `_run`
    runs: list[dict[str, Any]]
    first_year: int | None
    year_basis: str


def schema_of(table: str) -> pl.Schema:
    return pl.from_arrow(TABLES[table].empty_table()).schema  # type: ignore[union-attr]


def _dict_rows(rows: list[dict[str, Any]], table: str) -> pl.DataFrame:
    names = TABLES[table].names
    out = []
    for r in rows:
        ts = r.get("_ts") or (None, None, None, None)
        row = {k: r.get(k) for k in names}
        row.update(
            _run=r["_run"],
            _year=ts[0],
            _month=ts[1],
            _day=ts[2],
            _time=ts[3],
            _dt="draft_tokens" in r,
        )
        out.append(row)
    arrow = pa.Table.from_pylist(
        out,
        schema=pa.schema(
            [
                *TABLES[table],
                *(
                    pa.field(k, pl.DataFrame(schema={k: t}).to_arrow().schema[0].type)
                    for k, t in _INTERNAL.items()
                ),
            ]
        ),
    )
    return pl.from_arrow(arrow)  # type: ignore[return-value]


def _conform(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """A frame with exactly the table's columns and types, plus the internal ones."""
    schema = {**dict(schema_of(table)), **_INTERNAL}
    return frame.select(
        (pl.col(c).cast(t) if c in frame.columns else pl.lit(None, t)).alias(c)
        for c, t in schema.items()
    )


def _bulk_frame(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    frame = frame.with_columns(
        pl.col("_month").cast(pl.Int64),
        pl.col("_day").cast(pl.Int64),
        (
            pl.col("draft_tokens").is_not_null()
            if "draft_tokens" in frame.columns
            else pl.lit(False)
        ).alias("_dt"),
    )
    return _conform(frame, table)


def finish(
    result: ParseResult,
    *,
    display: str,
    source_id: str,
    mtime: datetime,
    year: int | None,
    user: Mapping[str, Any],
) -> Finished:
    tables: dict[str, pl.DataFrame] = {}
    for table in RECORD_TABLES:
        parts = [_conform(_dict_rows(result.tables.get(table, []), table), table)]
        parts += [_bulk_frame(f, table) for f in result.frames.get(table, [])]
        tables[table] = (
            pl.concat(parts).with_row_index("_order").sort("line", "_order", maintain_order=True)
        )
    # Years: every record of every table, in log order (rows of one line in table order).
    stamps = pl.concat(
        [
            t.select("line", "_order", "_year", "_month", "_day", "_time").with_columns(
                pl.lit(rank, pl.Int64).alias("_table")
            )
            for rank, t in enumerate(tables.values())
        ]
    ).with_row_index("_at")
    stamps = stamps.sort("line", "_table", "_order", maintain_order=True)
    ts, first_year, basis = resolve_frame(stamps, year=year, mtime=mtime)
    stamped = stamps.select("_at").with_columns(ts.alias("ts")).sort("_at")["ts"]
    run_k = {run.ordinal: run.config.get("k") for run in result.runs if run.config.get("k")}
    at = 0
    for table, frame in list(tables.items()):
        n = len(frame)
        frame = frame.with_columns(
            stamped.slice(at, n).alias("ts"),
            pl.lit(display).alias("source"),
            pl.format("{}-{}", pl.lit(source_id), pl.col("_run")).alias("run_id"),
        ).drop("_order")
        at += n
        if table == "spec_decode" and run_k:
            frame = _k_from_config(frame, run_k)
        if table == "spec_decode":
            frame = frame.with_columns(
                pl.col("counts").fill_null("interval"), pl.col("partial").fill_null(False)
            )
        tables[table] = frame
    spans = {
        r["_run"]: (r["first"], r["last"])
        for r in pl.concat([t.select("_run", "ts") for t in tables.values()])
        .group_by("_run")
        .agg(pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last"))
        .iter_rows(named=True)
    }
    # The most common k of a run's records; the first seen among equals (Counter's way).
    ks = (
        tables["spec_decode"]
        .filter(pl.col("k").is_not_null() & pl.col("_dt"))
        .group_by("_run", "k")
        .agg(pl.len(), pl.col("line").min())
        .sort(["_run", "len", "line"], descending=[False, True, False])
        .unique("_run", keep="first")
    )
    common_k = dict(zip(ks["_run"].to_list(), ks["k"].to_list(), strict=True))
    runs = [
        _run_row(
            run,
            spans.get(run.ordinal, (None, None)),
            common_k.get(run.ordinal),
            display,
            source_id,
            user,
        )
        for run in result.runs
    ]
    return Finished(tables, runs, first_year, basis)


def _k_from_config(frame: pl.DataFrame, run_k: dict[int, Any]) -> pl.DataFrame:
    """k (and so drafts and per-position counts) for records that do not print it, from
    the run's config."""
    wanted = pl.col("k").is_null() & pl.col("_dt") & pl.col("_run").is_in(list(run_k))
    if not frame.select(wanted.any()).item():
        return frame
    frame = frame.with_row_index("_fill")
    rows = frame.filter(wanted).to_dicts()
    for r in rows:
        r["k"] = run_k[r["_run"]]
        fill_drafts(r)
    filled = pl.DataFrame(rows, schema=frame.schema)
    return frame.filter(~wanted).vstack(filled).sort("_fill").drop("_fill")


def _run_row(
    run: Run,
    span: tuple[Any, Any],
    common_k: int | None,
    source: str,
    source_id: str,
    user: Mapping[str, Any],
) -> dict[str, Any]:
    config = {k: v for k, v in run.config.items() if not k.startswith("_")}
    row: dict[str, Any] = {c: config.get(c) for c in CONFIG_COLUMNS}
    if row["k"] is None:
        row["k"] = common_k
    if row["quantization"] is not None:
        row["quantization_source"] = "config"
    elif (guess := quantization_from_model_name(row["model"])) is not None:
        row["quantization"], row["quantization_source"] = guess, "model_name"
    for key, value in user.items():
        row[key] = value
        if key == "quantization":
            row["quantization_source"] = "user"
    row["drafter_kind"] = DRAFTER_KINDS.get(row["spec_method"] or "")
    first_ts, last_ts = span
    row.update(
        run_id=f"{source_id}-{run.ordinal}",
        source=source,
        ordinal=run.ordinal,
        first_line=run.first_line,
        last_line=run.last_line,
        first_ts=first_ts,
        last_ts=last_ts,
        server=config.get("server") or "vllm",
        pids=json.dumps(
            {
                name: [pid, *run.side_pids[name]] if name in run.side_pids else pid
                for name, pid in run.procs.items()
            }
        )
        if run.procs
        else None,
        spec_records=run.counts.get("spec_decode", 0),
        stats_records=run.counts.get("engine_stats", 0),
        events=run.counts.get("events", 0),
        config=json.dumps({**config, "lines": run.config.get("_config_lines", [])}, default=str),
        overrides=json.dumps(user) if user else None,
    )
    return row


def store_columns(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """The frame as the store holds it: the table's columns, without the internal ones."""
    return frame.select(schema_of(table).names())


__all__ = ["RECORD_TABLES", "Finished", "finish", "schema_of", "store_columns"]
