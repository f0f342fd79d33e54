"""What detectors read: the store's tables for the runs under study, joined the way they
need them, and the helpers every detector shares to build a finding."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

import numpy as np
import polars as pl

from specscope.acceptance import weighted_acceptance
from specscope.analysis.drafter_cost import cost_rows
from specscope.analysis.findings import Confidence, Finding, Severity
from specscope.analysis.gain_bound import spread_of
from specscope.analysis.printed_sample import bench_steps, implied_k, proven_steps
from specscope.analysis.requests import request_rows
from specscope.analysis.siblings import Side, side_rows
from specscope.analysis.stated_rates import STATED_RATE_FORMATS, with_stated_rates
from specscope.errors import UsageError
from specscope.stats import one_sided, rate_interval
from specscope.store import rollup
from specscope.store.reading import Store
from specscope.thresholds import Config, load_config, load_reference


@dataclass
class Evidence:
    """The store's tables for the runs under study, joined the way detectors need them."""

    spec: pl.DataFrame  # spec_decode rows with the adjacent engine stats' running_reqs etc.
    stats: pl.DataFrame
    runs: dict[str, dict[str, Any]]
    events: pl.DataFrame
    bench: pl.DataFrame
    per_run: dict[str, dict[str, Any]]  # weighted acceptance per run
    config: Config
    reference: list[dict[str, Any]]
    # Detectors look at one run at a time. The frames are sorted by run (stably, so each
    # run keeps its order), so a run's rows are a zero-copy slice: no filter per run
    # (quadratic in runs) and no second copy of the table (partition_by).
    _spans: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict, repr=False)
    _slim: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    _dp: set[str] | None = field(default=None, repr=False)
    _engines: dict[str, list[tuple[int, dict[str, Any]]]] | None = field(default=None, repr=False)
    # Per-request rows (``analysis.requests.request_rows``): their format and extra, which
    # the interval rows above leave out. None where the evidence was made without a store.
    requests: pl.DataFrame | None = None
    # The drafter's measured cost (``analysis.drafter_cost.cost_rows``), for ``advise``.
    costs: dict[str, pl.DataFrame] | None = None
    # The sides one paste sets against each other (``analysis.siblings``), from a store.
    sides: list[Side] | None = None

    def data_parallel(self) -> set[str]:
        """The runs whose rows come from more than one engine, found in one pass."""
        if self._dp is None:
            if "engine" not in self.spec.columns or self.spec.is_empty():
                self._dp = set()
            else:
                many = (
                    self.spec.group_by("run_id")
                    .agg(pl.col("engine").drop_nulls().n_unique().alias("n"))
                    .filter(pl.col("n") > 1)
                )
                self._dp = {str(r) for r in many["run_id"].to_list()}
        return self._dp

    def _rows(self, table: str, run_ids: tuple[str, ...]) -> pl.DataFrame:
        # Detectors filter a run's rows again and again: without the lists and strings
        # that only the per-run sums read, a filter copies a third as much.
        if table not in self._slim:
            self._slim[table] = getattr(self, table).drop(_READ_ONCE, strict=False)
        frame = self._slim[table]
        if table not in self._spans:
            counts = frame.group_by("run_id", maintain_order=True).len()
            spans, offset = {}, 0
            for run_id, n in counts.iter_rows():
                spans[run_id] = (offset, n)
                offset += n
            self._spans[table] = spans
        parts = [frame.slice(*self._spans[table][r]) for r in run_ids if r in self._spans[table]]
        if len(parts) == 1:
            return parts[0]
        return pl.concat(parts) if parts else frame.clear()

    def spec_of(self, *run_ids: str) -> pl.DataFrame:
        """The spec rows (joined with their engine stats) of these runs."""
        return self._rows("spec", run_ids)

    def stats_of(self, *run_ids: str) -> pl.DataFrame:
        """The engine-stats rows of these runs."""
        return self._rows("stats", run_ids)


