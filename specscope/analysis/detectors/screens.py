"""Which runs a row-reading detector needs to look at, decided for all runs at once.

``drift``, ``concurrency``, ``kv_saturation``, ``prefix_cache`` and ``no_speedup`` look at
each run's rows (or each group of runs') one after the other: a few polars calls a run,
which over thousands of runs costs seconds whatever the rows hold. Each screen here is a
necessary condition of its detector's finding, computed for every run in one grouped
pass over the rows; the detector then runs on an ``Evidence`` narrowed to the runs that
pass (whole groups where the detector groups runs). A screen may let a run through that
the detector then rejects, never the other way: ``findings_of(ev, screened=False)`` gives
the same findings, and ``tests/test_fleet.py`` holds the two to each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from specscope.analysis.evidence import Evidence, method_of
from specscope.stats import drift_split

# Slack for float comparisons made here and again in the detector (sums in another order).
_EPS = 1e-9

Screen = Callable[[Evidence], set[str] | None]


def narrowed(ev: Evidence, keep: Iterable[str]) -> Evidence:
    """``ev`` with only the runs in ``keep`` (in their order); the frames, their per-run
    slices and the per-run sums are shared, not copied."""
    wanted = set(keep)
    return replace(ev, runs={r: run for r, run in ev.runs.items() if r in wanted})


def _rate(acc: str, tok: str) -> pl.Expr:
    return pl.when(pl.col(tok) > 0).then(pl.col(acc) / pl.col(tok))


def drift(ev: Evidence) -> set[str] | None:
    """The detector's own split (``stats.drift_split``) of every run at once: the rows
    sorted by run once, each run's cumulative counts a slice. A run whose rows are not in
    time order already (the detector would sort them) is let through."""
    need = ev.config["evidence"]["min_drafts_per_side"]
    change = ev.config["acceptance_drift"]["min_change"]
    usable = (
        pl.col("drafts").is_not_null()
        & (pl.col("draft_tokens") > 0)
        & pl.col("accepted_tokens").is_not_null()
    )
    rows = ev.spec.filter(usable).select(
        pl.col("run_id").cast(pl.String),
        "ts",
        "line",
        pl.col("engine") if "engine" in ev.spec.columns else pl.lit(None).alias("engine"),
        *(pl.col(c).fill_null(0) for c in ("drafts", "draft_tokens", "accepted_tokens")),
    )
    if rows.is_empty():
        return set()
    rows = rows.with_columns(pl.col("run_id").rle_id().alias("_part"))
    # Each run's rows together (``Evidence`` keeps them so), in the order the detector
    # takes them when they are already in time order.
    order = rows.group_by("_part", maintain_order=True).agg(
        pl.col("run_id").first(),
        pl.len().alias("n"),
        *(
            (
                (pl.col(c).null_count() == 0)
                & (pl.col(c).cast(pl.Int64).diff().fill_null(0) >= 0).all()
            ).alias(f"{c}_sorted")
            for c in ("ts", "line")
        ),
        *(pl.col(c).null_count().alias(f"{c}_nulls") for c in ("ts", "line")),
        (pl.col("engine").drop_nulls().n_unique() > 1).alias("engines"),
    )
    if order["run_id"].n_unique() != order.height:  # a run's rows apart: let all through
        return None
    keep: set[str] = set()
    counts = [rows[c].to_numpy() for c in ("drafts", "draft_tokens", "accepted_tokens")]
    z = ev.config["evidence"]["z"]
    start = 0
    for run_id, n, ts_sorted, line_sorted, ts_nulls, line_nulls, engines in order.select(
        "run_id", "n", "ts_sorted", "line_sorted", "ts_nulls", "line_nulls", "engines"
    ).iter_rows():
        end = start + n
        keys = [s for s, nulls in ((ts_sorted, ts_nulls), (line_sorted, line_nulls)) if nulls < n]
        if n >= 4:
            if engines or not all(keys or [line_sorted]):
                keep.add(run_id)  # per engine, or sorted, in the detector: judged there
            else:
                d, t, a = (np.cumsum(c[start:end]) for c in counts)
                if drift_split(d, t, a, need, change, z) is not None:
                    keep.add(run_id)
        start = end
    return keep


def kv_saturation(ev: Evidence) -> set[str] | None:
    """Saturated intervals at all, and their share at least ``min_share`` (the Wilson lower
    bound the detector tests never exceeds the share itself)."""
    cfg = ev.config["kv_cache_saturation"]
    full = (pl.col("kv_cache_usage") >= cfg["min_usage"]) & (
        pl.col("waiting_reqs").fill_null(0) > 0
    )
    passed = (
        ev.stats.lazy()
        .filter(pl.col("kv_cache_usage").is_not_null())
        .group_by("run_id")
        .agg(pl.len().alias("n"), full.sum().alias("full"))
        .filter((pl.col("full") > 0) & (pl.col("full") >= cfg["min_share"] * pl.col("n") - _EPS))
        .collect()
    )
    return {str(r) for r in passed["run_id"].to_list()}


def _sides(ev: Evidence) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per run, and per engine of each run, the counts with one request running and with
    two or more (the two sides ``concurrency`` compares), as ``counts_of`` sums them."""
    usable = (
        pl.col("drafts").is_not_null()
        & pl.col("running_reqs").is_not_null()
        & (pl.col("running_reqs") >= 1)
    )
    one, many = pl.col("running_reqs") == 1, pl.col("running_reqs") >= 2
    cols = ("drafts", "accepted_tokens", "draft_tokens")
    spec = ev.spec.lazy()
    if "engine" not in ev.spec.columns:
        spec = spec.with_columns(pl.lit(None, pl.Int64).alias("engine"))
    engines = (
        spec.filter(usable)
        .group_by("run_id", "engine")
        .agg(
            *(pl.col(c).filter(one).sum().alias(f"one_{c}") for c in cols),
            *(pl.col(c).filter(many).sum().alias(f"many_{c}") for c in cols),
        )
        .with_columns(pl.col("run_id").cast(pl.String))
        .collect()
    )
    sums = [f"{side}_{c}" for side in ("one", "many") for c in cols]
    runs = engines.group_by("run_id").agg(pl.col(sums).sum())
    return runs, engines.filter(pl.col("engine").is_not_null())


