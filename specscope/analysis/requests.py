"""Acceptance request by request: the distribution over a run's requests, the requests
accepted least and what they share, and the requests whose acceptance sits at about 0 or 1.

Per-request records are spec-decode rows of the formats that print one request's counts
(``REQUEST_FORMATS``); each capture of them is a run of its own, beside any interval run of
the same log (``specscope.logs.groups``). A request's rate is its accepted draft tokens over
its drafted tokens, the one definition. A request that drafted fewer than
``request_acceptance.min_draft_tokens`` tokens is counted but kept out of the quantiles,
the histogram and the tails: its rate is mostly noise. Quantiles are nearest-rank (the
value at rank ceil(p n) of the n rates sorted), so a hand count gives the same numbers;
the median's interval is the distribution-free one of order statistics. A request's own
claim (about 0, about 1) is a Wilson bound with drafts as trials, as any run's is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from specscope.stats import rate_interval
from specscope.store.reading import Store

# The definitions whose records are one request each (parsers/<name>.toml).
REQUEST_FORMATS = (
    "llamacpp_request",
    "llamacpp_response_timings",
    "llamacpp_timings_assignments",
    "omlx_mtp_summary",
    "omlx_vlm_mtp_stats",
    "sglang_request_finish",
    "sglang_request_meta_info",
    "trtllm_request_spec_decode",
    "vllm_request_spec_decode",
)

# What a request record may say beside its counts (in ``extra``), as the report names it.
TRAITS = {
    "prompt_tokens": "prompt tokens",
    "output_tokens": "output tokens",
    "cached_tokens": "cached prompt tokens",
}

QUANTILES = (0.1, 0.5, 0.9)
BINS = 10  # the histogram's bins over 0-1, the last holding 1.0

_COLUMNS = (
    "run_id",
    "line",
    "format",
    "k",
    "drafts",
    "draft_tokens",
    "accepted_tokens",
    "per_position_rate",
    "extra",
)


def request_rows(
    store: Store, run_ids: Iterable[str] | None = None, *, since: datetime | None = None
) -> pl.DataFrame:
    """The store's per-request rows (of ``run_ids`` where given, stamped at ``since`` or
    later where given), the columns this module reads: a filter on the format, so a store
    without any reads little."""
    return requests_in(store.spec_decode, run_ids, since=since)


def requests_in(
    spec: pl.LazyFrame, run_ids: Iterable[str] | None = None, *, since: datetime | None = None
) -> pl.DataFrame:
    """``request_rows`` of spec-decode rows not in a store (what ``watch`` holds)."""
    rows = spec.filter(pl.col("format").is_in(REQUEST_FORMATS))
    wanted = list(run_ids or ())
    if wanted:
        rows = rows.filter(pl.col("run_id").is_in(wanted))
    if since is not None:
        rows = rows.filter(pl.col("ts") >= since)
    return rows.select(_COLUMNS).collect()


@dataclass(frozen=True)
class Request:
    """One request's counts and what its record says about it."""

    line: int | None
    drafted: int
    accepted: int
    trials: float  # drafts (verify steps): counted, or drafted tokens over k
    k_known: bool  # trials counted or from a k the record gives, not the largest k plausible
    traits: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.accepted / self.drafted

    def interval(self, z: float) -> tuple[float, float]:
        return rate_interval(self.accepted, self.trials, self.drafted / self.trials, z)


@dataclass
class Distribution:
    """A run's per-request acceptance."""

    run_id: str
    requests: list[Request]  # those with enough drafted tokens, least accepted first
    few: int  # requests that drafted too few tokens to count in the tails
    min_draft_tokens: int
    quantiles: dict[str, float]
    median_interval: tuple[float, float] | None
    histogram: list[int]
    lowest: list[Request]
    shared: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": len(self.requests),
            "few_drafts": self.few,
            "min_draft_tokens": self.min_draft_tokens,
            "quantiles": self.quantiles,
            "median_interval": list(self.median_interval) if self.median_interval else None,
            "histogram": self.histogram,
            "lowest": [request_dict(r) for r in self.lowest],
            "shared": self.shared,
        }


def request_dict(r: Request) -> dict[str, Any]:
    return {
        "line": r.line,
        "drafted": r.drafted,
        "accepted": r.accepted,
        "rate": r.rate,
        **r.traits,
    }


def requests_of(rows: pl.DataFrame, max_k: int) -> list[Request]:
    """Each row with drafted tokens as a request. Trials are the verify steps where the
    record counts them, else drafted tokens over its k (the length of the per-position
    list), else over ``max_k``: the fewest trials, so the widest bound (no k assumed)."""
    out = []
    for row in rows.iter_rows(named=True):
        drafted, accepted = row["draft_tokens"], row["accepted_tokens"]
        if not drafted or accepted is None:
            continue  # nothing drafted says nothing of acceptance
        k = row["k"] or len(row.get("per_position_rate") or ())
        if row["drafts"]:
            trials, known = float(row["drafts"]), True
        elif k:
            trials, known = drafted / k, True
        else:
            trials, known = drafted / max_k, False
        out.append(
            Request(row["line"], int(drafted), int(accepted), max(trials, 1.0), known, _traits(row))
        )
    return out