# Columns that no detector or report reads: not loaded (a store of 10 M rows is big).
_NOT_READ = (
    "format",
    "per_position_rate",
    "accepted_throughput",
    "drafted_throughput",
    "problems",
    "extra",
    "prompt_throughput",
    "external_prefix_cache_hit_rate",
    "mm_cache_hit_rate",
    "cpu_prefix_cache_hit_rate",
    "cpu_kv_cache_usage",
    "emitted_tokens",
    "system_efficiency",
    "counts",
    "reported_rate",
    "partial",
    "engines_aggregated",
    "deferred_reqs",
    "swapped_reqs",
    "preemptions",
    "corrupted_reqs",
    "kv_cache_device",
    "mean_ttft_ms",
    "mean_itl_ms",
    "source",  # the run's, in ``runs``
    "acceptance_rate",  # summed from the counts
)


# Read by the per-run sums only, which ``gather`` streams from the files.
_SUMMED = ("accepted_per_pos", "mean_acceptance_length")


# Not in the rows detectors filter run by run (``watch`` passes frames with every column):
# what the per-run sums and the stats join read, once.
_READ_ONCE = (*_SUMMED, *_NOT_READ, "source_id", "stats_line")


def gather(
    store: Store,
    *,
    run_ids: Iterable[str] | None = None,
    since: timedelta | None = None,
    now: datetime | None = None,
    config: Config | None = None,
    reference: list[dict[str, Any]] | None = None,
) -> Evidence:
    now = now or datetime.now()
    run_ids = list(run_ids) if run_ids is not None else None
    # The per-run sums come from the rollups written with the rows, or else stream from
    # the rows' files: the per-position lists are then not held with the rows the
    # detectors filter.
    if since is None and store.sums_cover_rows():
        per_run = rollup.per_run(store.run_sums)
        if run_ids:
            per_run = per_run.filter(pl.col("run_id").is_in(run_ids))
    else:
        scope = pl.lit(True)
        if run_ids:
            scope = scope & pl.col("run_id").is_in(run_ids)
        if since is not None:
            scope = scope & (pl.col("ts") >= now - since)
        per_run = weighted_acceptance(store.spec_decode.filter(scope), ["run_id"])
    per_run = with_stated_rates(store.spec_decode, per_run)
    # One chunk per column: a store's files come in many row groups, and polars filters
    # a frame of many chunks (or of columns chunked differently) far slower than one.
    spec, stats = detector_rows(store)
    ev = evidence_from(
        spec.collect().rechunk(),
        stats.collect().rechunk(),
        store.runs.collect(),
        store.events.collect(),
        store.bench.collect(),
        run_ids=run_ids,
        since=since,
        now=now,
        config=config,
        reference=reference,
        per_run=per_run,
    )
    ev.requests = request_rows(store, run_ids, since=None if since is None else now - since)
    ev.costs = cost_rows(store)
    ev.sides = side_rows(store, run_ids, stated=STATED_RATE_FORMATS)
    return ev


