"""What a run without draft counts still tells of its sample, from what it printed beside
its mean acceptance length: k from the rate printed with it, and the verify steps behind a
benchmark's mean from the tokens it generated.

A ``vllm bench serve`` block cut before its ``Drafts``/``Accepted`` lines, or a script's
summary, prints 'Acceptance rate (%): 19.92' and 'Acceptance length: 2.39': the rate is
Σ a_i / k and the length 1 + Σ a_i, so k is their quotient. And each verify step emits the
accepted tokens and one more, so the block's generated tokens, less each request's first
(made by the prefill), over the mean length are its verify steps: 20,480 tokens of 80
requests at 2.39 are some 8,500 drafts, not the 40 a lone printed mean is taken for. Both
are identities on printed figures, said in the finding, never stored as counts.

What sample does a printed figure carry? Only what an identity on the figures proves, and
a lower bound is as good as a count for a claim that a rate is below something (more
drafts only narrow the bound). Two more are read here, never assumed:

- A vLLM line whose per-position list was cut (or is not printed) still prints its
  Accepted and Drafted tokens and its mean length, 1 + accepted / drafts: the drafts are
  the accepted tokens over the mean's gain, within its rounding, and k is the drafted
  tokens over them, which must be a whole number (10 accepted at 1.50 are 20 drafts, and
  300 drafted tokens make k 15).
- A per-position list a server prints without counts (vLLM: each rate is the drafts that
  reached the position over the interval's drafts, printed to 3 decimals) proves its
  drafts are at least the least n for which every printed rate is some m/n that rounds to
  it: 0.600, 0.385, 0.215, 0.108, 0.062 need 65 drafts, exactly world case 5's count. It
  is no more than that: at 3 decimals every curve fits some n under 1,000, so it stands
  for "hundreds", never more; a list of zeros proves one draft; a list printed to 2
  decimals, or paraphrased, or averaged by a script from many lines (whose rates are no
  fractions of one count), proves nothing and is not read. Such a bound replaces the
  verify steps assumed for lines that print their mean length, where it is larger; a list
  printed alone keeps the steps assumed for it (tests/test_lone_lines: a healthy one asks
  for the counts that would settle it).

A lone stated rate ('0.84%') carries no sample at all: no identity applies to one number,
and the steps assumed for it stay an assumption (its findings are at most suggestive).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

# A k read off a rate and a length outside this is a misreading of one of them.
_K_RANGE = (1, 64)
# vLLM's SpecDecoding line, whole or pasted in part: its per-position list is a server's,
# every rate printed to 3 decimals over the interval's one count of drafts (the formats'
# `complete` pattern demands the 3 decimals), its mean length 1 + accepted / drafts to 2.
VLLM_LINES = (
    "vllm_v1_spec_decode",
    "vllm_v1_spec_decode_fragment",
    "vllm_v1_spec_decode_trimmed",
)


def printed_k(spec: pl.LazyFrame, runs: list[str]) -> pl.DataFrame:
    """Per run of ``runs`` (runs without draft counts), ``printed_k``: the k that each of
    its rows printing both a mean length and a rate implies, when they all imply the same
    one and it is within reason; ``printed_k_said``: how it was read."""
    names = spec.collect_schema().names()
    empty = pl.DataFrame(
        schema={"run_id": pl.String, "printed_k": pl.Int64, "printed_k_said": pl.String}
    )
    if not runs or not {"acceptance_rate", "mean_acceptance_length"} <= set(names):
        return empty
    rows = (
        spec.filter(
            pl.col("run_id").is_in(runs)
            & pl.col("acceptance_rate").is_between(0, 1, closed="right")
            & (pl.col("mean_acceptance_length") > 1)
        )
        .select(pl.col("run_id").cast(pl.String), "mean_acceptance_length", "acceptance_rate")
        .collect()
    )
    implied: dict[str, set[int]] = {}
    said: dict[str, str] = {}
    for run_id, tau, rate in rows.iter_rows():
        quotient = (tau - 1) / rate
        k = round(quotient)
        if not _K_RANGE[0] <= k <= _K_RANGE[1] or tau - 1 > k:
            implied.setdefault(run_id, set()).add(-1)  # a misreading: no k from this run
            continue
        implied.setdefault(run_id, set()).add(k)
        said.setdefault(
            run_id,
            f"k {k} from the printed mean length and rate ({tau - 1:.2f} / {rate:.1%} = "
            f"{quotient:.2f})",
        )
    known = {r: ks.pop() for r, ks in implied.items() if len(ks) == 1 and -1 not in ks}
    if not known:
        return empty
    return pl.DataFrame(
        {
            "run_id": list(known),
            "printed_k": list(known.values()),
            "printed_k_said": [said[r] for r in known],
        },
        schema=empty.schema,
    )


def bench_steps(bench: pl.DataFrame, run_id: str, tau: float) -> tuple[float, str] | None:
    """The verify steps behind a run's benchmark blocks that print a mean length but no
    drafts: their generated tokens, less a first token per successful request, over the
    mean length; with how that was read. None where a block lacks what it takes."""
    needed = {"run_id", "total_generated_tokens", "successful_requests", "acceptance_length"}
    if tau <= 1 or bench.is_empty() or not needed <= set(bench.columns):
        return None
    blocks = bench.filter(
        (pl.col("run_id").cast(pl.String) == run_id) & pl.col("acceptance_length").is_not_null()
    )
    if blocks.is_empty():
        return None
    steps = 0.0
    generated = 0
    for row in blocks.select(
        "total_generated_tokens", "successful_requests", "acceptance_length"
    ).iter_rows():
        tokens, requests, length = row
        if not tokens or requests is None or not length or length <= 1 or tokens <= requests:
            return None
        steps += (tokens - requests) / length
        generated += tokens
    return steps, (
        f"counts not printed: drafts taken as the {generated:,} generated tokens, less a "
        f"first token per request, over the mean length ({steps:,.0f} verify steps)"
    )


def implied_k(agg: Mapping[str, Any]) -> tuple[int, str] | None:
    """The run's ``printed_k`` and how it was read, where ``printed_k`` found one."""
    k = agg.get("printed_k")
    return (int(k), str(agg.get("printed_k_said"))) if k else None


