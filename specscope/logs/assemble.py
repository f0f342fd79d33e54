"""From staged rows to the store's tables: run ids, timestamps with years, k that only the
run's config tells, and one row per run.

Rows reach the stage block by block (``staging``); what a row's year needs from the whole
log (the year of the first timestamp) is known at the end, when ``finish`` turns the
stage into lazy frames of store columns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from specscope.acceptance import Folded, add_k_counts, from_sums, k_counts, most_common_k
from specscope.logs import label_config
from specscope.logs.derive import drafts_from_tokens_column
from specscope.logs.results import BulkRow, ParseResult, Run
from specscope.logs.staging import INTERNAL_COLUMNS, RECORD_TABLES, Stage, conform
from specscope.schema import CONFIG_COLUMNS, RUNS, TABLES, polars_schema
from specscope.store.rollup import RunSums
from specscope.vocabulary import DRAFTER_KINDS, quantization_from_model_name


class _Aggregates:
    """What the run rows and summaries need, folded a part at a time: spans, the most
    common k, summed counts and per-position sums per run."""

    def __init__(self) -> None:
        self.spans = Folded(
            lambda f: f.group_by("_run").agg(pl.col("first").min(), pl.col("last").max())
        )
        self.ks = Folded(lambda f: add_k_counts(f, ["_run"]))
        self.run_sums = RunSums("_run")

    def add(self, table: str, frame: pl.DataFrame) -> None:
        self.spans.add(
            frame.group_by("_run").agg(
                pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last")
            )
        )
        if table == "spec_decode":
            # The run row's k: of the records that printed their draft tokens.
            self.ks.add(k_counts(frame.lazy().filter(pl.col("_dt")), ["_run"]).collect())
            self.run_sums.add(frame)

    def merge(self, other: _Aggregates) -> None:
        for name in ("spans", "ks"):
            theirs: Folded = getattr(other, name)
            if theirs.parts:
                getattr(self, name).add(theirs.total())
        self.run_sums.merge(other.run_sums)


@dataclass
class Finished:
    """The rows as the store takes them, a stage part at a time, and the runs. The run
    rows and summaries are summed from the parts as they are read (a pass of their own
    only for the tables not read whole before ``runs`` is asked for)."""

    stage: Stage
    result: ParseResult
    counts: dict[str, int]
    first_year: int | None
    year_basis: str
    columns: dict[str, list[pl.Expr]]  # per table, to finish
    display: str
    source_id: str
    user: Mapping[str, Any]
    _aggregates: _Aggregates = field(default_factory=_Aggregates)
    _summed: set[str] = field(default_factory=set)  # tables read whole into the aggregates
    _runs: list[dict[str, Any]] | None = None
    _acceptance: dict[int, dict[str, Any]] | None = None

    def parts(self, table: str, columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
        """The table's rows with their final columns (plus ``_run`` and ``_dt``), part by
        part: memory holds one part at a time. ``columns``: only these of the stage (and
        only the steps that need nothing else)."""
        steps = self.columns[table]
        if columns is not None:
            # The steps that need only these columns (or what an earlier step made).
            have, kept = set(columns), []
            for step in steps:
                if set(step.meta.root_names()) <= have:
                    kept.append(step)
                    have.add(step.meta.output_name())
            steps = kept
        # A table read whole adds to the run sums; one read in part (a caller that stops
        # early) adds nothing.
        summing = _Aggregates() if table not in self._summed and self._runs is None else None
        for batch in _batches(self.stage.parts.get(table, [])):
            frames = [
                (part if columns is None else part.select(columns))
                if isinstance(part, pl.DataFrame)
                else pl.read_ipc(part, columns=columns)
                for part in batch
            ]
            sizes = [len(f) for f in frames]
            # One plan for a few parts: planning and collecting cost about 6 ms a part
            # whatever its rows. The steps are row by row, so the parts' rows come out as
            # each part's alone would, and each part is yielded (and summed) by itself.
            lazy = pl.concat([f.lazy() for f in frames]) if len(frames) > 1 else frames[0].lazy()
            del frames
            for step in steps:
                lazy = lazy.with_columns(step)
            whole = lazy.collect()
            del lazy  # its plan holds the parts read: freed before the rows are written
            if "problems" in whole.columns and "_month" in whole.columns and "ts" in whole.columns:
                bad = whole["ts"].is_null() & whole["_month"].is_not_null()
                if bad.any():  # rare: a format step for every row would cost each ingest
                    whole = whole.with_columns(_no_date(self.first_year))
            if summing is not None:
                # Sums of the batch at once: a sum a part costs each part polars' planning.
                summing.add(table, whole)
            start = 0
            for size in sizes:
                yield whole.slice(start, size)
                start += size
            del whole
        if summing is not None and table not in self._summed:
            self._aggregates.merge(summing)
            self._summed.add(table)

    def collect(self) -> dict[str, pl.DataFrame]:
        """Every table whole (for `watch` and tests; ingest streams ``parts``)."""
        columns = {t: [*polars_schema(t).names(), *INTERNAL_COLUMNS] for t in RECORD_TABLES}
        return {
            t: pl.concat(
                [f.select(columns[t]) for f in self.parts(t)]
                or [conform(pl.DataFrame(), t).select(columns[t])]
            )
            for t in RECORD_TABLES
        }

    @property
    def runs(self) -> list[dict[str, Any]]:
        """The run rows (spans, the most common k) of the store's ``runs`` table."""
        if self._runs is None:
            self._sum()
        assert self._runs is not None
        return self._runs

    def run_sums(self) -> pa.Table:
        """The ``run_sums`` rows of every spec-decode row (``specscope.store.rollup``), from the
        sums the run summary takes."""
        if "spec_decode" not in self._summed:
            for _ in self.parts("spec_decode", _AGGREGATED.get("spec_decode", _STAMP)):
                pass
        return self._aggregates.run_sums.table(
            TABLES["run_sums"], pl.format("{}-{}", pl.lit(self.source_id), pl.col("_run"))
        )

    @property
    def acceptance(self) -> dict[int, dict[str, Any]]:
        """Per run: summed counts, rate, mean length and per-position curve (the summary)."""
        if self._acceptance is None:
            self._sum()
        assert self._acceptance is not None
        return self._acceptance

    def _sum(self) -> None:
        for table in RECORD_TABLES:
            if table not in self._summed:
                for _ in self.parts(table, _AGGREGATED.get(table, _STAMP)):
                    pass
        agg = self._aggregates
        span_of = {
            r["_run"]: (r["first"], r["last"]) for r in agg.spans.total().iter_rows(named=True)
        }
        common_k: dict[int, Any] = {}
        if agg.ks.parts:
            top = most_common_k(agg.ks.total().lazy(), ["_run"]).collect()
            common_k = dict(zip(top["_run"].to_list(), top["k"].to_list(), strict=True))
        self._acceptance = _acceptance(agg.run_sums.totals.total(), agg.run_sums.positions.total())
        self._runs = [
            _run_row(
                run,
                span_of.get(run.ordinal, (None, None)),
                common_k.get(run.ordinal),
                self.display,
                self.source_id,
                self.user,
            )
            for run in self.result.runs
        ]