def _traits(row: Mapping[str, Any]) -> dict[str, int]:
    try:
        extra = json.loads(row.get("extra") or "{}")
    except ValueError:
        return {}
    out = {k: int(extra[k]) for k in TRAITS if isinstance(extra.get(k), int | float)}
    # llama.cpp's timings give the prompt as evaluated plus taken from the cache.
    if "prompt_tokens" not in out and isinstance(extra.get("prompt_uncached"), int | float):
        out["prompt_tokens"] = int(extra["prompt_uncached"]) + out.get("cached_tokens", 0)
    return out


def quantile(sorted_rates: Sequence[float], p: float) -> float:
    """Nearest rank: the value at rank ceil(p n), counted from 1."""
    n = len(sorted_rates)
    return sorted_rates[min(n, max(1, math.ceil(p * n - 1e-9))) - 1]


def median_interval(sorted_rates: Sequence[float], z: float) -> tuple[float, float] | None:
    """The distribution-free interval of the median: the order statistics at ranks
    n/2 -+ z sqrt(n)/2 (the normal approximation of the binomial). None under 5 requests,
    where it would span every request."""
    n = len(sorted_rates)
    if n < 5:
        return None
    half = z * math.sqrt(n) / 2
    low = max(1, math.floor(n / 2 - half))
    high = min(n, math.ceil(n / 2 + half) + 1)
    return (sorted_rates[low - 1], sorted_rates[high - 1])


def histogram(rates: Iterable[float], bins: int = BINS) -> list[int]:
    """Counts of rates in [i/bins, (i+1)/bins), the last bin holding 1.0 too."""
    out = [0] * bins
    for r in rates:
        out[min(bins - 1, max(0, math.floor(r * bins + 1e-9)))] += 1
    return out


def shared_traits(
    lowest: Sequence[Request], rest: Sequence[Request]
) -> dict[str, dict[str, float]]:
    """The median of each trait the records give, among the least accepted and the rest
    (a trait is compared only where most requests of both sides have it)."""
    out: dict[str, dict[str, float]] = {}
    for trait in TRAITS:
        a = sorted(r.traits[trait] for r in lowest if trait in r.traits)
        b = sorted(r.traits[trait] for r in rest if trait in r.traits)
        if a and b and 2 * len(a) >= len(lowest) and 2 * len(b) >= len(rest):
            out[trait] = {"lowest": quantile(a, 0.5), "rest": quantile(b, 0.5)}
    return out


def distribution(
    run_id: str, rows: pl.DataFrame, config: Mapping[str, Any], z: float
) -> Distribution | None:
    """The run's per-request distribution; None when it has no request that drafted."""
    cfg = config["request_acceptance"]
    every = requests_of(rows, int(config["evidence"]["max_plausible_k"]))
    if not every:
        return None
    least = int(cfg["min_draft_tokens"])
    kept = sorted((r for r in every if r.drafted >= least), key=lambda r: (r.rate, r.line or 0))
    rates = [r.rate for r in kept]
    quantiles = {f"p{round(p * 100)}": quantile(rates, p) for p in QUANTILES} if rates else {}
    lowest: list[Request] = []
    shared: dict[str, dict[str, float]] = {}
    if rates:
        # The least accepted: the tenth at the bottom, at least one and at most ``show``.
        cut = quantiles["p10"]
        lowest = [r for r in kept if r.rate <= cut][: int(cfg["show"])] or kept[:1]
        shared = shared_traits(lowest, kept[len(lowest) :])
    return Distribution(
        run_id,
        kept,
        len(every) - len(kept),
        least,
        quantiles,
        median_interval(rates, z),
        histogram(rates),
        lowest,
        shared,
    )


def extremes(
    dist: Distribution, config: Mapping[str, Any], z: float
) -> tuple[list[Request], list[Request]]:
    """The requests whose acceptance is about 0 (upper bound under ``near_zero``) and
    about 1 (lower bound over ``near_one``) with bounds at ``z``."""
    cfg = config["request_acceptance"]
    zero = [r for r in dist.requests if r.interval(z)[1] < cfg["near_zero"]]
    one = [r for r in dist.requests if r.interval(z)[0] > cfg["near_one"]]
    return zero, one


__all__ = [
    "REQUEST_FORMATS",
    "TRAITS",
    "Distribution",
    "Request",
    "distribution",
    "extremes",
    "histogram",
    "median_interval",
    "quantile",
    "request_rows",
    "requests_in",
    "requests_of",
]