def _collapses(ev: Evidence, sums: dict[str, float]) -> bool:
    """Whether summed sides pass the detector's tests before its bound test."""
    need = ev.config["evidence"]["min_drafts_per_side"]
    if sums["one_drafts"] < need or sums["many_drafts"] < need:
        return False
    if not sums["one_draft_tokens"] or not sums["many_draft_tokens"]:
        return False
    one = sums["one_accepted_tokens"] / sums["one_draft_tokens"]
    many = sums["many_accepted_tokens"] / sums["many_draft_tokens"]
    return bool(many < ev.config["concurrency_collapse"]["max_ratio"] * one + _EPS)


def concurrency(ev: Evidence) -> set[str] | None:
    """A run alone, or the runs of one setup restarted at another load (``load._setups``:
    runs of a source with the same configuration that overlap no other in time), must
    show the collapse in their summed counts. The detector forms its setups from the runs
    it is given, so a setup is kept whole: every run of a (source, configuration) where
    any of its groups passes. An author's claim of a slowdown under concurrency (a bench
    row's ``"concurrency": true``, parsers/stated_claims.toml) is read whatever the runs:
    with any, no screen."""
    if (
        "extra" in ev.bench.columns
        and ev.bench["extra"].str.contains('"concurrency": true', literal=True).any()
    ):
        return None
    whole, by_engine = _sides(ev)
    sides = {r["run_id"]: r for r in whole.to_dicts()}
    # A data-parallel run is judged engine by engine there (its sum can hide one engine),
    # and only so: it passes alone where one of its engines does.
    dp = ev.data_parallel()
    engine_passes = {
        str(r["run_id"])
        for r in by_engine.filter(pl.col("run_id").is_in(list(dp))).to_dicts()
        if _collapses(ev, r)
    }
    keys = ("spec_method", "k", "model", "quantization", "tensor_parallel_size", "hardware")
    setups: dict[tuple[Any, ...], list[str]] = {}
    for run_id, run in ev.runs.items():
        setups.setdefault((run.get("source_id"), *(run.get(k) for k in keys)), []).append(run_id)
    empty = dict.fromkeys(next(iter(sides.values()), {}), 0)
    keep: set[str] = set()
    for ids in setups.values():
        alone = [
            r
            for r in ids
            if r in sides and (r in engine_passes if r in dp else _collapses(ev, sides[r]))
        ]
        together = _one_after_another(ev, ids)  # the setup's group, if two or more
        if len(together) > 1 and empty:
            summed = {
                c: sum((sides.get(r) or empty)[c] or 0 for r in together)
                for c in empty
                if c != "run_id"
            }
            if _collapses(ev, summed):
                keep.update(ids)
                continue
        if not alone:
            continue
        # The runs that pass alone, and the setup's group (which did not pass) if it has
        # one, each other run with a run it overlaps: among them the detector finds the
        # setup's group as it is, and no other.
        chosen = set(alone) | (set(together) if len(together) > 1 else set())
        for run_id in alone:
            if run_id not in together:
                chosen.add(next(o for o in ids if o != run_id and _overlap(ev, run_id, o)))
        keep.update(chosen)
    return keep


def _overlap(ev: Evidence, a: str, b: str) -> bool:
    """``load``'s overlap of two runs in time (a run without both ends overlaps none)."""
    a0, a1 = ev.runs[a].get("first_ts"), ev.runs[a].get("last_ts")
    b0, b1 = ev.runs[b].get("first_ts"), ev.runs[b].get("last_ts")
    if a0 is None or a1 is None or b0 is None or b1 is None:
        return False
    return bool(a0 <= b1 and b0 <= a1)


