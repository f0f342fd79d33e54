"""Acceptance against prefix caching: between runs with it on and off, and within a run
against the hit rate."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import polars as pl

from specscope.analysis.evidence import (
    Evidence,
    below,
    below_test,
    confidence,
    counts_of,
    finding_for,
    method_of,
    scalar,
)
from specscope.analysis.findings import Finding, Severity


def prefix_cache(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["prefix_cache_penalty"]
    need = ev.config["evidence"]["min_drafts_per_side"]
    by_setup: dict[tuple[Any, Any], dict[bool, list[str]]] = {}
    for run_id, run in ev.runs.items():
        caching = run.get("enable_prefix_caching")
        if caching is None or method_of(run) is None:
            continue
        by_setup.setdefault((run.get("model"), method_of(run)), {}).setdefault(caching, []).append(
            run_id
        )
    for (model, method), sides in by_setup.items():
        if True not in sides or False not in sides:
            continue
        rows_on = ev.spec_of(*sides[True])
        rows_off = ev.spec_of(*sides[False])
        on, off = counts_of(rows_on), counts_of(rows_off)
        if on["drafts"] < need or off["drafts"] < need or on["rate"] is None or off["rate"] is None:
            continue
        level = below(ev, on, off)
        if off["rate"] - on["rate"] >= cfg["min_drop"] and level is not None:
            out.append(
                finding_for(
                    ev,
                    "prefix_cache_penalty",
                    Severity.WARNING,
                    ",".join(sides[True]),
                    rows_on,
                    explanation=f"With prefix caching on, {method} on {model} accepts "
                    f"{on['rate']:.1%}; with it off, {off['rate']:.1%}. Cached prefixes feed "
                    "the drafter hidden states it did not compute itself (reported for DFlash "
                    "on vLLM: turning caching off lifted it from 20% to 30-35%).",
                    next_step="serve with --no-enable-prefix-caching while this is open, and "
                    "report the pair of runs upstream",
                    measured={"rate_caching_on": on["rate"], "rate_caching_off": off["rate"]},
                    expected={"difference below": cfg["min_drop"]},
                    sample={"drafts_on": on["drafts"], "drafts_off": off["drafts"]},
                    confidence=confidence(
                        ev,
                        level,
                        below_test(on, off, ("with caching on", "off")),
                        {"drafts": on["drafts"] + off["drafts"]},
                    ),
                )
            )
    # Within a run: acceptance against the hit rate of the same interval.
    # A run's rows a slice of these: one chunk, not one a run.
    usable = (
        ev.spec_of(*ev.runs)
        .filter(pl.col("prefix_cache_hit_rate").is_not_null() & pl.col("drafts").is_not_null())
        .rechunk()
    )
    offset = 0
    for run_id, n, low, high, mean_low, mean_high in _halves(usable):
        rows = usable.slice(offset, n)
        offset += n
        if n < 6:
            continue
        if (
            low["drafts"] < need
            or high["drafts"] < need
            or low["rate"] is None
            or high["rate"] is None
        ):
            continue
        spread = mean_high - mean_low if mean_high is not None and mean_low is not None else None
        if not spread or spread <= 0:
            continue
        slope = (high["rate"] - low["rate"]) / spread
        level = below(ev, high, low)
        if slope <= -cfg["min_slope"] and level is not None:
            out.append(
                finding_for(
                    ev,
                    "prefix_cache_penalty",
                    Severity.WARNING,
                    run_id,
                    rows,
                    explanation="Within this run, intervals with more prefix-cache hits accept "
                    f"less: {low['rate']:.1%} at lower hit rates, {high['rate']:.1%} at higher "
                    "ones.",
                    next_step="compare a run with --no-enable-prefix-caching on the same workload",
                    measured={
                        "rate_low_hit_rate": low["rate"],
                        "rate_high_hit_rate": high["rate"],
                        "slope_per_hit_rate": slope,
                    },
                    expected={"slope above": -cfg["min_slope"]},
                    sample={"drafts_low": low["drafts"], "drafts_high": high["drafts"]},
                    confidence=confidence(
                        ev,
                        level,
                        below_test(high, low, ("at higher hit rates", "at lower")),
                        {"drafts": low["drafts"] + high["drafts"]},
                    ),
                )
            )
    return out


def _halves(
    rows: pl.DataFrame,
) -> Iterator[tuple[str, int, dict[str, Any], dict[str, Any], float | None, float | None]]:
    """Each run's rows (together, in the evidence's order) split at the run's median hit
    rate: the counts (as ``counts_of`` sums them) and the mean hit rate of the intervals at
    or below it and above it, in one grouped pass: a few polars calls a run were 0.5-0.7
    CPU s over 2,000 runs (issue 23). The means are the Series' (a grouped mean adds in
    another order: the last digit moved in a third of the runs)."""
    hit = pl.col("prefix_cache_hit_rate")
    middle = pl.col("_middle")
    sides = {"low": hit <= middle, "high": hit > middle}
    cols = ("drafts", "accepted_tokens", "draft_tokens")
    split = (
        rows.select("run_id", hit, *cols)
        .with_columns(hit.median().over("run_id").alias("_middle"))
        .group_by("run_id", maintain_order=True)
        .agg(
            pl.len().alias("n"),
            *(pl.col(c).filter(m).sum().alias(f"{c}_{n}") for n, m in sides.items() for c in cols),
            *(hit.filter(m).alias(f"hits_{n}") for n, m in sides.items()),
        )
        .with_columns(pl.col("run_id").cast(pl.String))
    )

    def counts(got: dict[str, Any], n: str) -> dict[str, Any]:
        drafts, accepted, tokens = (int(got[f"{c}_{n}"] or 0) for c in cols)
        return {
            "drafts": drafts,
            "accepted": accepted,
            "draft_tokens": tokens,
            "k": tokens / drafts if drafts else 0,
            "rate": accepted / tokens if tokens else None,
        }

    def mean(hits: list[float]) -> float | None:
        return scalar(pl.Series(hits, dtype=pl.Float64).mean(), float) if hits else None

    for got in split.iter_rows(named=True):
        low, high = counts(got, "low"), counts(got, "high")
        # The means only where the sides' counts let the detector go on to them.
        wanted = got["n"] >= 6 and min(low["drafts"], high["drafts"]) > 0
        yield (
            got["run_id"],
            got["n"],
            low,
            high,
            mean(got["hits_low"]) if wanted else None,
            mean(got["hits_high"]) if wanted else None,
        )
