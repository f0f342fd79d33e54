"""Acceptance under load: collapse with concurrency, a KV cache too full to take more
sequences, a benchmark whose requests queue. (Whether speculation is faster at all:
``speedup``.)"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import polars as pl

from specscope.analysis.evidence import (
    BoundTest,
    Evidence,
    below,
    below_test,
    confidence,
    counts_of,
    finding_for,
    strength,
)
from specscope.analysis.findings import Confidence, Finding, Severity
from specscope.stats import wilson


def _setups(ev: Evidence) -> dict[tuple[Any, ...], list[str]]:
    """Runs of one source with the same configuration: one setup measured at different
    loads (a user restarting the same server to change concurrency)."""
    keys = ("spec_method", "k", "model", "quantization", "tensor_parallel_size", "hardware")
    groups: dict[tuple[Any, ...], list[str]] = {}
    for run_id, run in ev.runs.items():
        groups.setdefault((run.get("source_id"), *(run.get(k) for k in keys)), []).append(run_id)
    # Runs that overlap in time run side by side (the engines of one data-parallel server,
    # pulled as a run each): not one setup restarted at another load.
    return {key: _one_after_another(ev, ids) for key, ids in groups.items()}


def _one_after_another(ev: Evidence, run_ids: list[str]) -> list[str]:
    spans = {r: (ev.runs[r].get("first_ts"), ev.runs[r].get("last_ts")) for r in run_ids}

    def overlaps(a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = spans[a], spans[b]
        if a0 is None or a1 is None or b0 is None or b1 is None:
            return False  # a log without timestamps: its runs follow one another
        return bool(a0 <= b1 and b0 <= a1)

    return [r for r in run_ids if not any(overlaps(r, o) for o in run_ids if o != r)]


def concurrency(ev: Evidence) -> list[Finding]:
    out = _stated(ev)
    cfg = ev.config["concurrency_collapse"]
    need = ev.config["evidence"]["min_drafts_per_side"]
    usable = (
        pl.col("drafts").is_not_null()
        & pl.col("running_reqs").is_not_null()
        & (pl.col("running_reqs") >= 1)
    )
    # A data-parallel run is compared within each engine: its engines take different
    # requests, so one engine always at one request against another always busier is two
    # workloads, not one at two loads.
    dp = ev.data_parallel()
    units: list[tuple[list[str], int | None]] = []
    for run_id in ev.runs:
        if run_id in dp:
            engines = ev.spec_of(run_id)["engine"].drop_nulls().unique(maintain_order=True)
            units += [([run_id], int(e)) for e in engines]
        else:
            units.append(([run_id], None))
    units += [(g, None) for g in _setups(ev).values() if len(g) > 1]
    reported: set[str] = set()
    for group, engine in units:
        rows = ev.spec_of(*group).filter(usable)
        if engine is not None:
            rows = rows.filter(pl.col("engine") == engine)
        one, many = (
            counts_of(rows.filter(pl.col("running_reqs") == 1)),
            counts_of(rows.filter(pl.col("running_reqs") >= 2)),
        )
        if one["drafts"] < need or many["drafts"] < need or one["rate"] is None:
            continue
        if many["rate"] is None or many["rate"] >= cfg["max_ratio"] * one["rate"]:
            continue
        level = below(ev, many, one)
        if level is None or reported & set(group):
            continue
        reported |= set(group)
        run_id = group[0] if len(group) == 1 else ",".join(group)
        of = "" if engine is None else f" on engine {engine} of this data-parallel run"
        out.append(
            finding_for(
                ev,
                "concurrency_collapse",
                Severity.CRITICAL,
                run_id,
                rows,
                explanation=f"Acceptance{of} is {one['rate']:.1%} with one request running and "
                f"{many['rate']:.1%} with two or more"
                f"{'' if len(group) == 1 else ' (runs of one setup at different loads)'}: "
                "drafts stop matching as soon as requests share a batch. That points at batched "
                "drafting (per-request state, attention metadata, padding) rather than the model.",
                next_step="reproduce with --max-num-seqs 1 against 2, try another attention "
                "backend, and report it upstream with this evidence",
                measured={
                    "rate_one_running": one["rate"],
                    "rate_two_or_more": many["rate"],
                    **({"engine": engine} if engine is not None else {}),
                },
                expected={"rate_two_or_more above": cfg["max_ratio"] * one["rate"]},
                sample={"drafts_one": one["drafts"], "drafts_two_or_more": many["drafts"]},
                confidence=confidence(
                    ev,
                    level,
                    below_test(many, one, ("with two or more running", "with one")),
                    {"drafts": one["drafts"] + many["drafts"]},
                ),
            )
        )
    return out


# An author's word that speculation slows down as soon as requests share a batch
# (parsers/stated_claims.toml: a claim under a condition of concurrency above one) rests on
# no counts: suggestive at most, as every stated claim is.
STATED = "the author's words, not counts: the slowdown with more than one request as stated"


def _stated(ev: Evidence) -> list[Finding]:
    if "extra" not in ev.bench.columns or ev.bench.is_empty():
        return []
    said = ev.bench.filter(pl.col("extra").str.contains('"concurrency": true', literal=True))
    out = []
    for row in said.to_dicts():
        extra = json.loads(row["extra"])
        if extra.get("claim") not in ("slower", "collapse"):
            continue
        line = row["line"] or 0
        what = (
            "speculation slows down"
            if extra["claim"] == "slower"
            else "speed or acceptance with speculation falls"
        )
        out.append(
            Finding(
                kind="concurrency_collapse",
                severity=Severity.WARNING,
                run_id=row["run_id"],
                source=row["source"],
                lines=(line, line),
                window=(None, None),
                explanation=f"The author says {what} once more than one "
                f"request runs (line {line}: \u201c{extra.get('stated', '')}\u201d): what pays "
                "at one request loses as soon as requests share a batch. No counts in the "
                "paste say whether acceptance or the cost of verifying falls.",
                next_step="measure acceptance and throughput at concurrency 1 and 2 (vllm "
                "bench serve --max-concurrency 1 / 2, with and without speculation) and paste "
                "the spec-decode lines of both",
                measured={"stated": extra["claim"], "condition": extra.get("condition")},
                expected={"speedup above": ev.config["no_speedup"]["max_ratio"]},
                sample={"stated claim": 1},
                confidence=Confidence(
                    "suggestive",
                    "the author's word, without numbers",
                    {"stated claim": 1},
                    [STATED],
                ),
            )
        )
    return out


def kv_saturation(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["kv_cache_saturation"]
    for run_id in ev.runs:
        rows = ev.stats_of(run_id).filter(pl.col("kv_cache_usage").is_not_null())
        full = rows.filter(
            (pl.col("kv_cache_usage") >= cfg["min_usage"])
            & (pl.col("waiting_reqs").fill_null(0) > 0)
        )
        if full.is_empty():
            continue
        share = full.height / rows.height
        # The share of intervals saturated, bounded like a proportion of the intervals.
        test = BoundTest(
            "lower bound of the share",
            partial(_share_lower, full.height, rows.height),
            cfg["min_share"],
            above=True,
        )
        level = strength(ev, test.holds)
        if level is not None:
            out.append(
                finding_for(
                    ev,
                    "kv_cache_saturation",
                    Severity.INFO,
                    run_id,
                    full,
                    explanation=f"In {share:.0%} of the intervals the KV cache is at least "
                    f"{cfg['min_usage']:.0%} full with requests waiting: the server is out of "
                    "memory for more sequences, so slowness here is not speculation's.",
                    next_step="lower --max-num-seqs or the context length, add memory "
                    "(--gpu-memory-utilization, more GPUs), or shorten k (drafts take KV space)",
                    measured={"share_saturated": share, "max_waiting": full["waiting_reqs"].max()},
                    expected={"share below": cfg["min_share"]},
                    sample={"intervals": rows.height},
                    confidence=confidence(
                        ev,
                        level,
                        test.said,
                        {"intervals": rows.height},
                    ),
                )
            )
    return out


def _share_lower(saturated: int, intervals: int, z: float) -> float:
    return wilson(saturated, intervals, z)[0]


# What a benchmark's summary says of queueing rests on its means alone.
QUEUED = "a benchmark's summary: mean TTFT against mean TPOT times the tokens of a request"


def queued(ev: Evidence) -> list[Finding]:
    """A benchmark whose requests waited longer for their first token than they then took
    to generate the rest: a client keeps at most ``max_concurrency`` requests in flight, so
    the wait is the server's. It held fewer than that (out of KV cache or batch slots): a
    healthy server at capacity, slow by queueing, not by speculation. Over at least
    ``queued_waves`` times the concurrency, so that later requests entered as earlier
    ones left and the mean is no first wave's warm-up."""
    cfg = ev.config["kv_cache_saturation"]
    cols = (
        "mean_ttft_ms",
        "mean_tpot_ms",
        "total_generated_tokens",
        "successful_requests",
        "max_concurrency",
    )
    if ev.bench.is_empty() or not set(cols) <= set(ev.bench.columns):
        return []
    rows = ev.bench.filter(pl.all_horizontal(pl.col(c).is_not_null() for c in cols))
    out = []
    for row in rows.to_dicts():
        n, conc = int(row["successful_requests"]), float(row["max_concurrency"])
        if conc < 1 or n < cfg["queued_waves"] * conc:
            continue
        tokens = row["total_generated_tokens"] / n
        decode = row["mean_tpot_ms"] * max(tokens - 1, 0.0)
        ttft = row["mean_ttft_ms"]
        if decode <= 0 or ttft < cfg["queued_ratio"] * decode:
            continue
        line = row["line"] or 0
        out.append(
            Finding(
                kind="kv_cache_saturation",
                severity=Severity.INFO,
                run_id=row["run_id"],
                source=row["source"],
                lines=(line, row.get("end_line") or line),
                window=(None, None),
                explanation=f"Requests waited {ttft / 1000:,.1f} s on average for their "
                f"first token, longer than the {decode / 1000:,.1f} s they then took to "
                f"generate their {tokens:,.0f} tokens ({row['mean_tpot_ms']:.1f} ms a "
                f"token), over {n} requests at most {conc:.0f} at a time: the server held "
                "fewer requests than the benchmark kept in flight, and the rest queued for "
                "KV cache space or batch slots. The slowness here is queueing, not "
                "speculation.",
                next_step="lower --max-concurrency to what the server holds, or give it "
                "more KV cache (--gpu-memory-utilization, more GPUs, a shorter "
                "--max-model-len); the server's engine lines (Running, Waiting, KV cache "
                "usage) say which limit binds",
                measured={"mean_ttft_ms": ttft, "mean_decode_ms": decode},
                expected={"mean_ttft_ms below": cfg["queued_ratio"] * decode},
                sample={"requests": n, "max_concurrency": conc},
                confidence=Confidence(
                    "suggestive",
                    f"mean TTFT {ttft / decode:.1f}x the mean time to generate a request",
                    {"requests": n},
                    [QUEUED],
                ),
            )
        )
    return out
