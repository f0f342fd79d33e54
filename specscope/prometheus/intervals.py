"""From Prometheus samples (counters and gauges) to the interval rows that log ingest
stores, so that every detector and report reads both alike.

Counters are cumulative and reset when a server restarts: an interval is the difference
between two consecutive samples of one series, and a sample lower than the one before
means the counter started again from zero, so the new value is the interval's count.
All series of one target are scraped at one timestamp, which lines the per-position
counts up with the drafts of the same interval. A sample that is NaN, infinite or negative
is no count at all: it is dropped with a note, never read as a restart.

A target (a run) is an instance, a model and an engine: two data-parallel engines of one
server are two runs, each with its own load. ``Admission`` bounds the series and targets
one pull or scrape keeps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from specscope.exposition import engine_of
from specscope.prometheus.counted import counted_rows
from specscope.prometheus.names import (
    CONFIG_INFO,
    COUNTED,
    DRAFTED_PER_POSITION_NAMES,
    GAUGES,
    PER_POSITION_NAMES,
    PREFIX_CACHE,
    RATE_COUNTERS,
    SERIES_NAMES,
    SGLANG_ACCEPT,
    SPEC_COUNTERS,
    V0_ONLY,
    canonical_name,
)

# The per-position families that say which positions a target drafts (its k)
POSITIONED = {
    *PER_POSITION_NAMES,
    *DRAFTED_PER_POSITION_NAMES,
    *(n for m in COUNTED.values() for n, role in m.items() if role == "drafted_per_pos"),
}

Row = dict[str, Any]
Point = tuple[float, float]  # (unix seconds, value)


MAX_POSITION = 4096  # the largest per-position index read (as in log lines)
MAX_SERIES = 100_000  # series one pull or scrape keeps (the first seen)
MAX_TARGETS = 1_000  # targets (runs) one pull or scrape keeps (the first seen)


@dataclass(frozen=True)
class Series:
    name: str
    labels: Mapping[str, str]
    points: Sequence[Point] | np.ndarray  # (t, value) pairs, or an (n, 2) array of them


Target = tuple[str | None, str | None, str | None]  # instance, model_name, engine


def target_of(labels: Mapping[str, str]) -> Target:
    model = labels.get("model_name")
    engine = labels.get("engine") or labels.get("tp_rank")
    return labels.get("instance"), model, engine


def target_key(target: Target) -> str:
    """How a target is named in a source's watermarks."""
    return json.dumps(target)


class Admission:
    """Which series a pull or a scrape keeps: the first ``max_series`` series of the first
    ``max_targets`` targets it sees; the rest are left out and counted for a note."""

    _COUNTED = 100_000  # distinct left-out series remembered for the count

    def __init__(self, max_series: int = MAX_SERIES, max_targets: int = MAX_TARGETS) -> None:
        self.max_series = max_series
        self.max_targets = max_targets
        self.series = 0
        self.targets: set[Target] = set()
        self.left_out: dict[int, str] = {}  # hashes of the keys of series left out: why
        self.left_targets: set[Target] = set()

    def refused(self, key: object) -> bool:
        """Whether a series was left out before (most likely: its key's hash is known)."""
        return hash(key) in self.left_out

    def admit(self, key: object, labels: Mapping[str, str]) -> bool:
        """Whether to keep a series not seen before (``key`` names it for the count)."""
        target = target_of(labels)
        if self.series >= self.max_series:
            why = "series"
        elif target not in self.targets and len(self.targets) >= self.max_targets:
            why = "targets"
        else:
            self.series += 1
            self.targets.add(target)
            return True
        if len(self.left_out) < self._COUNTED:
            self.left_out[hash(key)] = why
            if why == "targets":
                self.left_targets.add(target)
        return False

    def notes(self) -> list[str]:
        out = []
        more = "+" if len(self.left_out) >= self._COUNTED else ""
        by_targets = sum(why == "targets" for why in self.left_out.values())
        by_series = len(self.left_out) - by_targets
        if by_targets:
            out.append(
                f"more than {self.max_targets:,} targets (instance, model_name, engine): kept "
                f"the first seen, left out {by_targets:,}{more} series of "
                f"{len(self.left_targets):,}{more} targets"
            )
        if by_series:
            out.append(
                f"more than {self.max_series:,} series: kept the first seen, left out "
                f"{by_series:,}{more} series"
            )
        return out


