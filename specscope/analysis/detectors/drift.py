"""Acceptance that changes level within a run."""

from __future__ import annotations

import numpy as np
import polars as pl

from specscope.analysis.evidence import (
    Evidence,
    finding_for,
)
from specscope.analysis.findings import Confidence, Finding, Severity
from specscope.stats import SPLIT_POINTS, coverage, drift_split, wilson_arrays


def drift(ev: Evidence) -> list[Finding]:
    # One polars pass over every run's usable rows, then each series (a run, or an engine
    # of a data-parallel run) a slice of numpy arrays: a few polars calls a run cost 2 s
    # over 2,000 runs (issue 23).
    rows = ev.spec_of(*ev.runs).filter(
        pl.col("drafts").is_not_null()
        & (pl.col("draft_tokens") > 0)
        & pl.col("accepted_tokens").is_not_null()
    )
    if rows.is_empty():
        return []
    if "engine" not in rows.columns:
        rows = rows.with_columns(pl.lit(None, pl.Int64).alias("engine"))
    cols = rows.select(
        pl.col("run_id").cast(pl.String).rle_id().alias("part"),
        pl.col("engine").is_null().alias("engine_null"),
        pl.col("engine").cast(pl.Int64).fill_null(0).alias("engine"),
        *(pl.col(c).is_null().alias(f"{c}_null") for c in ("ts", "line")),
        *(pl.col(c).cast(pl.Int64).fill_null(0) for c in ("ts", "line")),
        *(pl.col(c).fill_null(0) for c in ("drafts", "draft_tokens", "accepted_tokens")),
    )
    arrays = {c: cols[c].to_numpy() for c in cols.columns}
    counts = np.column_stack([arrays[c] for c in ("drafts", "draft_tokens", "accepted_tokens")])
    bounds = np.flatnonzero(np.diff(arrays["part"])) + 1
    starts = np.r_[0, bounds]
    ends = np.r_[bounds, rows.height]
    run_ids = rows["run_id"].cast(pl.String).gather(starts).to_list()
    # What a finding reads of its rows (its lines, window and source): a gather of every
    # column for each engine's finding cost more than the detector's sums.
    shown = rows.select("run_id", "line", "end_line", "ts").rechunk()
    series: list[tuple[str, int | None, np.ndarray]] = []
    # A run of requests (a capture of responses, a request log) is no series in time: a
    # request accepted less than the rest is request_acceptance's and request_outlier's.
    requests = set() if ev.requests is None else set(ev.requests["run_id"].cast(pl.String))
    for run_id, start, end in zip(run_ids, starts.tolist(), ends.tolist(), strict=True):
        if end - start < 4 or run_id in requests:
            continue
        parts = _engine_series(arrays, start, end)
        series += [(run_id, engine if len(parts) > 1 else None, at) for engine, at in parts]
    # The series in time order already, split all at once (the others each on its own).
    batch = [
        i
        for i, (_, _, at) in enumerate(series)
        if len(at) <= SPLIT_POINTS + 1 and _in_order(arrays, at)
    ]
    cfg, evidence = ev.config["acceptance_drift"], ev.config["evidence"]
    ats = [series[i][2] for i in batch]
    best = _splits(counts, ats, evidence["min_drafts_per_side"], cfg["min_change"], evidence["z"])
    found = [j for j, b in enumerate(best) if b is not None]
    certain = _splits(
        counts,
        [ats[j] for j in found],
        evidence["min_drafts_per_side"],
        cfg["min_change"],
        evidence["z_certain"],
    )
    split: dict[int, tuple[Split | None, Split | None]] = {i: (None, None) for i in batch}
    split.update({batch[j]: (best[j], c) for j, c in zip(found, certain, strict=True)})
    out = []
    for i, (run_id, engine, at) in enumerate(series):
        finding = _drift_of(
            ev, run_id, (rows, shown), arrays, counts, at, engine, split.get(i, "unsplit")
        )
        if finding is not None:
            out.append(finding)
    return out


Split = tuple[float, float, int]


def _splits(
    counts: np.ndarray, ats: list[np.ndarray], need: int, min_change: float, z: float
) -> list[Split | None]:
    """``stats.drift_split`` of many series at once (each the rows at positions ``at`` of
    ``counts``, in order): the same arithmetic element by element, each series' first
    split of the largest change among those whose intervals do not overlap. A call a
    series was most of the detector's time over 2,000 runs."""
    if not ats:
        return []
    lengths = np.array([len(at) for at in ats])
    ends = np.cumsum(lengths)
    starts = ends - lengths
    cum = np.cumsum(counts[np.concatenate(ats)], axis=0)
    base = np.zeros((len(ats), cum.shape[1]), dtype=cum.dtype)
    base[starts > 0] = cum[starts[starts > 0] - 1]
    d, t, a = (cum - np.repeat(base, lengths, axis=0)).astype(np.float64).T
    of = np.repeat(np.arange(len(ats)), lengths)
    last = ends - 1
    splittable = np.ones(len(d), dtype=bool)
    splittable[last] = False  # a split after each interval but the last
    after = np.flatnonzero(splittable)
    d1, t1, a1 = d[after], t[after], a[after]
    end = last[of[after]]
    d2, t2, a2 = d[end] - d1, t[end] - t1, a[end] - a1
    ok = np.flatnonzero((d1 >= need) & (d2 >= need) & (t1 > 0) & (t2 > 0))
    d1, t1, a1, d2, t2, a2 = (x[ok] for x in (d1, t1, a1, d2, t2, a2))
    r1, r2 = a1 / t1, a2 / t2
    lo1, hi1 = wilson_arrays(a1 / (t1 / d1), d1, z)
    lo2, hi2 = wilson_arrays(a2 / (t2 / d2), d2, z)
    change = np.abs(r2 - r1)
    good = (change >= min_change) & ((hi1 < lo2) | (hi2 < lo1))
    score = np.where(good, change, -1.0)
    series = of[after][ok]
    # Each series' largest score, the first of equal ones: by series, score down, position.
    order = np.lexsort((np.arange(len(ok)), -score, series))
    heads = order[np.r_[True, series[order][1:] != series[order][:-1]]] if len(ok) else order
    out: list[Split | None] = [None] * len(ats)
    for j in heads.tolist():
        if good[j]:
            s = int(series[j])
            at = int(after[ok[j]]) - int(starts[s]) + 1
            out[s] = (float(r1[j]), float(r2[j]), at)
    return out


