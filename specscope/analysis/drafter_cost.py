"""The drafter's cost as the engines measure it, for ``advise``'s speedup model: the time
the drafter takes per verify step over the time of the target's verify pass (c_step; per
draft position it is c_step / k for a chain drafter).

- **TensorRT-LLM** ``draftOverhead`` (iteration stats) / ``draft_overhead`` (``/metrics``):
  the drafter's latency over the iteration's (PyExecutor: ``draft_latency_ms /
  iter_latency_ms``), so c_step = o / (1 - o), the rest of the iteration being the target's.
  The mean over the iterations that drafted, or the gauge's last value.
- **llama.cpp** ``statistics <impl>: ... dur(b,g,a) = b, g, a ms`` (earlier ``#calls = N``
  with ``dur(b,g,a)`` or ``dur = D ms``, N counting the draft calls): common/speculative.cpp
  adds the wall time of each ``draft()`` call of the implementation to ``t_draft_us`` (one
  call drafts for every slot drafting at that step) and counts the calls (``#calls``' g),
  both since the server started, so g / calls is the drafter's time per verify step. The
  target's comes from the request just before the line: its ``eval time`` (decode, drafter
  included) over its verify steps, the tokens it generated less those accepted from drafts
  (each step emits one token of the target's and the accepted ones), less the drafter's
  time per step and that of the implementations chained with it (n-gram lookups whose
  statistics follow the same request: their time since the start over the drafter's
  calls), which count as drafting's.
- **vLLM** n-gram drafter benchmark (benchmarks/benchmark_ngram_proposer.py's table,
  parsers/vllm_ngram_proposer_bench.toml): the proposer's mean time for a batch of N
  requests, alone, with no target. It is set against the step of a vLLM n-gram run in the
  same store: the run's engine-stats intervals give the step time (each running request
  emits tau tokens a step, so a step takes running x tau / generation throughput), the
  proposer's time for that many requests (it drafts each request in turn: its time over N,
  times the running requests) is drafting's part of it, the rest the target's. It takes
  the costliest row per request (a bound over the n-gram sizes benchmarked), said so.

Measured at the load the run saw: a drafter's share grows with the batch it drafts for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from specscope.store.reading import Store

OVERHEAD_FORMATS = ("trtllm_iteration_stats", "prometheus_text_trtllm")
STATISTICS = "llamacpp_statistics"
EVAL_TIME = "llamacpp_eval_time"
REQUEST = "llamacpp_request"
PROPOSER_BENCH = "vllm_ngram_proposer_bench"
LOOKUP_METHODS = ("ngram",)  # what the n-gram proposer's benchmark times


@dataclass(frozen=True)
class MeasuredCost:
    c_step: float  # drafter time per verify step over the target's verify pass
    said: str  # how it was measured, in words
    detail: dict[str, Any] = field(default_factory=dict)


def cost_rows(store: Store) -> dict[str, pl.DataFrame]:
    """The rows that carry a measured cost, few columns each: TensorRT-LLM's overhead by run
    (averaged in the scan), llama.cpp's statistics, eval-time and request lines."""
    return costs_in(store.spec_decode, store.engine_stats, store.bench)


def costs_in(
    spec: pl.LazyFrame, engine_stats: pl.LazyFrame, bench: pl.LazyFrame | None = None
) -> dict[str, pl.DataFrame]:
    """``cost_rows`` of rows not in a store (what ``watch`` holds)."""
    overhead = (
        spec.filter(
            pl.col("format").is_in(OVERHEAD_FORMATS)
            & pl.col("extra").str.contains("draft_overhead", literal=True)
        )
        .with_columns(
            pl.col("extra").str.json_path_match("$.draft_overhead").cast(pl.Float64).alias("o")
        )
        .filter(pl.col("o").is_not_null() & (pl.col("draft_tokens").fill_null(1) > 0))
        .group_by("run_id")
        .agg(pl.col("o").mean().alias("overhead"), pl.len().alias("records"))
        .collect()
    )
    lines = ["run_id", "source_id", "line"]
    statistics = (
        spec.filter(
            (pl.col("format") == STATISTICS) & pl.col("extra").str.contains("dur_ms", literal=True)
        )
        .select(*lines, "extra")
        .collect()
    )
    out = {"overhead": overhead}
    if bench is not None:
        out.update(_proposer_rows(bench, spec, engine_stats))
    if statistics.is_empty():  # the rest only serves llama.cpp's statistics
        return out
    sources = statistics["source_id"].unique().to_list()
    evals = (
        engine_stats.filter((pl.col("format") == EVAL_TIME) & pl.col("source_id").is_in(sources))
        .select(*lines, "extra")
        .collect()
    )
    requests = (
        spec.filter((pl.col("format") == REQUEST) & pl.col("source_id").is_in(sources))
        .select(*lines, "accepted_tokens")
        .collect()
    )
    return {**out, "statistics": statistics, "eval": evals, "requests": requests}