_EMPTY = pl.DataFrame()


@dataclass
class Intervals:
    """What a batch of series gives: a frame of rows per table (the store's columns, and
    ``_instance``, ``_model``, ``_engine``, ``_key`` naming the target, ``_t`` the sample's
    unix time), run configs by target, and notes."""

    spec_decode: pl.DataFrame = field(default_factory=lambda: _EMPTY)
    engine_stats: pl.DataFrame = field(default_factory=lambda: _EMPTY)
    runs: dict[Target, Row] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Samples:
    """Every sample of a batch as one frame (``sid``, ``t``, ``v``: each series in time
    order, a timestamp once), the changes between consecutive samples as another (``sid``,
    ``t``, ``t0``, ``d``, ``restarted``), the series as a third (``sid``, ``name``, ``tid``,
    ``position``), and the targets by ``tid``."""

    points: pl.DataFrame
    changes: pl.DataFrame
    series: pl.DataFrame
    targets: list[Target]
    labels: list[Mapping[str, str]]
    dropped: dict[str, int] = field(default_factory=dict)  # samples that are no count, by why

    def of(self, columns: Mapping[str, str], *, changes: bool = False) -> pl.DataFrame:
        """The samples (or changes) of the series named in ``columns``, each with the
        column it goes to, in the order of ``columns``, then of the batch, then of time."""
        names = list(columns)
        chosen = self.series.filter(pl.col("name").is_in(names)).with_columns(
            pl.col("name").replace_strict(columns, return_dtype=pl.String).alias("column"),
            (
                pl.col("name").replace_strict(
                    {n: i for i, n in enumerate(names)}, return_dtype=pl.Int64
                )
                * len(self.labels)
                + pl.col("sid")
            ).alias("order"),
        )
        frame = self.changes if changes else self.points
        rows = frame.join(
            chosen.select("sid", "tid", "position", "column", "order"),
            on="sid",
            maintain_order="left",
        )
        return rows.sort("order", maintain_order=True)  # stable: time order within a series


def _samples(series: Iterable[Series]) -> _Samples:
    arrays, names, tids, positions = [], [], [], []
    labels: list[Mapping[str, str]] = []
    targets: dict[Target, int] = {}
    dropped = {"NaN": 0, "±Inf": 0, "negative": 0}
    for s in series:
        labels.append(s.labels)
        arrays.append(_in_time_order(_counts_only(s.points, dropped)))
        names.append(canonical_name(s.name))
        target = target_of(s.labels)
        tids.append(targets.setdefault(target, len(targets)))
        position = s.labels.get("position", s.labels.get("token_position"))
        positions.append(
            int(position)
            if position is not None and position.isdigit() and int(position) <= MAX_POSITION
            else None  # a position no drafter reaches is a label gone wrong: not a list
        )
    lengths = np.asarray([len(a) for a in arrays], dtype=np.int64)
    sid = np.repeat(np.arange(len(arrays), dtype=np.int64), lengths)
    t = np.concatenate([a[:, 0] for a in arrays]) if arrays else np.empty(0)
    v = np.concatenate([a[:, 1] for a in arrays]) if arrays else np.empty(0)
    points = pl.DataFrame({"sid": sid, "t": t, "v": v})
    # Between consecutive samples of a series; a lower value is a counter that started
    # again from zero, so the new value is the interval's count.
    follows = np.flatnonzero(sid[1:] == sid[:-1]) + 1
    v0, v1 = v[follows - 1], v[follows]
    restarted = v1 < v0
    changes = pl.DataFrame(
        {
            "sid": sid[follows],
            "t": t[follows],
            "t0": t[follows - 1],
            "d": np.where(restarted, v1, v1 - v0),
            "restarted": restarted,
        }
    )
    meta = pl.DataFrame(
        {"sid": range(len(names)), "name": names, "tid": tids, "position": positions},
        schema={"sid": pl.Int64, "name": pl.String, "tid": pl.Int64, "position": pl.Int64},
    )
    return _Samples(points, changes, meta, list(targets), labels, dropped)