def detector_rows(store: Store) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The spec-decode and engine-stats rows with the columns detectors read, the run as a
    category (a string per row costs more to copy than all else together)."""
    as_category = pl.col("run_id").cast(pl.Categorical)
    return (
        store.spec_decode.select(pl.exclude(*_NOT_READ, *_SUMMED)).with_columns(as_category),
        store.engine_stats.select(pl.exclude(_NOT_READ)).with_columns(as_category),
    )


def evidence_from(
    spec: pl.DataFrame,
    stats: pl.DataFrame,
    runs: pl.DataFrame,
    events: pl.DataFrame,
    bench: pl.DataFrame,
    *,
    run_ids: Iterable[str] | None = None,
    since: timedelta | None = None,
    now: datetime | None = None,
    config: Config | None = None,
    reference: list[dict[str, Any]] | None = None,
    per_run: pl.DataFrame | None = None,
) -> Evidence:
    """Evidence from frames of the store's tables (a store, or what `watch` holds).
    ``per_run``: ``weighted_acceptance`` by run of the same rows, when made already."""
    wanted = set(run_ids or ())
    if wanted:
        unknown = wanted - set(runs["run_id"].to_list())
        if unknown:
            raise UsageError(f"no run {sorted(unknown)[0]} in the store (`specscope runs`)")
        spec, stats, runs, events, bench = (
            t.filter(pl.col("run_id").is_in(wanted)) for t in (spec, stats, runs, events, bench)
        )
    if since is not None:
        cutoff = (now or datetime.now()) - since
        spec, stats = (t.filter(pl.col("ts") >= cutoff) for t in (spec, stats))
    joined = _by_run(_join_stats(spec, stats))
    stats = _by_run(stats)
    if per_run is None:
        per_run = weighted_acceptance(joined, ["run_id"])
    sums = {r["run_id"]: r for r in per_run.to_dicts()}
    # In the order the runs' rows come (findings and reports list runs in it).
    order = joined["run_id"].unique(maintain_order=True).to_list()
    sums = {r: sums[r] for r in order if r in sums} | sums
    return Evidence(
        spec=joined,
        stats=stats,
        runs={r["run_id"]: r for r in runs.to_dicts()},
        events=events,
        bench=bench,
        per_run=sums,
        config=config or load_config(),
        reference=reference if reference is not None else load_reference(),
    )


def _by_run(frame: pl.DataFrame) -> pl.DataFrame:
    """Each run's rows together (so that a run is a slice). A store read from logs has them
    so already, in log order; rows from several pulls of one target need the sort."""
    if frame.is_empty():
        return frame
    together = frame.select(
        pl.col("run_id").rle_id().max() + 1 == pl.col("run_id").n_unique()
    ).item()
    return frame if together else frame.sort("run_id", maintain_order=True, nulls_last=True)


def _join_stats(spec: pl.DataFrame, stats: pl.DataFrame) -> pl.DataFrame:
    """Each spec record with the engine stats of its interval: the stats line just before it
    in a log, the scrape with the same timestamp in a pull."""
    wanted = ["running_reqs", "waiting_reqs", "prefix_cache_hit_rate", "kv_cache_usage"]
    # A search in the sorted (source, line) keys of the stats, not a hash join: over
    # millions of rows it is several times faster and builds no table of gigabytes.
    codes: dict[str, int] = {}
    logs = stats.select("source_id", "line", *wanted).filter(pl.col("line").is_not_null())
    have = _source_codes(logs, codes) * (1 << 40) + logs["line"].to_numpy()
    order = np.argsort(have, kind="stable")
    have = have[order]
    stats_line = spec["stats_line"].fill_null(-1).to_numpy()
    want_np = np.where(stats_line < 0, -1, _source_codes(spec, codes) * (1 << 40) + stats_line)
    at = np.minimum(np.searchsorted(have, want_np), max(len(have) - 1, 0))
    found = (want_np >= 0) & (have[at] == want_np) if len(have) else np.zeros(len(want_np), bool)
    index = pl.Series(np.where(found, order[at] if len(have) else 0, 0), dtype=pl.UInt32)
    index = index.set(pl.Series(~found), None) if (~found).any() else index
    # The columns gathered together: a frame's gather runs over its columns side by side.
    out = spec.hstack(logs.select(wanted)[index].get_columns())
    from_pulls = stats.filter(pl.col("line").is_null())
    if from_pulls.is_empty():
        return out
    # Joins keep the left order: a group's rows, and groups, in the order of the input.
    out = out.join(
        from_pulls.select("run_id", "engine", "ts", *[pl.col(c).alias(f"{c}_p") for c in wanted]),
        on=["run_id", "engine", "ts"],
        how="left",
        nulls_equal=True,
        maintain_order="left",
    )
    return out.with_columns(pl.coalesce(c, f"{c}_p").alias(c) for c in wanted).drop(
        [f"{c}_p" for c in wanted]
    )


def _source_codes(frame: pl.DataFrame, codes: dict[str, int]) -> np.ndarray:
    """Each row's source as a number (the same in every frame given ``codes``). A store's
    rows come a source at a time, so the runs of equal values are few: no hash per row."""
    runs = frame.select(pl.col("source_id").rle()).unnest("source_id")
    numbers = [codes.setdefault(v, len(codes)) for v in runs["value"].to_list()]
    return np.repeat(np.asarray(numbers, dtype=np.int64), runs["len"].to_numpy())


_T = TypeVar("_T")


def scalar(value: object, kind: type[_T]) -> _T | None:
    """An aggregate of a polars column (``min``, ``max``, ``mean``...) as the Python type the
    column holds, None for a column without values. Polars types these as the union of every
    scalar any column may hold."""
    if value is None or isinstance(value, kind):
        return value
    raise TypeError(f"expected {kind.__name__} or None, got {type(value).__name__}")


def _lines(rows: pl.DataFrame) -> tuple[int | None, int | None]:
    if rows.is_empty() or rows["line"].null_count() == rows.height:
        return (None, None)
    first = scalar(rows["line"].min(), int)
    return (first, scalar(rows["end_line"].max(), int) or scalar(rows["line"].max(), int))


def _window(rows: pl.DataFrame) -> tuple[datetime | None, datetime | None]:
    if rows.is_empty() or rows["ts"].null_count() == rows.height:
        return (None, None)
    return (scalar(rows["ts"].min(), datetime), scalar(rows["ts"].max(), datetime))


def finding_for(
    ev: Evidence,
    kind: str,
    severity: Severity,
    run_id: str | None,
    rows: pl.DataFrame | None,
    **kw: Any,
) -> Finding:
    run = ev.runs.get(run_id or "", {})
    source = run.get("source") if run else None
    if rows is not None and not rows.is_empty():
        source = ev.runs.get(rows["run_id"][0], {}).get("source", source)
    return Finding(
        kind=kind,
        severity=severity,
        run_id=run_id,
        source=source,
        lines=_lines(rows) if rows is not None else (None, None),
        window=_window(rows) if rows is not None else (None, None),
        **kw,
    )


def engine_sums(ev: Evidence, run_id: str) -> list[tuple[int, dict[str, Any]]]:
    """A data-parallel run's sums engine by engine (vLLM prints each engine's interval on
    its own line): one engine whose drafter fails hides in the run's sum behind the others.
    None for a run of one engine, or where the rows at hand are not all of the run's (a
    fleet's detect reads only the rows a question needs)."""
    if run_id not in ev.data_parallel():
        return []
    if ev._engines is None:
        ev._engines = _engine_sums(ev)
    return ev._engines.get(run_id, [])