# Stage parts planned and collected together (``Finished.parts``): two parts a plan took
# the parts' CPU on 100 MB of server log from 0.86 to 0.64 s, four to 0.59 s; but four
# held 1 GB's peak RSS at 295 MB against 281 MB with one or two (bound: 300 MB). Gathering
# blocks into bigger stage parts, tried before, took it to 363 MB.
PARTS_PER_PLAN = 2


def _batches(parts: list[pl.DataFrame | Path]) -> Iterator[list[pl.DataFrame | Path]]:
    for at in range(0, len(parts), PARTS_PER_PLAN):
        yield parts[at : at + PARTS_PER_PLAN]


def finish(
    result: ParseResult,
    stage: Stage,
    *,
    display: str,
    source_id: str,
    mtime: datetime,
    year: int | None,
    user: Mapping[str, Any],
) -> Finished:
    first, basis = stage.years.first_year(year, mtime)
    run_k = {
        run.ordinal: k
        for run in result.runs
        if (k := run.config.get("k") or label_config.label_k(run))
    }
    columns: dict[str, list[pl.Expr]] = {}
    for table in RECORD_TABLES:
        steps = [
            pl.lit(display).alias("source"),
            pl.format("{}-{}", pl.lit(source_id), pl.col("_run")).alias("run_id"),
            _timestamp(first),
        ]
        if table == "spec_decode":
            steps += [*_k_from_config(run_k)]
            steps += [pl.col("counts").fill_null("interval"), pl.col("partial").fill_null(False)]
        steps += [e for target, row in result.patches if target == table for e in _patch(row)]
        columns[table] = steps
    return Finished(
        stage, result, dict(stage.counts), first, basis, columns, display, source_id, user
    )