def _counts_only(points: Sequence[Point] | np.ndarray, dropped: dict[str, int]) -> np.ndarray:
    """The samples whose time and value are finite and whose value is not negative: no
    counter or gauge specscope reads holds anything else, and a NaN or a -1 among counts
    would read as a restart (the next value, or the whole counter, as new counts)."""
    array = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    good = np.isfinite(array).all(axis=1) & (array[:, 1] >= 0)
    if good.all():
        return array
    value = array[:, 1]
    dropped["NaN"] += int(np.isnan(value).sum())
    dropped["±Inf"] += int(np.isinf(value).sum())
    dropped["negative"] += int((value < 0).sum() - (value == -np.inf).sum())
    return array[good]


def _in_time_order(points: np.ndarray) -> np.ndarray:
    """The samples by time, a timestamp seen twice once (with its last value)."""
    if len(points) < 2 or bool(np.all(points[1:, 0] > points[:-1, 0])):
        return points
    by_time = dict(zip(points[:, 0].tolist(), points[:, 1].tolist(), strict=True))
    return np.asarray(sorted(by_time.items()), dtype=np.float64).reshape(-1, 2)


def deltas(points: Iterable[Point]) -> list[tuple[float, float, float, bool]]:
    """``(t, delta, t_before, restarted)`` between consecutive samples, reset-aware:
    a value lower than the one before is a counter that started again."""
    frame = _samples([Series("", {}, tuple(points))]).changes
    return list(frame.select("t", "d", "t0", "restarted").iter_rows())


def _count(value: pl.Expr) -> pl.Expr:
    return value.round(0).cast(pl.Int64, strict=False)


def _wide(rows: pl.DataFrame, value: str, columns: Iterable[str]) -> pl.DataFrame:
    """One row per (target, time), a column per series name: the last series wins."""
    wide = rows.pivot(on="column", index=["tid", "t"], values=value, aggregate_function="last")
    return wide.with_columns(
        pl.lit(None, pl.Float64).alias(c) for c in columns if c not in wide.columns
    )


def intervals(
    series: Iterable[Series], *, after: float | None = None, group_series: int | None = None
) -> Intervals:
    """Interval rows for every target in ``series``; intervals ending at or before
    ``after`` (what an earlier pull stored) are left out. With ``group_series``, computed
    for a group of instances at a time (of at most that many series): the sorts and joins
    then hold a group's samples, not the batch's (a target's series are all in its group)."""
    out, parts = Intervals(), []
    dropped, names = dict.fromkeys(("NaN", "±Inf", "negative"), 0), set()
    not_stored: dict[str, int] = {}  # intervals of counters left out, by why
    for group in _instance_groups(list(series), group_series):
        got = _samples(group)
        dropped = {why: n + got.dropped.get(why, 0) for why, n in dropped.items()}
        names |= set(got.series["name"].to_list())
        part = _target_intervals(got, after, not_stored)
        out.runs.update(part.runs)
        parts.append(part)
    if parts:
        out.spec_decode, out.engine_stats = (
            pl.concat([getattr(p, table) for p in parts], how="diagonal_relaxed")
            for table in ("spec_decode", "engine_stats")
        )
    bad = ", ".join(f"{n:,} {why}" for why, n in dropped.items() if n)
    if bad:
        out.notes.append(
            f"samples dropped ({bad}): not a count, so not read as a counter restart either"
        )
    if V0_ONLY in names and "vllm:spec_decode_num_drafts_total" not in names:
        out.notes.append(
            "V0 spec-decode counters skipped: V0 adds its running totals to them every few "
            "seconds, so they over-count (ingest the V0 log lines instead)"
        )
    out.notes.extend(f"{n:,} interval(s) not stored: {why}" for why, n in not_stored.items())
    return out