def _engine_sums(ev: Evidence) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """``engine_sums`` of every data-parallel run in one grouped pass: a pass a run, for
    ``zero`` and ``low`` each, was 0.7 CPU s over 2,000 runs (issue 23)."""
    rows = ev.spec_of(*ev.data_parallel()).with_columns(pl.col("run_id").cast(pl.String))
    seen = dict(rows.group_by("run_id").agg(pl.col("draft_tokens").fill_null(0).sum()).iter_rows())
    # Counts only: the per-position lists are summed per run, not kept with the rows, so an
    # engine's first position is bounded by its accepted tokens per draft (from above).
    sums = (
        rows.filter(pl.col("engine").is_not_null())
        .group_by("run_id", "engine", maintain_order=True)
        .agg(
            pl.len().alias("records"),
            *(pl.col(c).sum() for c in ("drafts", "draft_tokens", "accepted_tokens")),
            pl.col("k").drop_nulls().mode().first().alias("k"),
        )
    )
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for r in sums.to_dicts():
        run_id = r.pop("run_id")
        total = ev.per_run.get(run_id, {}).get("draft_tokens")
        # Only where the rows at hand are all of the run's.
        if not total or int(seen[run_id]) != int(total):
            continue
        drafts, tokens, accepted = r["drafts"], r["draft_tokens"], r["accepted_tokens"]
        if not tokens or accepted is None:
            continue
        r["acceptance_rate"] = accepted / tokens
        r["mean_acceptance_length"] = 1 + accepted / drafts if drafts else None
        out.setdefault(run_id, []).append((int(r["engine"]), r))
    return out


def engine_rows(ev: Evidence, run_id: str, engine: int | None) -> pl.DataFrame:
    """The run's spec rows, of one engine where one is named."""
    rows = ev.spec_of(run_id)
    return rows if engine is None else rows.filter(pl.col("engine") == engine)


def engine_said(engine: int | None, text: str) -> str:
    """A finding's words about one engine of a data-parallel run."""
    return text if engine is None else f"Engine {engine} of this data-parallel run: {text}"


K_ASSUMED = "k not stated"  # how an assumed k is said (and recognised)


@dataclass(frozen=True)
class Trials:
    """What a run's acceptance rests on, as trials of a proportion: its drafts (each a trial:
    a draft's tokens are not independent), the tokens each drafts (k) and how many were
    accepted; and what had to be assumed to get them where the log did not print them."""

    drafts: float
    k: float
    accepted: float
    assumptions: tuple[str, ...] = ()
    # What identities on the printed figures proved of the sample (``printed_sample``):
    # said in the finding, but no assumption (a bound proven is not a count assumed).
    read: tuple[str, ...] = ()
    # The variance of a draft's accepted tokens where per-position counts of all its drafts
    # give their distribution (``spread_of``); None where only the mean is known.
    spread: float | None = None

    @property
    def rate(self) -> float:
        return self.accepted / (self.drafts * self.k) if self.drafts and self.k else 0.0

    def interval(self, z: float) -> tuple[float, float]:
        return rate_interval(self.accepted, self.drafts, self.k, z)

    def upper(self, z: float) -> float:
        return self.interval(z)[1]