def _proposer_rows(
    bench: pl.LazyFrame, spec: pl.LazyFrame, engine_stats: pl.LazyFrame
) -> dict[str, pl.DataFrame]:
    """vLLM's n-gram proposer benchmark rows, and where there are any, what sets them
    against a run: each run's engine-stats intervals (running requests, generation
    throughput) and its drafts and accepted tokens (its tau)."""
    rows = (
        bench.filter(pl.col("format") == PROPOSER_BENCH)
        .select("line", "max_concurrency", "extra")
        .collect()
    )
    if rows.is_empty():
        return {}
    intervals = (
        engine_stats.filter((pl.col("running_reqs") > 0) & (pl.col("generation_throughput") > 0))
        .select("run_id", "running_reqs", "generation_throughput")
        .collect()
    )
    sums = (
        spec.filter(pl.col("drafts").is_not_null() & pl.col("accepted_tokens").is_not_null())
        .group_by("run_id")
        .agg(pl.col("drafts").sum(), pl.col("accepted_tokens").sum())
        .collect()
    )
    return {"proposer": rows, "intervals": intervals, "sums": sums}


def measured_cost(
    costs: dict[str, pl.DataFrame] | None, run_id: str, runs: dict[str, dict[str, Any]]
) -> MeasuredCost | None:
    """The run's measured drafter cost, or None where the store holds none for it. A
    request run of llama.cpp takes that of the one implementation that drafted beside it."""
    if not costs:
        return None
    overhead = costs["overhead"].filter(pl.col("run_id") == run_id)
    if overhead.height:
        o, n = float(overhead["overhead"][0]), int(overhead["records"][0])
        if 0 <= o < 1:
            return MeasuredCost(
                o / (1 - o),
                f"measured: TensorRT-LLM draft overhead {o:.3f} (the drafter's share of each "
                f"iteration, mean of {n:,}), c per step = o/(1-o)",
                {"draft_overhead": o, "records": n},
            )
    if "proposer" in costs:
        found = _proposer(costs, run_id, runs.get(run_id, {}))
        if found is not None:
            return found
    if "statistics" not in costs:
        return None
    stats = costs["statistics"]
    mine = stats.filter(pl.col("run_id") == run_id)
    if mine.is_empty():
        source = runs.get(run_id, {}).get("source_id")
        beside = stats.filter(pl.col("source_id") == source)
        drafting = [r for r in beside.iter_rows(named=True) if _per_call(r) is not None]
        if len({r["run_id"] for r in drafting}) != 1:
            return None  # no statistics beside it, or several implementations drafting
        mine = pl.DataFrame(drafting)
    return _llamacpp(costs, mine.sort("line").row(-1, named=True))


def _per_call(row: dict[str, Any]) -> tuple[float, int] | None:
    """The drafter's time per draft call (ms) and the calls, from a statistics line:
    ``dur(b,g,a)``'s g over ``#calls(b,g,a)``'s g; in the earlier forms ``#calls = N``
    counts the draft calls alone, its duration either ``dur(b,g,a)``'s g or the one
    ``dur = D ms`` (the time of generating drafts, ``gen_duration_us``)."""
    try:
        extra = json.loads(row["extra"] or "{}")
    except ValueError:
        return None
    dur, calls = extra.get("dur_ms"), extra.get("calls")
    if isinstance(calls, list):
        calls = calls[1] if len(calls) >= 2 else None
    if isinstance(dur, list):
        dur = dur[1] if len(dur) >= 2 else None
    if not isinstance(calls, int) or isinstance(calls, bool) or calls <= 0:
        return None
    if not isinstance(dur, int | float) or isinstance(dur, bool):
        return None
    return float(dur) / calls, calls


def _llamacpp(costs: dict[str, pl.DataFrame], row: dict[str, Any]) -> MeasuredCost | None:
    per = _per_call(row)
    if per is None or per[0] <= 0:
        return None
    draft_ms, calls = per
    source, line = row["source_id"], row["line"]
    before = costs["eval"].filter((pl.col("source_id") == source) & (pl.col("line") < line))
    if before.is_empty():
        return None
    last = before.sort("line").row(-1, named=True)
    try:
        timed = json.loads(last["extra"] or "{}")
    except ValueError:
        return None
    eval_ms, tokens = timed.get("eval_ms"), timed.get("eval_tokens")
    request = costs["requests"].filter(
        (pl.col("source_id") == source)
        & (pl.col("line") > last["line"])
        & (pl.col("line") < line)
        & pl.col("accepted_tokens").is_not_null()
    )
    if not eval_ms or not tokens or request.is_empty():
        return None
    asked = request.sort("line").row(-1, named=True)
    accepted = int(asked["accepted_tokens"])
    steps = int(tokens) - accepted
    if steps <= 0:
        return None
    others = _chained_ms(costs, row, asked["line"]) / calls
    target_ms = float(eval_ms) / steps - draft_ms - others
    if target_ms <= 0:
        return None
    chained = f" and {others:.3f} ms of the implementations chained with it" if others else ""
    return MeasuredCost(
        (draft_ms + others) / target_ms,
        f"measured: llama.cpp drafter {draft_ms:.2f} ms a step (draft time over {calls:,} calls, "
        f"line {line}){chained} against the target's {target_ms:.2f} ms (eval time "
        f"{float(eval_ms):,.0f} ms over {steps:,} verify steps, line {last['line']})",
        {
            "draft_ms_per_step": draft_ms,
            "chained_ms_per_step": others,
            "target_ms_per_step": target_ms,
            "draft_calls": calls,
            "verify_steps": steps,
            "lines": [last["line"], line],
        },
    )