_STAMP = ["_run", "_yr", "_off", "_month", "_day", "_time"]
_AGGREGATED = {
    "spec_decode": [
        *_STAMP,
        "line",
        "k",
        "_dt",
        "drafts",
        "draft_tokens",
        "accepted_tokens",
        "accepted_per_pos",
        "per_position_rate",
        "mean_acceptance_length",
    ]
}


def _acceptance(totals: pl.DataFrame, positions: pl.DataFrame) -> dict[int, dict[str, Any]]:
    """A run's acceptance from its summed counts (``acceptance.from_sums``)."""
    if totals.is_empty():
        return {}
    if positions.is_empty():
        positions = pl.DataFrame(
            schema={"_run": pl.Int64, "position": pl.Int64, "count": pl.Int64, "drafts": pl.Int64}
        )
    done = from_sums(totals.lazy(), positions.lazy(), ["_run"]).collect()
    summary = (*_SUMMARY, "per_position", "estimated")
    return {r["_run"]: {k: r[k] for k in summary} for r in done.iter_rows(named=True)}


_SUMMARY = (
    "draft_tokens",
    "accepted_tokens",
    "drafts",
    "acceptance_rate",
    "mean_acceptance_length",
)


def _timestamp(first: int | None) -> pl.Expr:
    """A row's datetime: its month, day and second of the day in the year its line printed
    or the first timestamp's year plus the years the months rolled over since (null when
    impossible, as ``datetime`` refuses a 30 February). In integers: the days since the
    epoch of a civil date (Hinnant's ``days_from_civil``) and the seconds, as
    milliseconds; the text clock parsed per row took 0.16 CPU s per 320 k rows, this 0.01."""
    if first is None:
        return pl.lit(None, pl.Datetime("ms")).alias("ts")
    year = pl.coalesce("_yr", pl.col("_off") + first)
    month, day = pl.col("_month"), pl.col("_day").fill_null(1)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    days = (
        pl.when(month == 2)
        .then(pl.when(leap).then(29).otherwise(28))
        .when(month.is_in([4, 6, 9, 11]))
        .then(30)
        .otherwise(31)
    )
    valid = month.is_between(1, 12) & year.is_between(1, 9999) & day.is_between(1, days)
    # March-based years: a leap day ends its year. Floor division, so year 1 works too.
    y = year - (month <= 2).cast(pl.Int64)
    era = y // 400
    of_era = y - era * 400
    of_year = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    of_cycle = of_era * 365 + of_era // 4 - of_era // 100 + of_year
    since_epoch = era * 146_097 + of_cycle - 719_468
    seconds = since_epoch * 86_400 + pl.col("_time").fill_null(0).cast(pl.Int64)
    return pl.when(valid).then((seconds * 1000).cast(pl.Datetime("ms"))).alias("ts")