def _engine_series(
    arrays: dict[str, np.ndarray], start: int, end: int
) -> list[tuple[int | None, np.ndarray]]:
    """The run's rows (their positions) by engine (data parallel) in the order each engine
    first comes, or all of them as one series; rows without an engine are a series of
    their own in a data-parallel run."""
    known = ~arrays["engine_null"][start:end]
    engines = arrays["engine"][start:end]
    if len(np.unique(engines[known])) <= 1:
        return [(None, np.arange(start, end))]
    keys = np.where(known, engines, np.iinfo(np.int64).min)
    _, first = np.unique(keys, return_index=True)
    out: list[tuple[int | None, np.ndarray]] = []
    for i in np.sort(first):
        at = start + np.flatnonzero(keys == keys[i])
        if len(at) >= 4:
            out.append((int(engines[i]) if known[i] else None, at))
    return out


def _drift_of(
    ev: Evidence,
    run_id: str,
    frames: tuple[pl.DataFrame, pl.DataFrame],
    arrays: dict[str, np.ndarray],
    counts: np.ndarray,
    at: np.ndarray,
    engine: int | None,
    split: tuple[Split | None, Split | None] | str,
) -> Finding | None:
    """The series of rows at positions ``at`` of ``frames`` (the usable rows of all runs,
    and their columns a finding shows), taken in time order; ``split`` its best and certain
    splits where made already ("unsplit" where not)."""
    every, shown = frames
    cfg = ev.config["acceptance_drift"]
    need = ev.config["evidence"]["min_drafts_per_side"]
    z = ev.config["evidence"]["z"]
    rows: pl.DataFrame | None = None
    if isinstance(split, tuple) and split[0] is None:
        return None  # split with the others (in order), and no change found
    if not isinstance(split, tuple) and not _in_order(arrays, at):
        rows = _in_time_order(every[at])
        counts = rows.select(
            pl.col(c).fill_null(0) for c in ("drafts", "draft_tokens", "accepted_tokens")
        ).to_numpy()
        at = np.arange(rows.height)
    drafts, tokens, accepted = np.cumsum(counts[at], axis=0).T
    if isinstance(split, tuple):
        best, certain = split
    else:
        best = drift_split(drafts, tokens, accepted, need, cfg["min_change"], z)
        certain = drift_split(
            drafts, tokens, accepted, need, cfg["min_change"], ev.config["evidence"]["z_certain"]
        )
    if best is None:
        return None
    r1, r2, i = best
    total_d = int(drafts[-1])
    if rows is None:  # the positions in order: one slice where they follow one another
        contiguous = int(at[-1]) - int(at[0]) == len(at) - 1
        rows = shown.slice(int(at[0]), len(at)) if contiguous else shown[at]
    when = rows["ts"][i] or rows["line"][i]
    of = f" of engine {engine}" if engine is not None else ""
    return finding_for(
        ev,
        "acceptance_drift",
        Severity.WARNING if r2 < r1 else Severity.INFO,
        run_id,
        rows,
        explanation=f"Acceptance{of} changes level within the run: {r1:.1%} before "
        f"{when}, {r2:.1%} after. Something changed mid-run: the workload, the load, "
        "or the server.",
        next_step="compare the engine stats and events around that point; if the "
        "workload changed there, the two parts are two workloads: ingest each part of "
        "the log on its own and compare them (specscope compare RUN_A RUN_B)",
        measured={
            "rate_before": r1,
            "rate_after": r2,
            "change_at": str(when),
            **({"engine": engine} if engine is not None else {}),
        },
        expected={"change below": cfg["min_change"]},
        sample={
            "drafts_before": int(drafts[i - 1]),
            "drafts_after": total_d - int(drafts[i - 1]),
        },
        confidence=Confidence(
            "certain" if certain is not None else "likely",
            "the two parts' "
            f"{coverage(ev.config['evidence']['z_certain'] if certain else z)}"
            " intervals do not overlap",
            {"drafts": total_d},
        ),
    )


def _in_order(arrays: dict[str, np.ndarray], at: np.ndarray) -> bool:
    """Whether ``_in_time_order`` leaves these rows as they are: each of its keys without
    nulls and in order."""
    nulls = {c: int(arrays[f"{c}_null"][at].sum()) for c in ("ts", "line")}
    keys = [c for c in ("ts", "line") if nulls[c] < len(at)] or ["line"]
    return all(nulls[c] == 0 and bool((np.diff(arrays[c][at]) >= 0).all()) for c in keys)


def _in_time_order(rows: pl.DataFrame) -> pl.DataFrame:
    """A run's rows by time, then line; rows read from a log mostly are already."""
    keys = [c for c in ("ts", "line") if rows[c].null_count() < rows.height] or ["line"]
    if all(rows[c].null_count() == 0 and rows[c].is_sorted() for c in keys):
        return rows  # each key in order: so is the pair
    return rows.sort(keys, maintain_order=True)