def _one_after_another(ev: Evidence, run_ids: list[str]) -> list[str]:
    """The runs that overlap no other in time (a run without both ends overlaps none), as
    ``load`` decides it, in one sort instead of every pair: in order of start, a run
    overlaps another when it starts before an earlier one ends or the next one starts
    before it ends."""
    spans = [(ev.runs[r].get("first_ts"), ev.runs[r].get("last_ts"), r) for r in run_ids]
    timed: list[tuple[Any, Any, str]] = sorted(
        ((s, e, r) for s, e, r in spans if s is not None and e is not None), key=lambda t: t[0]
    )
    if any(start > end for start, end, _ in timed):  # not a span: every pair, as load does
        return [
            r
            for s, e, r in spans
            if s is None
            or e is None
            or not any(s <= e2 and s2 <= e for s2, e2, o in timed if o != r)
        ]
    overlapping: set[str] = set()
    latest = None
    for i, (start, end, run_id) in enumerate(timed):
        after = timed[i + 1][0] if i + 1 < len(timed) else None
        if (latest is not None and start <= latest) or (after is not None and after <= end):
            overlapping.add(run_id)
        latest = end if latest is None else max(latest, end)
    return [r for r in run_ids if r not in overlapping]


def prefix_cache(ev: Evidence) -> set[str] | None:
    """Between runs: every run of a (model, method) with caching on and off both, kept
    whole when the summed sides show the drop. Within a run: its intervals split at the
    median hit rate must show ``min_slope``, as the detector computes it."""
    cfg = ev.config["prefix_cache_penalty"]
    need = ev.config["evidence"]["min_drafts_per_side"]
    keep: set[str] = set()
    by_setup: dict[tuple[Any, Any], dict[bool, list[str]]] = {}
    for run_id, run in ev.runs.items():
        caching = run.get("enable_prefix_caching")
        if caching is not None and method_of(run) is not None:
            by_setup.setdefault((run.get("model"), method_of(run)), {}).setdefault(
                caching, []
            ).append(run_id)
    paired = [s for s in by_setup.values() if True in s and False in s]
    if paired:
        # counts_of over a run's rows sums what the per-run sums hold (nulls as nothing).
        totals = ev.per_run
        nothing = {"drafts": 0, "accepted_tokens": 0, "draft_tokens": 0}
        for sides in paired:
            on, off = (
                {c: sum((totals.get(r) or nothing)[c] or 0 for r in sides[v]) for c in nothing}
                for v in (True, False)
            )
            if on["drafts"] < need or off["drafts"] < need:
                continue
            if not on["draft_tokens"] or not off["draft_tokens"]:
                continue
            drop = (
                off["accepted_tokens"] / off["draft_tokens"]
                - on["accepted_tokens"] / on["draft_tokens"]
            )
            if drop >= cfg["min_drop"] - _EPS:
                keep.update(sides[True] + sides[False])
    hit = pl.col("prefix_cache_hit_rate")
    usable = ev.spec.lazy().filter(hit.is_not_null() & pl.col("drafts").is_not_null())
    middle = usable.group_by("run_id").agg(hit.median().alias("middle"), pl.len().alias("n"))
    high = hit > pl.col("middle")
    low = ~high
    cols = ("drafts", "accepted_tokens", "draft_tokens")
    split = (
        usable.join(middle.filter(pl.col("n") >= 6), on="run_id")
        .group_by("run_id")
        .agg(
            *(pl.col(c).filter(low).sum().alias(f"low_{c}") for c in cols),
            *(pl.col(c).filter(high).sum().alias(f"high_{c}") for c in cols),
            hit.filter(low).mean().alias("low_hit"),
            hit.filter(high).mean().alias("high_hit"),
        )
        .filter(
            (pl.col("low_drafts") >= need)
            & (pl.col("high_drafts") >= need)
            & (pl.col("low_draft_tokens") > 0)
            & (pl.col("high_draft_tokens") > 0)
            & (pl.col("high_hit") > pl.col("low_hit"))
        )
        .with_columns(
            (
                (_rate("high_accepted_tokens", "high_draft_tokens"))
                - _rate("low_accepted_tokens", "low_draft_tokens")
            ).alias("change")
        )
        # slope = change / spread <= -min_slope, the spread positive
        .filter(
            pl.col("change") <= -cfg["min_slope"] * (pl.col("high_hit") - pl.col("low_hit")) + _EPS
        )
        .collect()
    )
    keep.update(str(r) for r in split["run_id"].to_list())
    # A setup the detector sees in part would be compared in part: whole or not at all.
    for sides in paired:
        members = sides[True] + sides[False]
        if keep.intersection(members):
            keep.update(members)
    return keep


def no_speedup(ev: Evidence) -> set[str] | None:
    """A launch without speculation is compared only with the runs of its own source: the
    sources that have one, whole. Benchmarks and stated comparisons read every run (the
    one a comparison speaks of): with any, no screen."""
    if not ev.bench.is_empty():
        return None
    plain = {
        run.get("source_id")
        for run_id, run in ev.runs.items()
        if not ev.per_run.get(run_id, {}).get("records")
        and not run.get("spec_method")
        and not run.get("spec_records")
    }
    return {r for r, run in ev.runs.items() if run.get("source_id") in plain}


__all__ = ["Screen", "concurrency", "drift", "kv_saturation", "narrowed", "no_speedup"]
