"""A report over many runs: runs grouped by setup, the worst and the outliers named, the
rest counted.

A fleet's store holds thousands of runs; a table row, a chart line and a finding each per
run make a report nobody reads (and one that takes a minute to draw). Runs of one setup
(server, model, method, k, quantization, hardware, tensor parallelism) should accept
alike; what a reader needs is each setup's summed acceptance, the runs far below their
own setup's (outliers: the run's upper bound under the lower bound of the rest of its
setup), the worst findings of each kind in full and how many more there are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import polars as pl

from specscope.analysis.findings import Finding, Severity
from specscope.stats import rate_interval

SETUP = (
    ("server", "server"),
    ("model", "model"),
    ("method", "spec_method"),
    ("k", "k"),
    ("quantization", "quantization"),
    ("hardware", "hardware"),
    ("TP", "tensor_parallel_size"),
)
LIST_RUNS_UP_TO = 20  # more runs than this: grouped, unless every run is asked for
FINDINGS_PER_KIND = 3  # the worst of each kind in full, the rest counted
MAX_FINDINGS = 30
MAX_OUTLIERS = 10
CHART_SETUPS = 8  # lines or colours in a chart: the setups with most drafts, the rest as one
OTHERS = "other setups"
OVER_TIME_POINTS = 1000  # eight lines of 125 points: a month in six-hour steps
MAX_SETUP_BARS = 30  # setups in the chart across setups
LARGEST_SETUPS = 15  # setups listed: those with most drafts, and the lowest acceptance
LOWEST_SETUPS = 10


def setup_label(run: Mapping[str, Any]) -> str:
    """A setup as a reader names it: ``vllm Llama-3.1-70B eagle3 k=4 fp8 H100 TP4``."""
    bits = []
    for head, key in SETUP:
        value = run.get(key)
        if value is None:
            continue
        if key == "model":
            value = str(value).rsplit("/", 1)[-1]
        bits.append(f"{head}={value}" if key in ("k", "tensor_parallel_size") else str(value))
    return " ".join(bits) or "setup not stated"


def setups_of(
    runs: Mapping[str, Mapping[str, Any]],
    per_run: Mapping[str, Mapping[str, Any]],
    found: list[Finding],
    *,
    z: float,
) -> tuple[dict[str, str], list[dict[str, Any]], list[dict[str, Any]]]:
    """Each run's setup; per setup its runs, summed counts and acceptance (95% interval
    with drafts as trials), the findings by severity and its worst run; and the outliers
    (worst first): runs with counts whose upper bound is under the lower bound of the rest
    of their setup."""
    label = {r: setup_label(run) for r, run in runs.items() if r in per_run}
    sums: dict[str, dict[str, Any]] = {}
    for run_id, setup in label.items():
        agg = per_run[run_id]
        s = sums.setdefault(
            setup,
            {"setup": setup, "runs": 0, "drafts": 0, "draft_tokens": 0, "accepted_tokens": 0},
        )
        s["runs"] += 1
        for c in ("drafts", "draft_tokens", "accepted_tokens"):
            s[c] += int(agg.get(c) or 0)
    severity: dict[str, dict[str, int]] = {}
    for f in found:
        for run_id in (f.run_id or "").split(","):
            if run_id in label:
                counts = severity.setdefault(label[run_id], {})
                counts[str(f.severity)] = counts.get(str(f.severity), 0) + 1
    outliers: list[dict[str, Any]] = []
    worst: dict[str, tuple[float, str]] = {}
    for run_id, setup in label.items():
        agg, s = per_run[run_id], sums[setup]
        mine = _counts(agg)
        if mine is None:
            continue
        rate = mine[0] / (mine[1] * mine[2])
        if setup not in worst or rate < worst[setup][0]:
            worst[setup] = (rate, run_id)
        rest = _counts(
            {c: s[c] - int(agg.get(c) or 0) for c in ("drafts", "draft_tokens", "accepted_tokens")}
        )
        if rest is None:
            continue
        high = rate_interval(*mine, z)[1]
        low, _ = rate_interval(*rest, z)
        if high < low:
            outliers.append(
                {
                    "run_id": run_id,
                    "setup": setup,
                    "acceptance_rate": rate,
                    "interval": list(rate_interval(*mine, z)),
                    "setup_rest_rate": rest[0] / (rest[1] * rest[2]),
                    "drafts": int(agg.get("drafts") or 0),
                }
            )
    outliers.sort(key=lambda o: (o["acceptance_rate"] - o["setup_rest_rate"], o["run_id"]))
    outlying: dict[str, int] = {}
    for o in outliers:
        outlying[o["setup"]] = outlying.get(o["setup"], 0) + 1
    table = []
    for s in sorted(sums.values(), key=lambda s: (-s["drafts"], s["setup"])):
        summed = _counts(s)
        summed_rate = summed[0] / (summed[1] * summed[2]) if summed else None
        low_high = list(rate_interval(*summed, z)) if summed else None
        worst_rate, worst_run = worst.get(s["setup"], (None, None))
        table.append(
            {
                **s,
                "acceptance_rate": summed_rate,
                "interval": low_high,
                "mean_acceptance_length": 1 + s["accepted_tokens"] / s["drafts"]
                if s["drafts"]
                else None,
                "findings": severity.get(s["setup"], {}),
                "outliers": outlying.get(s["setup"], 0),
                "worst_run": worst_run,
                "worst_rate": worst_rate,
            }
        )
    return label, table, outliers


def shown_setups(table: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The setups a report lists (the ``LARGEST_SETUPS`` with most drafts, then the
    ``LOWEST_SETUPS`` that accept least), in the table's order, and what the rest hold."""
    largest = {s["setup"] for s in table[:LARGEST_SETUPS]}
    rated = [s for s in table if s["acceptance_rate"] is not None and s["setup"] not in largest]
    lowest = {s["setup"] for s in sorted(rated, key=lambda s: s["acceptance_rate"])[:LOWEST_SETUPS]}
    shown = [s for s in table if s["setup"] in largest | lowest]
    rest = [s for s in table if s["setup"] not in largest | lowest]
    left = {
        "setups": len(rest),
        "runs": sum(s["runs"] for s in rest),
        "drafts": sum(s["drafts"] for s in rest),
        "outliers": sum(s["outliers"] for s in rest),
    }
    return shown, left


