"""``advise``: which k to draft, from a run's per-position acceptance curve.

For each k' <= k: tau(k') = 1 + sum of a_i for i <= k' (read off the curve for chain
drafters, an estimate for block drafters) and the expected speedup S(k') = tau(k') /
(1 + c k') for chain drafters, tau(k') / (1 + c) for block drafters (Leviathan et al. 2023,
Thm 3.8's cost model; c is the cost of a draft position relative to a target pass).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specscope.analysis.evidence import Evidence, gather
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
        if not a:
            continue
        run = ev.runs.get(run_id, {})
        method = run.get("spec_method") or ("mtp" if run.get("drafter_loader") == "MTP" else None)
        c, why = cost_ratio(ev.config, method, cost)
        block = DRAFTER_KINDS.get(method or "") == "block"
        curve = k_curve(a, c, block)
        best = max(curve, key=lambda p: p["speedup"])
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
            )
        )
    return out


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
        lines.append(
            f"run {a.run_id}  method {a.method or '?'}  k={a.k}  ({kind}; "
            f"c={a.cost_ratio} {a.cost_source}; {a.drafts:,} drafts)"
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