def _proposer(
    costs: dict[str, pl.DataFrame], run_id: str, run: dict[str, Any]
) -> MeasuredCost | None:
    """An n-gram run's cost from the proposer's benchmark (the module's docstring)."""
    if run.get("spec_method") not in LOOKUP_METHODS:
        return None
    sums = costs["sums"].filter(pl.col("run_id") == run_id)
    mine = costs["intervals"].filter(pl.col("run_id") == run_id)
    if sums.is_empty() or mine.is_empty() or not int(sums["drafts"][0]):
        return None
    tau = 1 + int(sums["accepted_tokens"][0]) / int(sums["drafts"][0])
    running_reqs = mine["running_reqs"].cast(pl.Float64)
    steps_ms = 1000 * running_reqs * tau / mine["generation_throughput"]
    running, step_ms = _median(running_reqs), _median(steps_ms)
    row = _bench_row(costs["proposer"])
    if row is None or running <= 0 or step_ms <= 0:
        return None
    draft_ms = row["propose_avg_us"] / row["requests"] * running / 1000
    target_ms = step_ms - draft_ms
    if target_ms <= 0:
        return None
    return MeasuredCost(
        draft_ms / target_ms,
        f"measured: vLLM n-gram proposer {row['propose_avg_us']:,.1f} us for {row['requests']:,} "
        f"requests of {row['tokens']:,} tokens (max_ngram {row['max_ngram']}, the costliest row; "
        f"benchmark line {row['line']}), {draft_ms:.3f} ms for the run's median "
        f"{running:g} running, against its step of {step_ms:.2f} ms (running x tau "
        f"{tau:.2f} / generation throughput, median of {mine.height:,} intervals)",
        {
            "draft_ms_per_step": draft_ms,
            "target_ms_per_step": target_ms,
            "step_ms": step_ms,
            "running": running,
            "tau": tau,
            "max_ngram": row["max_ngram"],
            "lines": [row["line"]],
        },
    )


def _median(values: pl.Series) -> float:
    return float(np.median(values.to_numpy())) if len(values) else 0.0


def _bench_row(bench: pl.DataFrame) -> dict[str, Any] | None:
    """The benchmark row that bounds the run's drafter: the costliest per request (the
    run's prompt_lookup_max is not among what a run keeps of its config)."""
    rows = []
    for r in bench.iter_rows(named=True):
        try:
            extra = json.loads(r["extra"] or "{}")
        except ValueError:
            continue
        avg, tokens, n = extra.get("propose_avg_us"), extra.get("tokens"), r["max_concurrency"]
        if isinstance(avg, int | float) and avg > 0 and n is not None and n >= 1:
            rows.append({**extra, "requests": int(n), "tokens": tokens or 0, "line": r["line"]})
    return max(rows, key=lambda r: r["propose_avg_us"] / r["requests"]) if rows else None


def _chained_ms(costs: dict[str, pl.DataFrame], row: dict[str, Any], request_line: int) -> float:
    """The time since the start of the other implementations whose statistics follow the
    same request (a chain: n-gram lookups tried each step before or after the drafter), all
    of begin, generate and accept: drafting's, not the target's."""
    source, line = row["source_id"], row["line"]
    later = (
        costs["requests"]
        .filter((pl.col("source_id") == source) & (pl.col("line") > request_line))["line"]
        .to_list()
    )
    until = min(later) if later else None
    beside = costs["statistics"].filter(
        (pl.col("source_id") == source)
        & (pl.col("line") > request_line)
        & (pl.col("line") != line)
        & (pl.col("run_id") != row["run_id"])
    )
    total = 0.0
    for other in beside.iter_rows(named=True):
        if until is not None and other["line"] > until:
            continue
        try:
            dur = json.loads(other["extra"] or "{}").get("dur_ms")
        except ValueError:
            continue
        values = dur if isinstance(dur, list) else [dur]
        total += sum(float(v) for v in values if isinstance(v, int | float))
    return total


__all__ = ["MeasuredCost", "cost_rows", "costs_in", "measured_cost"]