def _no_date(first: int | None) -> pl.Expr:
    """A problem for a row whose printed date is none in its year (02-30, or 02-29 in a
    year that is not leap): its ``ts`` is null, and the row says why."""
    if first is None:
        return pl.col("problems")
    year = pl.coalesce("_yr", pl.col("_off") + first)
    seconds = pl.col("_time")
    parts = (seconds // 3600, seconds // 60 % 60, seconds % 60)
    clock = pl.format("{}:{}:{}", *(p.cast(pl.String).str.zfill(2) for p in parts))
    said = pl.format(
        "no timestamp: {}-{} {} is not a date in {}",
        pl.col("_month").cast(pl.String).str.zfill(2),
        pl.col("_day").cast(pl.String).str.zfill(2),
        clock.fill_null(""),
        year,
    )
    bad = pl.col("ts").is_null() & pl.col("_month").is_not_null()
    joined = pl.concat_str([pl.col("problems"), said], separator="; ", ignore_nulls=True)
    return pl.when(bad).then(joined).otherwise(pl.col("problems")).alias("problems")


def _k_from_config(run_k: Mapping[int, Any]) -> list[pl.Expr]:
    """Steps that give k (and so drafts and per-position counts) to records that do not
    print it, from the run's config (``derive.fill_drafts``, over columns)."""
    if not run_k:
        return []
    config_k = pl.col("_run").replace_strict(
        list(run_k), list(run_k.values()), default=None, return_dtype=pl.Int32
    )
    fill = pl.col("k").is_null() & pl.col("_dt") & config_k.is_not_null()
    drafts = drafts_from_tokens_column()
    per_pos = (pl.col("per_position_rate") * pl.col("drafts")).list.eval(
        pl.element().round(0).cast(pl.Int64)
    )
    return [
        fill.alias("_fill"),
        pl.when("_fill").then(config_k).otherwise(pl.col("k")).alias("k"),
        pl.when(pl.col("_fill") & pl.col("drafts").is_null() & (pl.col("k") > 0))
        .then(drafts)
        .otherwise(pl.col("drafts"))
        .alias("drafts"),
        pl.when(
            pl.col("_fill")
            & pl.col("accepted_per_pos").is_null()
            & pl.col("per_position_rate").list.len().gt(0)
            & pl.col("drafts").is_not_null()
        )
        .then(per_pos)
        .otherwise(pl.col("accepted_per_pos"))
        .alias("accepted_per_pos"),
    ]


def _patch(row: BulkRow) -> list[pl.Expr]:
    at = pl.col("line") == row["line"]
    return [
        pl.when(at & pl.col(k).is_null()).then(pl.lit(v)).otherwise(pl.col(k)).alias(k)
        for k, v in row.items()
        if k not in ("line", "engine")
    ]


def _fit(column: str, value: Any) -> Any:
    """A config value as its column holds it, or None when it is not one (a dict cut off
    in a paste can give ``'model': 0.123``)."""
    kind = RUNS.field(column).type
    if value is None:
        return None
    if pa.types.is_string(kind):
        return value if isinstance(value, str) else None
    if pa.types.is_boolean(kind):
        return value if isinstance(value, bool) else None
    if pa.types.is_integer(kind):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        whole = float(value).is_integer() and abs(value) < 2 ** (kind.bit_width - 1)
        return int(value) if whole else None
    return value


def _run_row(
    run: Run,
    span: tuple[Any, Any],
    common_k: int | None,
    source: str,
    source_id: str,
    user: Mapping[str, Any],
) -> dict[str, Any]:
    config = {k: v for k, v in run.config.items() if not k.startswith("_")}
    row: dict[str, Any] = {c: _fit(c, config.get(c)) for c in CONFIG_COLUMNS}
    if row["k"] is None:
        row["k"] = common_k
    label_config.apply(run, row)  # what the author's label names, where nothing else does
    if row["quantization"] is not None:
        row["quantization_source"] = "config"
    elif (guess := quantization_from_model_name(row["model"])) is not None:
        row["quantization"], row["quantization_source"] = guess, "model_name"
    apply_user(row, user)
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


def apply_user(row: dict[str, Any], user: Mapping[str, Any]) -> None:
    """What the user said of a run (``--set``, ``--label``) over what its log said, at its
    ingest or later (``reconfigure``), and what follows from it."""
    for key, value in user.items():
        row[key] = value
        if key == "quantization":
            row["quantization_source"] = "user"
    row["drafter_kind"] = DRAFTER_KINDS.get(row.get("spec_method") or "")


def reconfigure(rows: list[dict[str, Any]], user: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Runs already in the store, with the user's settings applied (added to the ones given
    before): a new runs file of their source replaces the old one, and no log is read."""
    out = []
    for row in rows:
        row = dict(row)
        said = {**json.loads(row.get("overrides") or "{}"), **user}
        apply_user(row, user)
        row["overrides"] = json.dumps(said)
        out.append(row)
    return out


__all__ = ["Finished", "apply_user", "finish", "reconfigure"]
