"""What moves acceptance across runs: per factor (prefix caching, quantization, k, ...),
the weighted acceptance of each value, the effect where two runs differ in that factor
alone, and otherwise what the factor is confounded with."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import polars as pl

from specscope.analysis.findings import json_safe
from specscope.analysis.forced import forced_runs
from specscope.stats import newcombe, wilson

FACTORS = (
    "load",  # the run's typical requests running (see _load)
    "source",  # which log (or server) the run came from
    "enable_prefix_caching",
    "quantization",
    "hardware",
    "spec_method",
    "k",
    "vllm_version",
    "kv_cache_dtype",
    "attention_backend",
)


def factor_sums(spec: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Per run, what ``what_moves`` reads of its rows: the summed counts of the rows with
    drafts and the median requests running. A run's rows all come from one source, so the
    sums of a store's sources taken a batch at a time, concatenated, are those of the whole
    store."""
    lazy = spec.lazy()
    running = (
        pl.col("running_reqs") if "running_reqs" in lazy.collect_schema().names() else pl.lit(None)
    )
    return (
        lazy.filter(pl.col("drafts").is_not_null())
        .group_by("run_id")
        .agg(
            pl.col("accepted_tokens").sum(),
            pl.col("draft_tokens").sum(),
            pl.col("drafts").sum(),
            running.median().alias("running"),
        )
        .with_columns(pl.col("run_id").cast(pl.String))
        .collect()
    )


def what_moves(
    spec: pl.DataFrame | None,
    runs: Mapping[str, Mapping[str, Any]],
    *,
    z: float,
    sums: pl.DataFrame | None = None,
    keep_pairs: int | None = None,
) -> list[dict[str, Any]]:
    """Per factor: weighted acceptance per value, and the effect where two runs differ in
    that factor alone (matched pairs); where no such pair exists, what it is confounded with.
    From the rows in ``spec``, or their ``factor_sums`` already made (``sums``).
    ``keep_pairs``: each factor's matched pairs cut to those at either end of the
    differences, ``matched_pairs_total`` saying how many there are."""
    per_run: dict[str, dict[str, float]] = {}
    loads: dict[str, str | None] = {}
    if sums is None:
        if spec is None:
            raise ValueError("what_moves needs the rows or their factor_sums")
        sums = factor_sums(spec)
    # A run whose acceptance a setting forces moves with the setting, not the factors.
    set_apart = forced_runs(runs)
    # In the order of the runs: the same whichever order the sums were made in.
    for row in sums.sort("run_id").to_dicts():
        if row["draft_tokens"] and row["run_id"] not in set_apart:
            per_run[row["run_id"]] = row
            loads[row["run_id"]] = _load(row["running"])
    runs = {r: {**runs.get(r, {}), "load": loads.get(r)} for r in per_run}
    out = []
    for factor in FACTORS:
        values: dict[Any, list[str]] = {}
        for run_id in per_run:
            value = runs.get(run_id, {}).get(factor)
            if value is not None:
                values.setdefault(value, []).append(run_id)
        if len(values) < 2:
            continue
        groups = []
        for value, ids in sorted(values.items(), key=lambda kv: str(kv[0])):
            acc = sum(per_run[i]["accepted_tokens"] for i in ids)
            tokens = sum(per_run[i]["draft_tokens"] for i in ids)
            drafts = sum(per_run[i]["drafts"] for i in ids)
            low, high = wilson(acc / (tokens / drafts), drafts, z)
            groups.append(
                {
                    "value": json_safe(value),
                    "runs": len(ids),
                    "drafts": drafts,
                    "acceptance_rate": acc / tokens,
                    "interval": [low, high],
                }
            )
        others = [f for f in FACTORS if f != factor]
        # Only runs alike in everything else can pair: bucket them first rather than try
        # every pair (thousands of runs would make that quadratic).
        alike: dict[str, list[str]] = {}
        for run_id in sorted(per_run):
            run = runs.get(run_id, {})
            if run.get(factor) is not None:
                key = repr([run.get("model"), *(run.get(o) for o in others)])
                alike.setdefault(key, []).append(run_id)
        pairs, total = _pairs(alike, per_run, runs, factor, z, keep_pairs)
        confounded = (
            sorted(
                {
                    o
                    for o in others
                    if len({str(runs.get(i, {}).get(o)) for ids in values.values() for i in ids})
                    > 1
                }
            )
            if not pairs
            else []
        )
        move: dict[str, Any] = {
            "factor": factor,
            "groups": groups,
            "matched_pairs": pairs,
            "confounded_with": confounded,
        }
        if keep_pairs is not None:
            move["matched_pairs_total"] = total
        out.append(move)
    return out


_Candidate = tuple[float, str, str, Any, Any]  # difference, run a, run b, their values


def _pairs(
    alike: Mapping[str, list[str]],
    per_run: Mapping[str, Mapping[str, float]],
    runs: Mapping[str, Mapping[str, Any]],
    factor: str,
    z: float,
    keep: int | None,
) -> tuple[list[dict[str, Any]], int]:
    """The matched pairs (by run ids), and how many there are. ``keep``: where there are
    more than twice as many, only the ``keep`` of lowest difference and the ``keep`` of
    highest (by difference, then ids), in that order; the rest are counted, never made
    (runs alike by the thousand pair by the hundred thousand)."""
    rate = {r: s["accepted_tokens"] / s["draft_tokens"] for r, s in per_run.items()}

    def candidates() -> Iterator[_Candidate]:
        for ids in alike.values():
            for a, b in itertools.combinations(ids, 2):
                va, vb = runs[a].get(factor), runs[b].get(factor)
                if va == vb:
                    continue
                if str(va) > str(vb):  # every pair in one direction, so effects compare
                    a, b, va, vb = b, a, vb, va
                yield rate[b] - rate[a], a, b, va, vb

    def made(chosen: Iterable[_Candidate]) -> list[dict[str, Any]]:
        return [_pair(per_run[a], per_run[b], a, b, va, vb, z) for _, a, b, va, vb in chosen]

    total = sum(1 for _ in candidates()) if keep is not None else 0
    if keep is None or total <= 2 * keep:
        pairs = made(candidates())
        pairs.sort(key=lambda p: (p["run_a"], p["run_b"]))
        return pairs, len(pairs)

    def rank(c: _Candidate) -> tuple[float, str, str]:
        return c[0], c[1], c[2]

    lowest = heapq.nsmallest(keep, candidates(), key=rank)
    highest = sorted(heapq.nlargest(keep, candidates(), key=rank), key=rank)
    return made(lowest) + made(highest), total


def _pair(
    a: Mapping[str, float],
    b: Mapping[str, float],
    id_a: str,
    id_b: str,
    va: Any,
    vb: Any,
    z: float,
) -> dict[str, Any]:
    pa = a["accepted_tokens"] / a["draft_tokens"]
    pb = b["accepted_tokens"] / b["draft_tokens"]
    low, high = newcombe(a, b, z)
    return {
        "run_a": id_a,
        "value_a": json_safe(va),
        "run_b": id_b,
        "value_b": json_safe(vb),
        "rate_a": pa,
        "rate_b": pb,
        "difference": pb - pa,
        "interval": [low, high],
    }


__all__ = ["FACTORS", "factor_sums", "what_moves"]


def _load(median_running: float | None) -> str | None:
    """A run's load as a factor: its median requests running, in bands (acceptance moves
    with batching between one request and several, far less among many)."""
    if median_running is None:
        return None
    if median_running <= 1:
        return "1 request"
    if median_running <= 3:
        return "2-3 requests"
    if median_running <= 8:
        return "4-8 requests"
    return "more than 8 requests"
