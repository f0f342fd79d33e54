"""``advise``: which k to draft, from a run's per-position acceptance curve.

For each k' <= k: tau(k') = 1 + sum of a_i for i <= k' (read off the curve for chain
drafters, an estimate for block drafters) and the expected speedup S(k') = tau(k') /
(1 + c k') for chain drafters, tau(k') / (1 + c) for block drafters (Leviathan et al. 2023,
Thm 3.8's cost model; c is the cost of a draft position relative to a target pass).

c is the drafter's measured cost where the store holds one (``drafter_cost``: llama.cpp's
``dur(b,g,a)`` against the request's eval time, TensorRT-LLM's draft overhead), per draft
position c_step / k for a chain drafter (k as drafted: tokens over drafts); else the
method's default; ``--cost-ratio`` overrides both. The best k' has an interval: tau's
accepted part scaled by the run's acceptance-rate bounds (drafts as trials). When even its
upper bound is at most 1, speculation should be off at the load the run saw (``off``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from specscope.analysis.drafter_cost import MeasuredCost, measured_cost
from specscope.analysis.evidence import Evidence, gather, trials_of
from specscope.stats import coverage
from specscope.store.reading import Store
from specscope.thresholds import Config, load_config
from specscope.vocabulary import DRAFTER_KINDS


@dataclass
class Advice:
    run_id: str
    method: str | None
    k: int
    cost_ratio: float
    cost_source: str
    block: bool
    curve: list[dict[str, float]] = field(default_factory=list)
    best_k: int = 0
    drafts: int = 0
    pays: bool = True  # does any k' beat no speculation (a speedup above 1)?
    speedup_interval: list[float] | None = None  # the best k's speedup, at ``coverage``
    coverage: str = ""  # the interval's two-sided coverage ("95%")
    off: bool = False  # even the interval's upper bound is at most 1: turn speculation off
    measured: dict[str, Any] | None = None  # the drafter's measured cost, where it is
    curve_from: str = "counts"  # counts, printed (the engine's rates) or mean (own k only)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def advise(
    store: Store,
    *,
    run_ids: Iterable[str] | None = None,
    cost: float | None = None,
    config: Config | None = None,
) -> list[Advice]:
    return advice_of(gather(store, run_ids=run_ids, config=config or load_config()), cost)


def advice_of(ev: Evidence, cost: float | None = None) -> list[Advice]:
    """The advice for evidence already gathered (the report gathers once for all parts)."""
    out = []
    for run_id, agg in ev.per_run.items():
        a = [x for x in (agg.get("per_position") or []) if x is not None]
        curve_from = "counts"
        if not a:
            a, curve_from = printed_curve(ev, run_id), "printed"
        found = None if cost is not None else measured_cost(ev.costs, run_id, ev.runs)
        run = ev.runs.get(run_id, {})
        method = run.get("spec_method") or ("mtp" if run.get("drafter_loader") == "MTP" else None)
        block = DRAFTER_KINDS.get(method or "") == "block"
        drafts, tokens = int(agg.get("drafts") or 0), int(agg.get("draft_tokens") or 0)
        # Without a curve, the run's own k is judged where its drafter's cost is measured
        # (or given) and it drafts every step (a lookup drafts only where the text repeats: its tau
        # over its own few drafts is no step's).
        costed = found is not None or cost is not None
        own_k = bool(costed and drafts and tokens and agg.get("accepted_tokens") is not None)
        if not a and not (own_k and DRAFTER_KINDS.get(method or "") != "lookup"):
            continue
        if found is not None:
            c, why = per_position(found, agg, len(a), block), found.said
        else:
            c, why = cost_ratio(ev.config, method, cost)
        if a:
            curve = k_curve(a, c, block)
        else:  # the run's own k only: tau from its counts, no position to cut at
            k_run = tokens / drafts
            tau = 1 + agg["accepted_tokens"] / drafts
            a = [0.0] * max(1, round(k_run))
            cost_k = 1 + (c if block else c * len(a))
            curve = [{"k": len(a), "tau": tau, "speedup": tau / cost_k}]
            curve_from = "mean"
        best = max(curve, key=lambda p: p["speedup"])
        interval = _interval(ev, run_id, agg, best, c, block)
        out.append(
            Advice(
                run_id,
                method,
                len(a),
                c,
                why,
                block,
                curve,
                int(best["k"]),
                int(agg.get("drafts") or 0),
                pays=best["speedup"] > 1.0,
                speedup_interval=interval,
                coverage=coverage(float(ev.config["evidence"]["z"])),
                off=interval is not None and interval[1] <= 1.0,
                measured=dict(found.detail, c_step=found.c_step) if found else None,
                curve_from=curve_from,
            )
        )
    return out


def printed_curve(ev: Evidence, run_id: str) -> list[float]:
    """The rate per position as the engine printed it where no counts give one (llama.cpp
    since #24536: accepted at i over verify steps, the one definition): the run's last
    statistics line (since the server started), else its request lines' weighted by the
    tokens each drafted."""
    if ev.costs and "statistics" in ev.costs:
        rows = ev.costs["statistics"].filter(pl.col("run_id") == run_id).sort("line")
        if rows.height:
            try:
                printed = json.loads(rows["extra"][-1] or "{}").get("per_position_rate")
            except ValueError:
                printed = None
            if isinstance(printed, list) and printed:
                return [float(x) for x in printed]
    if ev.requests is None or ev.requests.is_empty():
        return []
    rows = ev.requests.filter(
        (pl.col("run_id") == run_id)
        & pl.col("per_position_rate").is_not_null()
        & (pl.col("draft_tokens").fill_null(0) > 0)
    )
    if rows.is_empty():
        return []
    width = max(len(r) for r in rows["per_position_rate"].to_list())
    sums, weights = [0.0] * width, [0.0] * width
    for rates, w in zip(
        rows["per_position_rate"].to_list(), rows["draft_tokens"].to_list(), strict=True
    ):
        for i, x in enumerate(rates):
            if x is not None:
                sums[i] += x * w
                weights[i] += w
    return [s / w for s, w in zip(sums, weights, strict=True) if w]


def per_position(found: MeasuredCost, agg: dict[str, Any], positions: int, block: bool) -> float:
    """c per draft position from the drafter's cost per verify step: a chain drafter runs
    once per position it drafts (k as drafted where the run counts drafts), a block drafter
    once per step."""
    if block:
        return round(found.c_step, 4)
    drafts, tokens = agg.get("drafts"), agg.get("draft_tokens")
    k = tokens / drafts if drafts and tokens else positions
    return round(found.c_step / max(k, 1.0), 4)


def _interval(
    ev: Evidence, run_id: str, agg: dict[str, Any], best: dict[str, float], c: float, block: bool
) -> list[float] | None:
    """The best k's speedup with tau's accepted part at the run's acceptance-rate bounds."""
    trials = trials_of(ev, run_id, agg)
    if trials is None or not trials.drafts:
        return None
    low, high = trials.interval(float(ev.config["evidence"]["z"]))
    k = best["k"]
    gained = best["tau"] - 1
    rate = trials.rate
    tau_low = 1 + (gained * low / rate if rate else 0.0)
    tau_high = min(1 + k, 1 + (gained * high / rate if rate else high * k))
    cost = 1 + (c if block else c * k)
    return [tau_low / cost, tau_high / cost]


def advice_text(items: list[Advice]) -> str:
    if not items:
        return "no run with a per-position acceptance curve"
    lines = []
    for a in items:
        if a.block:
            kind = "block drafter: tau at a smaller k is an estimate"
        elif DRAFTER_KINDS.get(a.method or "") == "chain":
            kind = "chain drafter: tau read off the curve"
        else:
            kind = "method unknown, costed as a chain drafter"
        if a.curve_from == "printed":
            kind += "; the rates per position as the engine printed them"
        elif a.curve_from == "mean":
            kind = "the run's own k only: no per-position counts, tau from its counts" + (
                "; block drafter" if a.block else ""
            )
        lines.append(
            f"run {a.run_id}  method {a.method or '?'}  k={a.k}  ({kind}; "
            f"c={a.cost_ratio} {a.cost_source}; {a.drafts:,} drafts)"
        )
        best = next(p for p in a.curve if p["k"] == a.best_k)
        if a.speedup_interval:
            lo, hi = a.speedup_interval
            lines.append(
                f"    best k'={a.best_k}: expected speedup {best['speedup']:.3f} "
                f"({a.coverage} {lo:.3f}-{hi:.3f})"
            )
        lines.append("    k'    tau    speedup")
        lines.append(f"  {0:4d}  {1.0:5.2f}  {1.0:7.3f}  (no speculation)")
        for p in a.curve:
            mark = ("  <- best" if a.pays else "  <- least loss") if p["k"] == a.best_k else ""
            lines.append(f"  {int(p['k']):4d}  {p['tau']:5.2f}  {p['speedup']:7.3f}{mark}")
        if not a.pays:
            lines.append(
                f"  speculation does not pay here: at c={a.cost_ratio} no k' is faster than "
                "none. Turn it off for this workload, or find a drafter that is accepted "
                "more or costs less (--cost-ratio if c is not what the drafter costs)."
            )
        if a.off:
            lo, hi = a.speedup_interval or (0.0, 0.0)
            lines.append(
                f"  speculation should be off at the load this run saw: even the best k' "
                f"({a.best_k}) is expected at {best['speedup']:.3f}x ({a.coverage} "
                f"{lo:.3f}-{hi:.3f}), at most 1 with c={a.cost_ratio} ({a.cost_source})."
            )
    return "\n".join(lines)


__all__ = ["Advice", "advice_text", "advise"]


def cost_ratio(
    config: Config, method: str | None, override: float | None = None
) -> tuple[float, str]:
    if override is not None:
        return override, "--cost-ratio"
    table = config["cost_ratio"]
    if method in table:
        return float(table[method]), f"default for {method}"
    return float(table["default"]), "default (method unknown)"


def k_curve(a: list[float], c: float, block: bool) -> list[dict[str, float]]:
    """tau(k') and the expected speedup S(k') for k' = 1..k (Leviathan et al. 2023):
    chain drafters pay per position, S = tau/(1 + c k'); block drafters pay one pass,
    S = tau/(1 + c)."""
    out = []
    tau = 1.0
    for kk, ai in enumerate(a, start=1):
        tau += ai
        out.append({"k": kk, "tau": tau, "speedup": tau / (1 + (c if block else c * kk))})
    return out