def least_drafts(rates: Sequence[float], decimals: int = 3) -> int:
    """The fewest drafts n for which every rate is some m/n that prints as given to
    ``decimals`` places: a lower bound on the drafts behind one line's list (1 for a list
    of zeros or ones, under 10**decimals always)."""
    values = np.asarray([r for r in rates if r is not None and 0 <= r <= 1], dtype=float)
    if values.size == 0:
        return 1
    half = 0.5 * 10.0**-decimals + 1e-9
    n = np.arange(1, 10**decimals + 1, dtype=float)[:, None]
    fits = (np.abs(np.round(values * n) / n - values) <= half).all(axis=1)
    return int(np.argmax(fits)) + 1 if fits.any() else 10**decimals


def curve_drafts(spec: pl.LazyFrame, runs: list[str]) -> pl.DataFrame:
    """Per run of ``runs`` (runs without draft counts) whose rows print a server's
    per-position list (``VLLM_LINES``): ``curve_drafts``, the sum over those rows
    of the drafts each list proves at least (``least_drafts``), and how it was read."""
    empty = pl.DataFrame(
        schema={"run_id": pl.String, "curve_drafts": pl.Int64, "curve_drafts_said": pl.String}
    )
    names = spec.collect_schema().names()
    if not runs or not {"format", "per_position_rate", "draft_tokens"} <= set(names):
        return empty
    rows = (
        spec.filter(
            pl.col("run_id").cast(pl.String).is_in(runs)
            & pl.col("format").is_in(VLLM_LINES)
            & pl.col("per_position_rate").is_not_null()
            & pl.col("draft_tokens").is_null()
        )
        .select(pl.col("run_id").cast(pl.String), "per_position_rate")
        .collect()
    )
    least: dict[str, list[int]] = {}
    # (a log repeats its lists: each distinct one is solved once)
    solved: dict[tuple[float, ...], int] = {}
    for run_id, curve in rows.iter_rows():
        key = tuple(curve)
        if key not in solved:
            solved[key] = least_drafts(curve)
        least.setdefault(run_id, []).append(solved[key])
    if not least:
        return empty
    said = {
        r: f"at least {sum(ns):,} drafts behind the {len(ns)} printed per-position "
        f"list{'s' if len(ns) > 1 else ''} (the fewest whose fractions round to every rate "
        "printed)"
        for r, ns in least.items()
    }
    return pl.DataFrame(
        {
            "run_id": list(least),
            "curve_drafts": [sum(ns) for ns in least.values()],
            "curve_drafts_said": [said[r] for r in least],
        },
        schema=empty.schema,
    )


