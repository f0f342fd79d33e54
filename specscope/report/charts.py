"""The report's charts, as Vega-Lite specs (plain dicts) built from store frames. Titles
and labels that come from logs are passed through the report's redactor; Vega renders text
as text, never as markup.

Plain dicts, not Altair: importing Altair and validating its objects cost a report about
as much CPU as drawing the charts (tests validate the specs against Vega-Lite's schema)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from specscope.stats import wilson

Redact = Callable[[str | None], str | None]
Spec = dict[str, Any]
WIDTH = 560
HEIGHT = 260
MAX_POINTS = 2000  # per chart; more only makes the report heavier, not clearer
SCHEMA = "https://vega.github.io/schema/vega-lite/v6.4.1.json"
# A run's or a setup's label on an axis or in a legend, in characters: Vega's own limit
# (in pixels) measures each label again and again to cut it, which made a chart of thirty
# labels cost vl-convert half a second; cut by characters, each label is measured once.
LABEL_CHARS = 60
_LABELS = {"labelLimit": 0, "labelExpr": f"truncate(datum.label, {LABEL_CHARS})"}


def _config() -> Spec:
    """Altair's default view (the specs draw as they did when Altair built them), and no
    limit in pixels on labels (numbers, or cut by ``LABEL_CHARS``)."""
    return {
        "view": {"continuousWidth": 300, "continuousHeight": 300},
        "axis": {"labelLimit": 0},
        "legend": {"labelLimit": 0},
    }


def _field(name: str, kind: str, **more: Any) -> Spec:
    """An encoding channel: ``kind`` is Vega-Lite's type (quantitative, ordinal, ...)."""
    return {"field": name, "type": kind, **more}


def _run_color(title: str | None = None) -> Spec:
    return _field("run", "nominal", legend=dict(_LABELS), **({"title": title} if title else {}))


def _chart(rows: list[dict[str, Any]], title: str, body: Spec, **more: Any) -> Spec:
    """A whole spec: the data inline, ``body`` (a mark and its encoding, or layers)."""
    return {
        "$schema": SCHEMA,
        "config": _config(),
        "data": {"values": rows},
        **body,
        "title": title,
        "width": WIDTH,
        "height": HEIGHT,
        **more,
    }


def per_position(per_run: list[dict[str, Any]], redact: Redact, *, z: float) -> Spec | None:
    """Per-position acceptance a_i per run, with Wilson bands (drafts as trials)."""
    rows = []
    for run in per_run:
        counts = run.get("accepted_per_pos") or []
        drafts = run.get("drafts") or 0
        for i, count in enumerate(counts):
            if count is None or not drafts:
                continue
            low, high = wilson(count, drafts, z)
            rows.append(
                {
                    "run": redact(str(run["label"])),
                    "position": i + 1,
                    "acceptance": count / drafts,
                    "low": low,
                    "high": high,
                }
            )
    if not rows:
        return None
    x = _field("position", "ordinal", title="draft position")
    band = {
        "mark": {"type": "area", "opacity": 0.2},
        "encoding": {
            "color": _run_color("run"),
            "x": x,
            "y": _field("low", "quantitative"),
            "y2": {"field": "high"},
        },
    }
    line = {
        "mark": {"type": "line", "point": True},
        "encoding": {
            "color": _run_color("run"),
            "tooltip": [
                _field("run", "nominal"),
                _field("position", "ordinal"),
                _field("acceptance", "quantitative", format=".3f"),
            ],
            "x": x,
            "y": _field(
                "acceptance",
                "quantitative",
                scale={"domain": [0, 1]},
                title="accepted (share of drafts)",
            ),
        },
    }
    return _chart(rows, "Per-position acceptance", {"layer": [band, line]})


# The spec-decode columns the charts read (filters over millions of rows copy only these).
READS = (
    "run_id",
    "ts",
    "drafts",
    "draft_tokens",
    "accepted_tokens",
    "running_reqs",
    "prefix_cache_hit_rate",
)