def _instance_groups(series: list[Series], most: int | None) -> list[list[Series]]:
    """The series in groups of whole instances, each of at most ``most`` series (or one
    instance's, if it has more); one group of all without ``most``."""
    if not most:
        return [series]
    by_instance: dict[str | None, list[Series]] = {}
    for s in series:
        by_instance.setdefault(s.labels.get("instance"), []).append(s)
    groups: list[list[Series]] = [[]]
    for members in by_instance.values():
        if groups[-1] and len(groups[-1]) + len(members) > most:
            groups.append([])
        groups[-1].extend(members)
    return groups


def _target_intervals(got: _Samples, after: float | None, not_stored: dict[str, int]) -> Intervals:
    out = Intervals()
    keep = pl.lit(True) if after is None else pl.col("t") > after
    counted = counted_rows(got.points, got.series, after, not_stored, MAX_POSITION + 1)
    spec = [_spec_rows(got, keep), _sglang_spec_rows(got, keep, counted), counted]
    stats = [
        _stats_rows(got, keep),
        _other_stats_rows(got, keep, "sglang:", "prometheus_sglang"),
        *(_other_stats_rows(got, keep, p, "prometheus") for p in ("trtllm:", "lmdeploy:")),
    ]
    columns = {"_instance": 0, "_model": 1, "_engine": 2}
    targets = pl.DataFrame(
        {"tid": range(len(got.targets))}
        | {c: [t[i] for t in got.targets] for c, i in columns.items()}
        | {"_key": [target_key(t) for t in got.targets]}
        | {"engine": [_int(t[2]) for t in got.targets]},
        schema={"tid": pl.Int64}
        | dict.fromkeys([*columns, "_key"], pl.String)
        | {"engine": pl.Int32},
    )
    out.spec_decode = _finish_rows(spec, targets)
    out.engine_stats = _finish_rows(stats, targets)
    _run_configs(got, out)
    return out


def _finish_rows(parts: list[pl.DataFrame], targets: pl.DataFrame) -> pl.DataFrame:
    parts = [p for p in parts if not p.is_empty()]
    if not parts:
        return _EMPTY
    rows = pl.concat(parts, how="diagonal_relaxed").join(
        targets, on="tid", how="left", maintain_order="left"
    )
    return rows.with_columns(
        pl.col("t").alias("_t"),
        pl.from_epoch((pl.col("t") * 1e6).round(0).cast(pl.Int64), "us").alias("ts"),
        pl.from_epoch((pl.col("t") * 1e6).round(0).cast(pl.Int64), "us")
        .dt.replace_time_zone("UTC")
        .alias("ts_utc"),
        pl.when(pl.col("format") == "prometheus_sglang")
        .then(pl.lit(None, pl.Int32))
        .otherwise(pl.col("engine"))
        .alias("engine"),
    ).drop("tid", "t")


