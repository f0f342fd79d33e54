"""Where along the draft acceptance breaks: a cliff at one position, or a tail too weak to
pay for drafting it."""

from __future__ import annotations

import math
from statistics import median

from specscope.analysis.advise import cost_ratio, k_curve
from specscope.analysis.evidence import (
    Evidence,
    drafts_of,
    enough_drafts,
    finding_for,
    method_of,
)
from specscope.analysis.findings import Finding, Severity
from specscope.vocabulary import DRAFTER_KINDS


def cliff(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["position_cliff"]
    for run_id, agg in ev.per_run.items():
        a = [x for x in (agg.get("per_position") or []) if x is not None]
        if len(a) < 2 or not enough_drafts(ev, agg):
            continue
        conditional = [a[0]] + [
            a[i] / a[i - 1] if a[i - 1] > 0 else math.nan for i in range(1, len(a))
        ]
        for i in range(1, len(a)):
            if a[i - 1] < cfg["min_previous"] or math.isnan(conditional[i]):
                continue
            others = [c for j, c in enumerate(conditional) if j != i and not math.isnan(c)]
            typical = median(others) if others else 1.0
            if conditional[i] < cfg["max_conditional_ratio"] * typical:
                rows = ev.spec_of(run_id)
                out.append(
                    finding_for(
                        ev,
                        "position_cliff",
                        Severity.WARNING,
                        run_id,
                        rows,
                        explanation=f"Position {i} is accepted {a[i]:.0%} of the time while "
                        f"position {i - 1} is at {a[i - 1]:.0%}: given position {i - 1} was "
                        "accepted, "
                        f"position {i} is only {conditional[i]:.0%} likely, against "
                        f"{typical:.0%} typically. Positions from {i} on are broken, not weaker.",
                        next_step="check the drafter's multi-step support (MTP heads forwarded "
                        "several times, a k above what the head was trained for), or use k="
                        f"{i}",
                        measured={
                            "position": i,
                            "a_previous": a[i - 1],
                            "a_position": a[i],
                            "conditional": conditional[i],
                        },
                        expected={"conditional about": typical},
                        sample={"drafts": drafts_of(agg)},
                    )
                )
                break
    return out


def k_too_large(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["k_too_large"]
    for run_id, agg in ev.per_run.items():
        a = [x for x in (agg.get("per_position") or []) if x is not None]
        k = len(a)
        if k < 2 or not enough_drafts(ev, agg) or (agg.get("acceptance_rate") or 0) <= 0.01:
            continue
        run = ev.runs.get(run_id, {})
        method = method_of(run)
        block = DRAFTER_KINDS.get(method or "") == "block"
        c, _ = cost_ratio(ev.config, method)
        curve = k_curve(a, c, block)
        # The marginal rule needs the drafter's cost: only for a known chain drafter. Block
        # drafters pay one pass for any k, and an unknown method gets the floor alone.
        chain = DRAFTER_KINDS.get(method or "") == "chain"
        best = max(curve, key=lambda p: p["speedup"])["k"] if chain else k
        floor_k = k
        while floor_k > 1 and a[floor_k - 1] < cfg["floor"]:
            floor_k -= 1
        suggested = int(min(best, floor_k))
        saving = (k - suggested) / k
        if saving < cfg["min_saving"]:
            continue
        rows = ev.spec_of(run_id)
        estimate = (
            " For a block drafter (DFlash) the mean length at a smaller k is an "
            "estimate: the block is drafted at once and is not a prefix of itself."
            if block or method is None
            else ""
        )
        out.append(
            finding_for(
                ev,
                "k_too_large",
                Severity.WARNING if saving >= 0.4 else Severity.INFO,
                run_id,
                rows,
                explanation=f"Positions {suggested + 1}-{k} accept "
                f"{', '.join(f'{x:.1%}' for x in a[suggested:][:6])}"
                f"{' ...' if k - suggested > 6 else ''}: too little to pay for drafting and "
                f"verifying them (marginal rule a(k+1) > c*S(k), c={c}, or the {cfg['floor']:.0%} "
                f"floor).{estimate}",
                next_step=f"use num_speculative_tokens={suggested}: mean acceptance length "
                f"{curve[suggested - 1]['tau']:.2f} instead of {curve[-1]['tau']:.2f}, with "
                f"{saving:.0%} less draft work (see `specscope advise --run {run_id}`)",
                measured={"k": k, "tail": a[suggested:], "tau_k": curve[-1]["tau"]},
                expected={
                    "k": suggested,
                    "tau": curve[suggested - 1]["tau"],
                    "draft_work_saved": saving,
                },
                sample={"drafts": drafts_of(agg)},
            )
        )
    return out