def counted_k(spec: pl.LazyFrame, runs: list[str]) -> pl.DataFrame:
    """Per run of ``runs`` (runs with drafted tokens but no drafts or k): ``counted_k``, the
    k each of its vLLM rows implies where the accepted tokens over the printed mean's gain
    (within its rounding) allow exactly one whole number of drafts dividing the drafted
    tokens, when every such row implies the same k; ``counted_k_said``: how."""
    empty = pl.DataFrame(
        schema={"run_id": pl.String, "counted_k": pl.Int64, "counted_k_said": pl.String}
    )
    names = spec.collect_schema().names()
    needed = {"format", "draft_tokens", "accepted_tokens", "mean_acceptance_length"}
    if not runs or not needed <= set(names):
        return empty
    # tau printed to 2 decimals: the drafts lie between the accepted tokens over its gain's
    # two ends, so k (the drafted tokens over them, a whole number) between these two.
    gain = pl.col("mean_acceptance_length") - 1
    per_token = pl.col("draft_tokens") / pl.col("accepted_tokens")
    rows = (
        spec.filter(
            pl.col("run_id").cast(pl.String).is_in(runs)
            & pl.col("format").is_in(VLLM_LINES)
            & (pl.col("draft_tokens") > 0)
            & (pl.col("accepted_tokens") > 0)
            & (gain > 0.005)
        )
        .select(
            pl.col("run_id").cast(pl.String),
            "draft_tokens",
            "accepted_tokens",
            "mean_acceptance_length",
            ((gain - 0.005) * per_token - 1e-6).ceil().clip(_K_RANGE[0]).cast(pl.Int64).alias("lo"),
            ((gain + 0.005) * per_token + 1e-6)
            .floor()
            .clip(upper_bound=_K_RANGE[1])
            .cast(pl.Int64)
            .alias("hi"),
        )
        .with_row_index("row")
    )
    # (a range of more than a few ks pins none: no row is multiplied by more than four)
    fits = (
        rows.filter(pl.col("hi") - pl.col("lo") <= 3)
        .select("row", "draft_tokens", pl.int_ranges("lo", pl.col("hi") + 1).alias("k"))
        .explode("k")
        .filter(pl.col("draft_tokens") % pl.col("k") == 0)
        .group_by("row")
        .agg(pl.col("k").first(), pl.len().alias("ks"))
        .filter(pl.col("ks") == 1)
        .select("row", "k")
    )
    # A row whose figures fit no k, or several, leaves its run without one.
    runs_k = (
        rows.join(fits, on="row", how="left")
        .group_by("run_id", maintain_order=True)
        .agg(
            pl.col("k").fill_null(-1).n_unique().alias("kinds"),
            pl.col("k").fill_null(-1).min().alias("k"),
            pl.col("draft_tokens", "accepted_tokens", "mean_acceptance_length").first(),
        )
        .filter((pl.col("kinds") == 1) & (pl.col("k") > 0))
        .collect()
    )
    if runs_k.is_empty():
        return empty
    said = [
        f"k {k} from the printed mean length: {accepted:,} accepted over {tau - 1:.2f} a draft "
        f"is {tokens // k:,} drafts of the {tokens:,} drafted tokens"
        for k, tokens, accepted, tau in runs_k.select(
            "k", "draft_tokens", "accepted_tokens", "mean_acceptance_length"
        ).iter_rows()
    ]
    return pl.DataFrame(
        {"run_id": runs_k["run_id"], "counted_k": runs_k["k"], "counted_k_said": said},
        schema=empty.schema,
    )


def proven_steps(
    agg: Mapping[str, Any], steps: float, said: tuple[str, ...]
) -> tuple[float, tuple[str, ...], tuple[str, ...]]:
    """The verify steps a run without counts rests on: the drafts its printed per-position
    lists prove at least (``printed_sample.curve_drafts``) where more than ``steps``
    assumed, read and no longer assumed; else ``steps`` as ``said``."""
    proven = agg.get("curve_drafts")
    if proven and proven > steps:
        return float(proven), (), (str(agg["curve_drafts_said"]),)
    return steps, said, ()


__all__ = [
    "VLLM_LINES",
    "bench_steps",
    "counted_k",
    "curve_drafts",
    "implied_k",
    "least_drafts",
    "printed_k",
    "proven_steps",
]
