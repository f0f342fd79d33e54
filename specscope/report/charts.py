"""The report's charts, as Altair specs built from store frames. Titles and labels that
come from logs are passed through the report's redactor; Vega renders text as text, never
as markup."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import altair as alt
import polars as pl

from specscope.stats import wilson

Redact = Callable[[str | None], str | None]
WIDTH = 560
HEIGHT = 260
MAX_POINTS = 2000  # per chart; more only makes the report heavier, not clearer


def _frame(rows: list[dict[str, object]]) -> alt.Data:
    return alt.Data(values=rows)


def per_position(
    per_run: list[dict[str, Any]], redact: Redact, *, z: float
) -> alt.LayerChart | None:
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
    base = alt.Chart(_frame(rows)).encode(
        x=alt.X("position:O", title="draft position"),
        color=alt.Color("run:N", title="run"),
    )
    band = base.mark_area(opacity=0.2).encode(y="low:Q", y2="high:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("acceptance:Q", title="accepted (share of drafts)", scale=alt.Scale(domain=[0, 1])),
        tooltip=["run:N", "position:O", alt.Tooltip("acceptance:Q", format=".3f")],
    )
    return (band + line).properties(title="Per-position acceptance", width=WIDTH, height=HEIGHT)


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
) -> alt.LayerChart | None:
    """Each interval's acceptance rate, with the running requests of its engine stats. Runs
    far apart in time (launches pasted from different days) are drawn each from its own
    start, so that the data fills the chart instead of two slivers of a long axis."""
    rows = spec.filter(pl.col("ts").is_not_null() & (pl.col("draft_tokens") > 0))
    if rows.height < 2:
        return None
    spans = rows.group_by("run_id").agg(
        pl.col("ts").min().alias("start"), pl.col("ts").max().alias("end")
    )
    starts: list[datetime] = spans["start"].to_list()
    ends: list[datetime] = spans["end"].to_list()
    longest = max(e - s for s, e in zip(starts, ends, strict=True))
    apart = len(starts) > 1 and max(starts) - min(starts) > max(timedelta(hours=1), 3 * longest)
    if rows.height > MAX_POINTS:
        # Inline data must stay small enough for a page: merge neighbouring intervals into
        # time buckets, summing counts before dividing as everywhere else.
        span = longest if apart else max(ends) - min(starts)
        per_run = max(2, MAX_POINTS // max(1, spans.height))
        bucket = f"{max(1, math.ceil(span.total_seconds() / per_run))}s"
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
    data = _frame([{**r, "run": redact(named.get(r["run"], r["run"]))} for r in rows.to_dicts()])
    x = (
        alt.X("minutes:Q", title="minutes since the run's start")
        if apart
        else alt.X("time:T", title="time")
    )
    base = alt.Chart(data).encode(x=x)
    rate = base.mark_line(point=True).encode(
        y=alt.Y("acceptance:Q", title="acceptance rate", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("run:N"),
    )
    running = base.mark_bar(opacity=0.25, color="gray").encode(
        y=alt.Y("running_reqs:Q", title="requests running"),
    )
    note = " Runs far apart in time are each drawn from their own start." if apart else ""
    return (
        alt.layer(running, rate)
        .resolve_scale(y="independent")
        .properties(
            title="Acceptance over time, with requests running",
            width=WIDTH,
            height=HEIGHT,
            usermeta={"note": note},
        )
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


def against_running(spec: pl.DataFrame, *, z: float) -> alt.LayerChart | None:
    rows = _weighted(spec, "running_reqs", z)
    if len(rows) < 2:
        return None
    base = alt.Chart(_frame(rows)).encode(x=alt.X("running_reqs:O", title="requests running"))
    return (
        base.mark_rule().encode(y="low:Q", y2="high:Q")
        + base.mark_point(filled=True, size=80).encode(
            y=alt.Y(
                "acceptance:Q",
                title="acceptance rate (summed counts)",
                scale=alt.Scale(domain=[0, 1]),
            ),
            tooltip=["running_reqs:O", alt.Tooltip("acceptance:Q", format=".3f"), "drafts:Q"],
        )
    ).properties(title="Acceptance against requests running", width=WIDTH, height=HEIGHT)


def against_prefix_cache(
    spec: pl.DataFrame, redact: Redact, labels: Mapping[str, str] | None = None
) -> alt.Chart | None:
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
    bins = max(2, min(100, MAX_POINTS // max(1, runs or 1)))
    binned = (
        rows.group_by(
            pl.col("run_id").alias("run"),
            ((pl.col("prefix_cache_hit_rate") * bins).round(0) / bins).alias(
                "prefix_cache_hit_rate"
            ),
        )
        .agg(
            (pl.col("accepted_tokens").sum() / pl.col("draft_tokens").sum()).alias("acceptance"),
            pl.col("drafts").sum(),
        )
        .sort("run", "prefix_cache_hit_rate")
        .collect()
    )
    named = labels or {}
    data = _frame(
        [{**r, "run": redact(named.get(str(r["run"]), str(r["run"])))} for r in binned.to_dicts()]
    )
    return (
        alt.Chart(data)
        .mark_circle(opacity=0.6)
        .encode(
            x=alt.X(
                "prefix_cache_hit_rate:Q",
                title="prefix cache hit rate",
                scale=alt.Scale(domain=[0, 1]),
            ),
            y=alt.Y(
                "acceptance:Q",
                title="acceptance rate (summed counts)",
                scale=alt.Scale(domain=[0, 1]),
            ),
            size=alt.Size("drafts:Q", title="drafts"),
            color="run:N",
            tooltip=[
                "run:N",
                alt.Tooltip("prefix_cache_hit_rate:Q", format=".2f"),
                alt.Tooltip("acceptance:Q", format=".3f"),
                "drafts:Q",
            ],
        )
        .properties(title="Acceptance against prefix cache hit rate", width=WIDTH, height=HEIGHT)
    )


def across_runs(
    per_run: list[dict[str, Any]], redact: Redact, *, z: float
) -> alt.LayerChart | None:
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
    base = alt.Chart(_frame(rows)).encode(y=alt.Y("run:N", title=None, sort=None))
    return (
        base.mark_bar().encode(
            x=alt.X(
                "acceptance:Q",
                title="acceptance rate (summed counts)",
                scale=alt.Scale(domain=[0, 1]),
            )
        )
        + base.mark_rule(color="black").encode(x="low:Q", x2="high:Q")
    ).properties(title="Acceptance across runs", width=WIDTH, height=max(120, 26 * len(rows)))


__all__ = ["across_runs", "against_prefix_cache", "against_running", "over_time", "per_position"]
