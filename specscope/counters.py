"""From Prometheus samples (counters and gauges) to the interval rows that log ingest
stores, so that every detector and report reads both alike.

Counters are cumulative and reset when a server restarts: an interval is the difference
between two consecutive samples of one series, and a sample lower than the one before
means the counter started again from zero, so the new value is the interval's count.
All series of one target are scraped at one timestamp, which lines the per-position
counts up with the drafts of the same interval.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Row = dict[str, Any]
Point = tuple[float, float]  # (unix seconds, value)

SPEC_COUNTERS = {
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# V0 increments these by its cumulative totals every few seconds: they over-count.
V0_ONLY = "vllm:spec_decode_num_emitted_tokens_total"
GAUGES = {
    "vllm:num_requests_running": "running_reqs",
    "vllm:num_requests_waiting": "waiting_reqs",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "sglang:num_running_reqs": "running_reqs",
    "sglang:num_queue_reqs": "waiting_reqs",
    "sglang:token_usage": "kv_cache_usage",
}
RATE_COUNTERS = {
    "vllm:prompt_tokens_total": "prompt_throughput",
    "vllm:generation_tokens_total": "generation_throughput",
}
PREFIX_CACHE = {  # (queries, hits); the 0.8 names counted blocks, later ones tokens
    "vllm:prefix_cache_queries_total": ("new", "queries"),
    "vllm:prefix_cache_hits_total": ("new", "hits"),
    "vllm:gpu_prefix_cache_queries_total": ("old", "queries"),
    "vllm:gpu_prefix_cache_hits_total": ("old", "hits"),
}
SGLANG_ACCEPT = {
    "sglang:spec_accept_length": "mean_acceptance_length",
    "sglang:spec_accept_rate": "reported_rate",
}
CONFIG_INFO = "vllm:cache_config_info"
LATENCY = (
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:time_per_output_token_seconds",
)

SERIES_NAMES = (
    *SPEC_COUNTERS,
    PER_POSITION,
    V0_ONLY,
    *GAUGES,
    *RATE_COUNTERS,
    *PREFIX_CACHE,
    *SGLANG_ACCEPT,
    CONFIG_INFO,
    *(f"{name}_{part}" for name in LATENCY for part in ("sum", "count")),
)


@dataclass(frozen=True)
class Series:
    name: str
    labels: Mapping[str, str]
    points: tuple[Point, ...]


def canonical_name(name: str) -> str:
    """``vllm_spec_decode_...`` -> ``vllm:spec_decode_...``: prometheus_client 0.22+ escapes
    the colon to an underscore when a scraper negotiates OpenMetrics 1.0, so a Prometheus
    may hold either spelling."""
    for prefix in ("vllm", "sglang"):
        if name.startswith(prefix + "_"):
            return prefix + ":" + name[len(prefix) + 1 :]
    return name


Target = tuple[str | None, str | None, str | None]  # instance, model_name, engine


def target_of(labels: Mapping[str, str]) -> Target:
    model = labels.get("model_name")
    engine = labels.get("engine") or labels.get("tp_rank")
    return labels.get("instance"), model, engine


@dataclass
class Intervals:
    """What a batch of series gives: rows per table, run configs, and notes."""

    spec_decode: list[Row] = field(default_factory=list)
    engine_stats: list[Row] = field(default_factory=list)
    runs: dict[tuple[str | None, str | None], Row] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    last_sample: float | None = None  # the newest sample seen (for the watermark)


def deltas(points: Iterable[Point]) -> list[tuple[float, float, float, bool]]:
    """``(t, delta, t_before, restarted)`` between consecutive samples, reset-aware:
    a value lower than the one before is a counter that started again."""
    out = []
    ordered = sorted(dict(points).items())  # a duplicate timestamp counts once
    for (t0, v0), (t1, v1) in itertools.pairwise(ordered):
        restarted = v1 < v0
        out.append((t1, v1 if restarted else v1 - v0, t0, restarted))
    return out


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC).replace(tzinfo=None)


def _count(value: float) -> int:
    return round(value)


def intervals(series: Iterable[Series], *, after: float | None = None) -> Intervals:
    """Interval rows for every target in ``series``; intervals ending at or before
    ``after`` (what an earlier pull stored) are left out."""
    out = Intervals()
    by_name: dict[str, list[Series]] = defaultdict(list)
    for s in series:
        by_name[canonical_name(s.name)].append(s)
        if s.points:
            newest = max(t for t, _ in s.points)
            out.last_sample = newest if out.last_sample is None else max(out.last_sample, newest)
    if by_name.get(V0_ONLY) and not by_name.get("vllm:spec_decode_num_drafts_total"):
        out.notes.append(
            "V0 spec-decode counters skipped: V0 adds its running totals to them every few "
            "seconds, so they over-count (ingest the V0 log lines instead)"
        )
    keep = (lambda t: True) if after is None else (lambda t: t > after)
    _spec_rows(by_name, keep, out)
    _stats_rows(by_name, keep, out)
    _sglang_rows(by_name, keep, out)
    _run_configs(by_name, out)
    return out


def _spec_rows(by_name: Mapping[str, list[Series]], keep: Any, out: Intervals) -> None:
    counts: dict[Target, dict[float, Row]] = defaultdict(dict)
    for name, column in SPEC_COUNTERS.items():
        for s in by_name.get(name, ()):
            by_time = counts[target_of(s.labels)]
            for t, d, t0, restarted in deltas(s.points):
                row = by_time.get(t) or by_time.setdefault(t, {"_t0": t0})
                row[column] = round(d)
                row["_restarted"] = row.get("_restarted", False) or restarted
    per_pos: dict[Target, dict[float, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for s in by_name.get(PER_POSITION, ()):
        position = s.labels.get("position")
        if position is None or not position.isdigit():
            continue
        by_time_pos = per_pos[target_of(s.labels)]
        index = int(position)
        for t, d, _, _ in deltas(s.points):
            by_time_pos[t][index] = round(d)
    for target, by_time in counts.items():
        for t, row in sorted(by_time.items()):
            drafts = row.get("drafts")
            if not keep(t) or not drafts:
                continue  # no drafting in the interval: nothing to say (logs print none)
            accepted, draft_tokens = row.get("accepted_tokens"), row.get("draft_tokens")
            positions = per_pos.get(target, {}).get(t, {})
            per_position = (
                [positions.get(i, 0) for i in range(max(positions) + 1)] if positions else None
            )
            k = len(per_position) if per_position else None
            if k is None and draft_tokens is not None and draft_tokens % drafts == 0:
                k = draft_tokens // drafts
            out.spec_decode.append(
                {
                    "_target": target,
                    "_t": t,
                    "ts": _utc(t),
                    "interval_s": t - row["_t0"],
                    "engine": _int(target[2]),
                    "format": "prometheus",
                    "counts": "since_restart" if row["_restarted"] else "delta",
                    "k": k,
                    "drafts": drafts,
                    "draft_tokens": draft_tokens,
                    "accepted_tokens": accepted,
                    "accepted_per_pos": per_position,
                    "per_position_rate": [c / drafts for c in per_position]
                    if per_position
                    else None,
                    "mean_acceptance_length": 1 + accepted / drafts
                    if accepted is not None
                    else None,
                    "acceptance_rate": accepted / draft_tokens
                    if accepted is not None and draft_tokens
                    else None,
                    "partial": False,
                }
            )


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _stats_rows(by_name: Mapping[str, list[Series]], keep: Any, out: Intervals) -> None:
    rows: dict[Target, dict[float, Row]] = defaultdict(dict)
    for name, column in GAUGES.items():
        if not name.startswith("vllm:"):
            continue
        for s in by_name.get(name, ()):
            for t, v in s.points:
                rows[target_of(s.labels)].setdefault(t, {})[column] = (
                    _count(v) if column.endswith("_reqs") else v
                )
    for name, column in RATE_COUNTERS.items():
        for s in by_name.get(name, ()):
            for t, d, t0, _ in deltas(s.points):
                if t > t0:
                    rows[target_of(s.labels)].setdefault(t, {})[column] = d / (t - t0)
    cache: dict[Target, dict[float, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    units = {
        target_of(s.labels): PREFIX_CACHE[n][0] for n in PREFIX_CACHE for s in by_name.get(n, ())
    }
    for name, (generation, part) in PREFIX_CACHE.items():
        for s in by_name.get(name, ()):
            target = target_of(s.labels)
            if generation == "old" and units.get(target) == "new":
                continue  # both names exported: the token-based one wins
            for t, d, _, _ in deltas(s.points):
                cache[target][t][part] = d
    latency = {
        "vllm:time_to_first_token_seconds": "mean_ttft_ms",
        "vllm:inter_token_latency_seconds": "mean_itl_ms",
        "vllm:time_per_output_token_seconds": "mean_itl_ms",
    }
    for name, column in latency.items():
        sums = {
            target_of(s.labels): dict((t, d) for t, d, _, _ in deltas(s.points))
            for s in by_name.get(f"{name}_sum", ())
        }
        for s in by_name.get(f"{name}_count", ()):
            target = target_of(s.labels)
            for t, n, _, _ in deltas(s.points):
                total = sums.get(target, {}).get(t)
                if n and total is not None:
                    rows[target].setdefault(t, {}).setdefault(column, 1000 * total / n)
    for target, by_time in cache.items():
        for t, parts in by_time.items():
            if parts.get("queries"):
                rows[target].setdefault(t, {})["prefix_cache_hit_rate"] = (
                    parts.get("hits", 0.0) / parts["queries"]
                )
    for target, by_time in rows.items():
        for t, row in sorted(by_time.items()):
            if not keep(t) or "running_reqs" not in row:
                continue
            out.engine_stats.append(
                {
                    "_target": target,
                    "_t": t,
                    "ts": _utc(t),
                    "engine": _int(target[2]),
                    "format": "prometheus",
                    "kv_cache_device": None,
                    **row,
                }
            )


def _sglang_rows(by_name: Mapping[str, list[Series]], keep: Any, out: Intervals) -> None:
    """SGLang exports each interval's mean length as a gauge: no counts to sum."""
    rows: dict[Target, dict[float, Row]] = defaultdict(dict)
    stats: dict[Target, dict[float, Row]] = defaultdict(dict)
    for name, column in SGLANG_ACCEPT.items():
        for s in by_name.get(name, ()):
            for t, v in s.points:
                rows[target_of(s.labels)].setdefault(t, {})[column] = v
    for name, column in GAUGES.items():
        if name.startswith("sglang:"):
            for s in by_name.get(name, ()):
                for t, v in s.points:
                    stats[target_of(s.labels)].setdefault(t, {})[column] = (
                        _count(v) if column.endswith("_reqs") else v
                    )
    for target, by_time in rows.items():
        for t, row in sorted(by_time.items()):
            if keep(t) and row.get("mean_acceptance_length"):
                out.spec_decode.append(
                    {
                        "_target": target,
                        "_t": t,
                        "ts": _utc(t),
                        "engine": None,
                        "format": "prometheus_sglang",
                        "partial": False,
                        **row,
                    }
                )
    for target, by_time in stats.items():
        for t, row in sorted(by_time.items()):
            if keep(t) and "running_reqs" in row:
                out.engine_stats.append(
                    {
                        "_target": target,
                        "_t": t,
                        "ts": _utc(t),
                        "engine": None,
                        "format": "prometheus_sglang",
                        **row,
                    }
                )


def _run_configs(by_name: Mapping[str, list[Series]], out: Intervals) -> None:
    """One run per (instance, model_name), configured by what the labels say."""
    info_by_instance: dict[str | None, Mapping[str, str]] = {}
    for s in by_name.get(CONFIG_INFO, ()):
        info_by_instance.setdefault(s.labels.get("instance"), s.labels)
    for rows in (out.spec_decode, out.engine_stats):
        for row in rows:
            instance, model, _ = row["_target"]
            run = out.runs.setdefault((instance, model), {"model": model, "instance": instance})
            run["server"] = "sglang" if row["format"] == "prometheus_sglang" else "vllm"
            info = info_by_instance.get(instance)
            if info:
                caching = info.get("enable_prefix_caching")
                if caching in ("True", "False"):
                    run["enable_prefix_caching"] = caching == "True"
                dtype = info.get("cache_dtype")
                if dtype:
                    run["kv_cache_dtype"] = dtype


__all__ = [
    "SERIES_NAMES",
    "Intervals",
    "Series",
    "canonical_name",
    "deltas",
    "intervals",
    "target_of",
]