def _spec_rows(got: _Samples, keep: pl.Expr) -> pl.DataFrame:
    counted = got.of(SPEC_COUNTERS, changes=True)
    if counted.is_empty():
        return _EMPTY
    # The interval is the one of the first series seen at that time.
    spans = counted.group_by("tid", "t").agg(pl.col("t0").first(), pl.col("restarted").any())
    columns = dict.fromkeys(SPEC_COUNTERS.values())  # vLLM's and llama.cpp's names: one each
    values = _wide(counted.with_columns(_count(pl.col("d"))), "d", columns)
    rows = (
        values.join(spans, on=["tid", "t"])
        .join(
            _per_position(got, PER_POSITION_NAMES, "accepted_per_pos"), on=["tid", "t"], how="left"
        )
        .join(
            _per_position(got, DRAFTED_PER_POSITION_NAMES, "drafted_per_pos"),
            on=["tid", "t"],
            how="left",
        )
    )
    drafts, accepted, draft_tokens = (
        pl.col("drafts"),
        pl.col("accepted_tokens"),
        pl.col("draft_tokens"),
    )
    per_pos, drafted = pl.col("accepted_per_pos"), pl.col("drafted_per_pos")
    # A position's rate over the drafts that drafted it, where the server counts them.
    own = drafted.is_not_null() & (drafted.list.len() == per_pos.list.len())
    rows = rows.filter(keep & drafts.is_not_null() & (drafts != 0))  # no drafting: logs print none
    return rows.sort("tid", "t").select(
        "tid",
        "t",
        (pl.col("t") - pl.col("t0")).alias("interval_s"),
        pl.lit("prometheus").alias("format"),
        pl.when(pl.col("restarted"))
        .then(pl.lit("since_restart"))
        .otherwise(pl.lit("delta"))
        .alias("counts"),
        pl.when(per_pos.is_not_null())
        .then(per_pos.list.len().cast(pl.Int64))
        .when(draft_tokens.is_not_null() & (draft_tokens % drafts == 0))
        .then(draft_tokens // drafts)
        .alias("k"),
        "drafts",
        "draft_tokens",
        "accepted_tokens",
        per_pos,
        pl.when(own).then(drafted).alias("drafted_per_pos"),
        pl.when(own)
        .then(per_pos / drafted.list.eval(pl.when(pl.element() > 0).then(pl.element())))
        .otherwise(per_pos / drafts)
        .alias("per_position_rate"),
        (1 + accepted / drafts).alias("mean_acceptance_length"),
        pl.when(draft_tokens != 0).then(accepted / draft_tokens).alias("acceptance_rate"),
        pl.lit(False).alias("partial"),
    )


def _per_position(got: _Samples, names: Iterable[str], column: str) -> pl.DataFrame:
    """Each interval's counts by position (accepted, or drafted), as a list up to the
    highest position sampled then (0 for a position without a sample), lined up with the
    drafts by target and time."""
    counted = got.of(dict.fromkeys(names, column), changes=True).filter(
        pl.col("position").is_not_null()
    )
    schema = pl.Schema({"tid": pl.Int64(), "t": pl.Float64(), column: pl.List(pl.Int64())})
    if counted.is_empty():
        return pl.DataFrame(schema=schema)
    top = counted["position"].max()
    assert isinstance(top, int)  # an Int64 column, not empty, without nulls
    wide = counted.select("tid", "t", "position", _count(pl.col("d")).alias("n")).pivot(
        on="position", index=["tid", "t"], values="n", aggregate_function="last"
    )
    cells = np.full((wide.height, top + 1), -1, dtype=np.int64)  # -1: no sample
    for c in wide.columns[2:]:
        cells[:, int(c)] = wide[c].fill_null(-1).to_numpy()
    sampled = cells >= 0
    length = top + 1 - np.argmax(sampled[:, ::-1], axis=1)
    length[~sampled.any(axis=1)] = 0
    within = np.arange(top + 1) < length[:, None]
    values = np.where(sampled, cells, 0)[within]
    offsets = np.concatenate(([0], np.cumsum(length))).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    return wide.select("tid", "t").with_columns(pl.Series(column, lists, pl.List(pl.Int64)))


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _gauges(got: _Samples, columns: Mapping[str, str]) -> pl.DataFrame:
    """The gauges' samples as one row per target and time (the rows of a stats table:
    none without a ``running_reqs`` sample)."""
    sampled = got.of(columns)
    wanted = set(columns.values())
    if sampled.is_empty() or "running_reqs" not in set(sampled["column"].unique()):
        return _EMPTY
    wide = _wide(sampled, "v", wanted).filter(pl.col("running_reqs").is_not_null())
    return wide.with_columns(_count(pl.col(c)) for c in wanted if c.endswith("_reqs"))


def _stats_rows(got: _Samples, keep: pl.Expr) -> pl.DataFrame:
    rows = _gauges(got, {n: c for n, c in GAUGES.items() if n.startswith("vllm:")})
    if rows.is_empty():
        return _EMPTY
    rates = got.of(RATE_COUNTERS, changes=True).filter(pl.col("t") > pl.col("t0"))
    if not rates.is_empty():
        per_s = rates.with_columns((pl.col("d") / (pl.col("t") - pl.col("t0"))).alias("r"))
        rows = rows.join(_wide(per_s, "r", RATE_COUNTERS.values()), on=["tid", "t"], how="left")
    rows = rows.join(_prefix_cache(got), on=["tid", "t"], how="left")
    rows = rows.join(_latency(got), on=["tid", "t"], how="left")
    return (
        rows.filter(keep)
        .sort("tid", "t")
        .with_columns(
            pl.lit("prometheus").alias("format"), pl.lit(None, pl.String).alias("kv_cache_device")
        )
    )


def _prefix_cache(got: _Samples) -> pl.DataFrame:
    schema = pl.Schema({"tid": pl.Int64, "t": pl.Float64, "prefix_cache_hit_rate": pl.Float64})
    parts = got.of({n: f"{gen} {part}" for n, (gen, part) in PREFIX_CACHE.items()}, changes=True)
    if parts.is_empty():
        return pl.DataFrame(schema=schema)
    # Both names exported: the token-based one wins.
    new_names = [n for n, (gen, _) in PREFIX_CACHE.items() if gen == "new"]
    newer = got.series.filter(pl.col("name").is_in(new_names))["tid"].unique()
    parts = parts.filter(
        pl.col("column").str.starts_with("new") | ~pl.col("tid").is_in(newer.implode())
    ).with_columns(pl.col("column").str.split(" ").list.last())
    wide = _wide(parts, "d", ("queries", "hits"))
    queries = pl.col("queries")
    return wide.select(
        "tid",
        "t",
        pl.when(queries.is_not_null() & (queries != 0))
        .then(pl.col("hits").fill_null(0.0) / queries)
        .alias("prefix_cache_hit_rate"),
    ).cast(schema)


_LATENCY = {
    "vllm:time_to_first_token_seconds": "mean_ttft_ms",
    "vllm:inter_token_latency_seconds": "mean_itl_ms",
    "vllm:time_per_output_token_seconds": "mean_itl_ms",  # before 0.10; the newer name wins
}


def _latency(got: _Samples) -> pl.DataFrame:
    """Mean latencies per interval from a histogram's ``_sum`` and ``_count``."""
    schema = pl.Schema(
        {
            "tid": pl.Int64,
            "t": pl.Float64,
            "mean_ttft_ms": pl.Float64,
            "mean_itl_ms": pl.Float64,
        }
    )
    means = []
    for rank, (name, column) in enumerate(_LATENCY.items()):
        sums = got.of({f"{name}_sum": column}, changes=True)
        counts = got.of({f"{name}_count": column}, changes=True)
        if sums.is_empty() or counts.is_empty():
            continue
        # A name with two series on one target (both spellings): the last one at a time.
        pair = counts.unique(["tid", "t"], keep="last").join(
            sums.unique(["tid", "t"], keep="last").select("tid", "t", pl.col("d").alias("s")),
            on=["tid", "t"],
        )
        means.append(
            pair.filter(pl.col("d") != 0).select(
                "tid",
                "t",
                "column",
                pl.lit(rank).alias("rank"),
                (1000 * pl.col("s") / pl.col("d")).alias("ms"),
            )
        )
    if not means:
        return pl.DataFrame(schema=schema)
    first = pl.concat(means).sort("rank").unique(["tid", "t", "column"], keep="first")
    wide = first.pivot(on="column", index=["tid", "t"], values="ms")
    return wide.with_columns(
        pl.lit(None, pl.Float64).alias(c)
        for c in ("mean_ttft_ms", "mean_itl_ms")
        if c not in wide.columns
    ).cast(schema)


def _sglang_spec_rows(got: _Samples, keep: pl.Expr, counted: pl.DataFrame) -> pl.DataFrame:
    """SGLang exports each interval's mean length as a gauge: no counts to sum. A server
    whose verify-step counter is read (``counted``: the scheduler's gauges and the
    tokenizer's counters carry different labels) is judged on the counts alone."""
    sampled = got.of(SGLANG_ACCEPT)
    if not counted.is_empty():
        served = {
            got.targets[tid][:2]
            for tid in counted.filter(pl.col("format") == "prometheus_sglang")["tid"]
        }
        sampled = sampled.filter(
            ~pl.col("tid").is_in([i for i, t in enumerate(got.targets) if t[:2] in served])
        )
    if sampled.is_empty():
        return _EMPTY
    wide = _wide(sampled, "v", SGLANG_ACCEPT.values())
    length = pl.col("mean_acceptance_length")
    return (
        wide.filter(keep & length.is_not_null() & (length != 0))
        .sort("tid", "t")
        .with_columns(pl.lit("prometheus_sglang").alias("format"), pl.lit(False).alias("partial"))
    )


def _other_stats_rows(got: _Samples, keep: pl.Expr, prefix: str, fmt: str) -> pl.DataFrame:
    """An engine's load gauges (SGLang's, TensorRT-LLM's, LMDeploy's) as stats rows, without vLLM's
    rates, prefix cache and latencies."""
    rows = _gauges(got, {n: c for n, c in GAUGES.items() if n.startswith(prefix)})
    if rows.is_empty():
        return _EMPTY
    return rows.filter(keep).sort("tid", "t").with_columns(pl.lit(fmt).alias("format"))


def _run_configs(got: _Samples, out: Intervals) -> None:
    """One run per target (instance, model_name, engine), configured by what the labels
    say (the cache config of its engine, else of its instance; k from how many positions
    the per-position counter names); a target with rows of both servers takes the server
    of its last (stats after spec decode)."""
    info: dict[tuple[str | None, str | None], Mapping[str, str]] = {}
    positions: dict[int, set[int]] = {}
    engines: dict[int, str] = {}  # targets whose series are not vLLM's: their engine
    for sid, name, tid, position in got.series.select("sid", "name", "tid", "position").iter_rows():
        if name == CONFIG_INFO:
            labels = got.labels[sid]
            instance = labels.get("instance")
            info.setdefault((instance, labels.get("engine")), labels)
            info.setdefault((instance, None), labels)
        elif name in POSITIONED and position is not None:
            positions.setdefault(tid, set()).add(position)
        engine = engine_of(name)
        if engine in ("llama.cpp", "tensorrt-llm", "lmdeploy"):
            engines[tid] = engine
    seen = [
        f.select("_instance", "_model", "_engine", "format")
        for f in (out.spec_decode, out.engine_stats)
        if not f.is_empty()
    ]
    if not seen:
        return
    tids = {t: i for i, t in enumerate(got.targets)}
    servers = pl.concat(seen).group_by("_instance", "_model", "_engine", maintain_order=True)
    for instance, model, engine, fmt in servers.last().iter_rows():
        run: Row = {"model": model, "instance": instance, "engine": engine}
        run["server"] = "sglang" if fmt == "prometheus_sglang" else "vllm"
        run["server"] = engines.get(tids[(instance, model, engine)], run["server"])
        named = positions.get(tids[(instance, model, engine)])
        if named:
            run["k"] = len(named)
        config = info.get((instance, engine)) or info.get((instance, None))
        if config:
            caching = config.get("enable_prefix_caching")
            if caching in ("True", "False"):
                run["enable_prefix_caching"] = caching == "True"
            dtype = config.get("cache_dtype")
            if dtype:
                run["kv_cache_dtype"] = dtype
        out.runs[(instance, model, engine)] = run


__all__ = [
    "MAX_SERIES",
    "MAX_TARGETS",
    "SERIES_NAMES",
    "Admission",
    "Intervals",
    "Series",
    "canonical_name",
    "deltas",
    "intervals",
    "target_key",
    "target_of",
]