@dataclass(frozen=True)
class BoundTest:
    """A claim that a bound, at whatever z it is taken, is under a threshold (or, with
    ``above``, at least the threshold): the test a finding states."""

    what: str  # "upper bound of a1"
    bound: Callable[[float], float]
    threshold: float
    above: bool = False
    percent: bool = True  # a share, shown as a percentage (else a number of tokens)

    def holds(self, z: float) -> bool:
        value = self.bound(z)
        return value >= self.threshold if self.above else value < self.threshold

    def said(self, z: float) -> str:
        sign = ">=" if self.above else "<"
        form = "{:.1%}" if self.percent else "{:.2f}"
        value, threshold = form.format(self.bound(z)), form.format(self.threshold)
        return f"{one_sided(z)} {self.what} {value} {sign} {threshold}"


def trials_of(ev: Evidence, run_id: str, agg: Mapping[str, Any]) -> Trials | None:
    """The run's trials: counted where the log prints drafts, else from draft tokens and an
    assumed k, else (SGLang's decode line prints only a mean) from the printed mean
    acceptance length over an assumed number of verify steps per line. None when the run
    says nothing of its acceptance."""
    cfg = ev.config["evidence"]
    drafts, tokens = agg.get("drafts"), agg.get("draft_tokens")
    accepted = agg.get("accepted_tokens")
    if drafts and tokens and accepted is not None:
        return Trials(float(drafts), tokens / drafts, float(accepted), spread=spread_of(agg))
    k = agg.get("k") or ev.runs.get(run_id, {}).get("k")
    if tokens and accepted is not None:
        if k:
            return Trials(tokens / k, float(k), float(accepted))
        if agg.get("counted_k"):
            k = int(agg["counted_k"])
            said_k = (str(agg["counted_k_said"]),)
            return Trials(tokens / k, float(k), float(accepted), read=said_k)
        assumed = cfg["assumed_k"]
        return Trials(
            tokens / assumed, float(assumed), float(accepted), (f"{K_ASSUMED}: {assumed} assumed",)
        )
    tau, records = agg.get("mean_acceptance_length"), agg.get("records") or 0
    printed, stated = agg.get("printed_rate"), agg.get("stated_rate")
    rate = printed if printed is not None else stated
    if tau is None and rate is not None and records:
        # A rate printed or stated without counts: as many verify steps as behind a printed
        # mean, and a finding on it is at most suggestive (it rests on both).
        steps = cfg["steps_per_printed_mean"] * records
        whose = (
            f"counts not printed: the printed rate of {float(rate):.1%}"
            if printed is not None
            else f"counts not stated: the author's rate of {float(rate):.1%}"
        )
        k_said = () if k else (f"{K_ASSUMED}: {cfg['assumed_k']} assumed",)
        k = k or cfg["assumed_k"]
        # (A list printed alone, with no mean length, keeps the steps assumed for it: the
        # drafts its fractions prove are a few hundred at most, and a healthy one still asks
        # for its counts, tests/test_lone_lines.)
        return Trials(
            float(steps),
            float(k),
            float(rate) * k * steps,
            (f"{whose} taken as {steps} verify steps", *k_said),
        )
    if tau is None or not records:
        return None
    steps = cfg["steps_per_printed_mean"] * records
    said = [
        f"counts not printed: each of the {records} lines taken as "
        f"{cfg['steps_per_printed_mean']} verify steps"
    ]
    generated = bench_steps(ev.bench, run_id, tau)
    read: tuple[str, ...] = ()
    if generated is not None:
        steps, said = generated[0], [generated[1]]
    else:
        steps, proven, read = proven_steps(agg, steps, tuple(said))
        said = list(proven)
    printed = implied_k(agg) if not k else None
    if printed is not None:
        k = printed[0]
        said.append(printed[1])
    if not k:
        k = cfg["assumed_k"]
        least = math.ceil(tau - 1 - 1e-9)
        if least > k:
            # A mean length over k + 1 refutes the k assumed: no fewer tokens were drafted
            # than were accepted, so the least k the mean allows is assumed instead.
            k = least
            said.append(f"{K_ASSUMED}: {k} assumed, the least a mean length of {tau:.2f} allows")
        else:
            said.append(f"{K_ASSUMED}: {k} assumed")
    return Trials(float(steps), float(k), max(0.0, tau - 1) * steps, tuple(said), read)