PAIRS_KEPT = 5  # of each end: the matched pairs with the lowest and the highest difference


def _counts(agg: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """(accepted, drafts, k) for ``rate_interval``, or None without counted drafts."""
    drafts, tokens = int(agg.get("drafts") or 0), int(agg.get("draft_tokens") or 0)
    if drafts <= 0 or tokens <= 0:
        return None
    return (float(agg.get("accepted_tokens") or 0), float(drafts), tokens / drafts)


def worst_findings(found: list[Finding]) -> tuple[list[Finding], list[dict[str, Any]]]:
    """The findings shown in full (worst first: the first ``FINDINGS_PER_KIND`` of each
    kind, at most ``MAX_FINDINGS``) and the rest counted by kind and severity."""
    shown: list[Finding] = []
    per_kind: dict[str, int] = {}
    for f in found:
        if len(shown) < MAX_FINDINGS and per_kind.get(f.kind, 0) < FINDINGS_PER_KIND:
            shown.append(f)
            per_kind[f.kind] = per_kind.get(f.kind, 0) + 1
    kept = {id(f) for f in shown}
    rest: dict[tuple[int, str], dict[str, Any]] = {}
    for f in found:
        if id(f) in kept:
            continue
        entry = rest.setdefault(
            (-f.severity, f.kind),
            {"kind": f.kind, "severity": str(f.severity), "findings": 0, "runs": set()},
        )
        entry["findings"] += 1
        entry["runs"].update((f.run_id or "").split(","))
    left = [
        {**e, "runs": len(e["runs"] - {""})}
        for _, e in sorted(rest.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    ]
    return shown, left


def chart_names(label: Mapping[str, str], table: list[dict[str, Any]]) -> dict[str, str]:
    """Each run's name in a chart: its setup, for the ``CHART_SETUPS`` setups with most
    drafts, else ``OTHERS``."""
    drawn = {s["setup"] for s in table[:CHART_SETUPS]}
    return {r: (s if s in drawn else OTHERS) for r, s in label.items()}


def named_rows(spec: pl.DataFrame, names: Mapping[str, str]) -> pl.DataFrame:
    """The spec rows a chart reads, each run under its chart name (``chart_names``), the
    rows of a name together (the charts count names as runs of equal values)."""
    return spec.with_columns(
        pl.col("run_id").cast(pl.String).replace_strict(names, default=OTHERS).alias("run_id")
    ).sort("run_id", maintain_order=True)


def over_time_rows(named: pl.DataFrame, *, points: int) -> pl.DataFrame:
    """``named_rows`` summed, per chart name, into at most about ``points`` time buckets
    (counts summed, running requests averaged): one line per setup, not one per run."""
    timed = named.filter(pl.col("ts").is_not_null())
    if timed.is_empty():
        return timed
    lines = max(1, timed["run_id"].n_unique())
    bucket = over_time_bucket(timed["ts"].min(), timed["ts"].max(), lines, points=points)
    return (
        timed.with_columns(pl.col("ts").dt.truncate(bucket))
        .group_by("run_id", "ts")
        .agg(
            pl.col("drafts", "draft_tokens", "accepted_tokens").sum(),
            pl.col("running_reqs").mean(),
        )
        .sort("run_id", "ts")
    )


def over_time_bucket(first: Any, last: Any, lines: int, *, points: int) -> str:
    """The time bucket (``dt.truncate``'s) that gives ``lines`` lines from ``first`` to
    ``last`` about ``points`` points in all."""
    span = last - first if isinstance(first, datetime) and isinstance(last, datetime) else None
    seconds = span.total_seconds() if span is not None else 0.0
    return f"{max(1, int(seconds * max(1, lines) / max(1, points)) + 1)}s"


def severity_said(counts: Mapping[str, int]) -> str:
    order = [str(s) for s in sorted(Severity, reverse=True)]
    return ", ".join(f"{counts[s]} {s}" for s in order if counts.get(s)) or "none"


def runs_named(shown: Iterable[Finding], outliers: list[dict[str, Any]]) -> list[str]:
    """The runs a grouped report lists: those of the findings shown, then the outliers."""
    out: dict[str, None] = {}
    for f in shown:
        for r in (f.run_id or "").split(","):
            if r:
                out[r] = None
    for o in outliers[:MAX_OUTLIERS]:
        out[o["run_id"]] = None
    return list(out)


__all__ = [
    "LIST_RUNS_UP_TO",
    "OTHERS",
    "SETUP",
    "chart_names",
    "named_rows",
    "over_time_rows",
    "runs_named",
    "setup_label",
    "setups_of",
    "severity_said",
    "worst_findings",
]