def over_time(
    spec: pl.DataFrame, redact: Redact, labels: Mapping[str, str] | None = None
) -> Spec | None:
    """Each interval's acceptance rate, with the running requests of its engine stats. Runs
    far apart in time (launches pasted from different days) are drawn each from its own
    start, so that the data fills the chart instead of two slivers of a long axis."""
    rows = spec.filter(pl.col("ts").is_not_null() & (pl.col("draft_tokens") > 0))
    if rows.height < 2:
        return None
    spans = rows.group_by("run_id").agg(
        pl.col("ts").min().alias("start"), pl.col("ts").max().alias("end"), pl.len()
    )
    starts: list[datetime] = spans["start"].to_list()
    ends: list[datetime] = spans["end"].to_list()
    longest = max(e - s for s, e in zip(starts, ends, strict=True))
    apart = len(starts) > 1 and max(starts) - min(starts) > max(timedelta(hours=1), 3 * longest)
    # A run's points: no more than the chart has pixels across (more are drawn on top of
    # each other, and a PNG of 2,000 bars and points took resvg 2.5 s), and inline data
    # small enough for a page.
    per_run = max(2, min(WIDTH, MAX_POINTS // max(1, spans.height)))
    if rows.height > MAX_POINTS or spans.select(pl.col("len").max()).item() > per_run:
        # Merge neighbouring intervals into time buckets, summing counts before dividing
        # as everywhere else.
        span = longest if apart else max(ends) - min(starts)
        # Buckets start on multiples of their width: a span of n - 1 widths touches n.
        bucket = f"{max(1, math.ceil(span.total_seconds() / (per_run - 1)))}s"
        rows = (
            rows.with_columns(pl.col("ts").dt.truncate(bucket))
            .group_by("run_id", "ts")
            .agg(
                pl.col("accepted_tokens").sum(),
                pl.col("draft_tokens").sum(),
                pl.col("running_reqs").mean(),
            )
            .sort("ts")
        )
    rows = rows.join(spans.select("run_id", "start"), on="run_id", how="left").select(
        pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S").alias("time"),
        ((pl.col("ts") - pl.col("start")).dt.total_seconds() / 60).alias("minutes"),
        (pl.col("accepted_tokens") / pl.col("draft_tokens")).alias("acceptance"),
        pl.col("running_reqs"),
        pl.col("run_id").cast(pl.String).alias("run"),
    )
    named = labels or {}
    data = [{**r, "run": redact(named.get(r["run"], r["run"]))} for r in rows.to_dicts()]
    x = (
        _field("minutes", "quantitative", title="minutes since the run's start")
        if apart
        else _field("time", "temporal", title="time")
    )
    running = {
        "mark": {"type": "bar", "color": "gray", "opacity": 0.25},
        "encoding": {"x": x, "y": _field("running_reqs", "quantitative", title="requests running")},
    }
    rate = {
        "mark": {"type": "line", "point": True},
        "encoding": {
            "color": _run_color(),
            "x": x,
            "y": _field(
                "acceptance", "quantitative", scale={"domain": [0, 1]}, title="acceptance rate"
            ),
        },
    }
    note = " Runs far apart in time are each drawn from their own start." if apart else ""
    return _chart(
        data,
        "Acceptance over time, with requests running",
        {"layer": [running, rate]},
        resolve={"scale": {"y": "independent"}},
        usermeta={"note": note},
    )


def _weighted(spec: pl.DataFrame, by: str, z: float) -> list[dict[str, object]]:
    grouped = (
        spec.filter(pl.col(by).is_not_null() & pl.col("drafts").is_not_null())
        .group_by(by)
        .agg(pl.col("accepted_tokens").sum(), pl.col("draft_tokens").sum(), pl.col("drafts").sum())
        .sort(by)
    )
    out = []
    for r in grouped.to_dicts():
        if not r["draft_tokens"] or not r["drafts"]:
            continue
        k = r["draft_tokens"] / r["drafts"]
        low, high = wilson(r["accepted_tokens"] / k, r["drafts"], z)
        out.append(
            {
                by: r[by],
                "acceptance": r["accepted_tokens"] / r["draft_tokens"],
                "low": low,
                "high": high,
                "drafts": r["drafts"],
            }
        )
    return out


def against_running(spec: pl.DataFrame, *, z: float) -> Spec | None:
    rows = _weighted(spec, "running_reqs", z)
    if len(rows) < 2:
        return None
    x = _field("running_reqs", "ordinal", title="requests running")
    interval = {
        "mark": {"type": "rule"},
        "encoding": {"x": x, "y": _field("low", "quantitative"), "y2": {"field": "high"}},
    }
    point = {
        "mark": {"type": "point", "filled": True, "size": 80},
        "encoding": {
            "tooltip": [
                _field("running_reqs", "ordinal"),
                _field("acceptance", "quantitative", format=".3f"),
                _field("drafts", "quantitative"),
            ],
            "x": x,
            "y": _field(
                "acceptance",
                "quantitative",
                scale={"domain": [0, 1]},
                title="acceptance rate (summed counts)",
            ),
        },
    }
    return _chart(rows, "Acceptance against requests running", {"layer": [interval, point]})


def against_prefix_cache(
    spec: pl.DataFrame, redact: Redact, labels: Mapping[str, str] | None = None
) -> Spec | None:
    """Acceptance (summed counts) per run and prefix-cache hit rate, in bins of one
    percentage point (coarser when runs would give more than MAX_POINTS points)."""
    rows = spec.lazy().filter(
        pl.col("prefix_cache_hit_rate").is_not_null() & (pl.col("draft_tokens") > 0)
    )
    # One pass for the sizes (a store may hold millions of intervals); runs come together.
    n, rates, runs = (
        rows.select(
            pl.len(),
            pl.col("prefix_cache_hit_rate").n_unique(),
            pl.col("run_id").rle_id().max() + 1,
        )
        .collect()
        .row(0)
    )
    if n < 2 or rates < 2:
        return None
    return prefix_cache_chart(
        prefix_cache_added(prefix_cache_sums(rows, prefix_cache_bins(runs))), redact, labels
    )


def prefix_cache_bins(runs: int | None) -> int:
    """Bins of hit rate: one percentage point, coarser when ``runs`` lines would give more
    than ``MAX_POINTS`` points."""
    return max(2, min(100, MAX_POINTS // max(1, runs or 1)))


def prefix_cache_sums(rows: pl.DataFrame | pl.LazyFrame, bins: int) -> pl.DataFrame:
    """Per run and bin of hit rate, the counts summed (of rows with a hit rate and drafted
    tokens); the sums of parts of the rows add up to those of the whole."""
    return (
        rows.lazy()
        .group_by(
            pl.col("run_id").cast(pl.String).alias("run"),
            ((pl.col("prefix_cache_hit_rate") * bins).round(0) / bins).alias(
                "prefix_cache_hit_rate"
            ),
        )
        .agg(pl.col("accepted_tokens", "draft_tokens", "drafts").sum())
        .collect()
    )


def prefix_cache_added(sums: pl.DataFrame) -> pl.DataFrame:
    """``prefix_cache_sums`` of parts added up, each bin's acceptance from its sums."""
    return (
        sums.group_by("run", "prefix_cache_hit_rate")
        .agg(pl.col("accepted_tokens", "draft_tokens", "drafts").sum())
        .select(
            "run",
            "prefix_cache_hit_rate",
            (pl.col("accepted_tokens") / pl.col("draft_tokens")).alias("acceptance"),
            "drafts",
        )
        .sort("run", "prefix_cache_hit_rate")
    )


def prefix_cache_chart(
    binned: pl.DataFrame, redact: Redact, labels: Mapping[str, str] | None = None
) -> Spec:
    """The chart of ``prefix_cache_added``'s bins."""
    named = labels or {}
    data = [
        {**r, "run": redact(named.get(str(r["run"]), str(r["run"])))} for r in binned.to_dicts()
    ]
    body = {
        "mark": {"type": "circle", "opacity": 0.6},
        "encoding": {
            "color": _run_color(),
            "size": _field("drafts", "quantitative", title="drafts"),
            "tooltip": [
                _field("run", "nominal"),
                _field("prefix_cache_hit_rate", "quantitative", format=".2f"),
                _field("acceptance", "quantitative", format=".3f"),
                _field("drafts", "quantitative"),
            ],
            "x": _field(
                "prefix_cache_hit_rate",
                "quantitative",
                scale={"domain": [0, 1]},
                title="prefix cache hit rate",
            ),
            "y": _field(
                "acceptance",
                "quantitative",
                scale={"domain": [0, 1]},
                title="acceptance rate (summed counts)",
            ),
        },
    }
    return _chart(data, "Acceptance against prefix cache hit rate", body)


def across_runs(per_run: list[dict[str, Any]], redact: Redact, *, z: float) -> Spec | None:
    rows = []
    for run in per_run:
        drafts, tokens, accepted = (
            run.get("drafts"),
            run.get("draft_tokens"),
            run.get("accepted_tokens"),
        )
        if not drafts or not tokens:
            continue
        k = tokens / drafts
        low, high = wilson(accepted / k, drafts, z)
        rows.append(
            {
                "run": redact(str(run["label"])),
                "acceptance": run["acceptance_rate"],
                "low": low,
                "high": high,
            }
        )
    if len(rows) < 2:
        return None
    y = _field("run", "nominal", sort=None, title=None, axis=dict(_LABELS))
    bar = {
        "mark": {"type": "bar"},
        "encoding": {
            "x": _field(
                "acceptance",
                "quantitative",
                scale={"domain": [0, 1]},
                title="acceptance rate (summed counts)",
            ),
            "y": y,
        },
    }
    interval = {
        "mark": {"type": "rule", "color": "black"},
        "encoding": {"x": _field("low", "quantitative"), "x2": {"field": "high"}, "y": y},
    }
    return _chart(
        rows, "Acceptance across runs", {"layer": [bar, interval]}, height=max(120, 26 * len(rows))
    )


__all__ = ["across_runs", "against_prefix_cache", "against_running", "over_time", "per_position"]