def sample_of(trials: Trials) -> dict[str, Any]:
    """A finding's sample from its trials: the drafts, and what the printed figures proved
    of them where they were read, not counted (``Trials.read``)."""
    return {"drafts": round(trials.drafts)} | (
        {"read": "; ".join(trials.read)} if trials.read else {}
    )


def strength(ev: Evidence, holds: Callable[[float], bool]) -> str | None:
    """How strongly the data supports a claim: "certain" when it holds with the bounds at
    ``z_certain``, "likely" when it holds at ``z_claim``, else None (the claim is not
    made). Claims are one-sided ("below X"), and so are their bounds."""
    cfg = ev.config["evidence"]
    if holds(cfg["z_certain"]):
        return "certain"
    if holds(cfg["z_claim"]):
        return "likely"
    return None


def confidence(
    ev: Evidence,
    level: str,
    test: Callable[[float], str] | str,
    sample: Mapping[str, Any],
    assumptions: Iterable[str] = (),
) -> Confidence:
    """A finding's confidence, its test told at the level that decided it."""
    said = test if isinstance(test, str) else test(decided_z(ev, level))
    return Confidence(level, said, dict(sample), list(assumptions))


def decided_z(ev: Evidence, level: str) -> float:
    """The z of the bound that decided a claim made at ``level``."""
    cfg = ev.config["evidence"]
    return float(cfg["z_certain"] if level == "certain" else cfg["z_claim"])


def drafts_of(agg: Mapping[str, Any]) -> int:
    return int(agg.get("drafts") or 0)


def method_of(run: Mapping[str, Any]) -> str | None:
    method = run.get("spec_method")
    if method is None and run.get("drafter_loader") == "MTP":
        method = "mtp"
    return method


def counts_of(rows: pl.DataFrame) -> dict[str, Any]:
    drafts = int(rows["drafts"].sum() or 0) if rows.height else 0
    accepted = int(rows["accepted_tokens"].sum() or 0) if rows.height else 0
    tokens = int(rows["draft_tokens"].sum() or 0) if rows.height else 0
    k = tokens / drafts if drafts else 0
    return {
        "drafts": drafts,
        "accepted": accepted,
        "draft_tokens": tokens,
        "k": k,
        "rate": accepted / tokens if tokens else None,
    }


def below(ev: Evidence, a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """The strength of the claim that side ``a`` accepts less than side ``b`` (sides as
    ``counts_of`` gives them): a's upper bound under b's lower bound."""

    def holds(z: float) -> bool:
        _, high = rate_interval(a["accepted"], a["drafts"], a["k"], z)
        low, _ = rate_interval(b["accepted"], b["drafts"], b["k"], z)
        return high < low

    return strength(ev, holds)


def below_test(
    a: Mapping[str, Any], b: Mapping[str, Any], names: tuple[str, str]
) -> Callable[[float], str]:
    """The words of ``below``'s test at a z: the two bounds that separate."""

    def said(z: float) -> str:
        _, high = rate_interval(a["accepted"], a["drafts"], a["k"], z)
        low, _ = rate_interval(b["accepted"], b["drafts"], b["k"], z)
        return (
            f"{one_sided(z)} upper bound {high:.1%} {names[0]} < lower bound {low:.1%} {names[1]}"
        )

    return said


def nothing_accepted(ev: Evidence, run_id: str, agg: Mapping[str, Any]) -> bool:
    """Is the run's first position at or under ``zero_acceptance.max_first``? Then it is
    zero_acceptance's to judge, and the detectors of how much or where leave it alone."""
    curve = agg.get("per_position") or []
    if curve and curve[0] is not None:
        first = float(curve[0])
    else:
        trials = trials_of(ev, run_id, agg)
        if trials is None:
            return False
        first = min(1.0, trials.rate * trials.k)
    return first <= ev.config["zero_acceptance"]["max_first"]
