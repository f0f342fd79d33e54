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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

# A k read off a rate and a length outside this is a misreading of one of them.
_K_RANGE = (1, 64)


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


__all__ = ["bench_steps", "implied_k", "printed_k"]
