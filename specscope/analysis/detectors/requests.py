"""Acceptance request by request (``analysis.requests``): the distribution over a run's
requests (``request_acceptance``, information), and single requests whose acceptance sits at
about 0 or about 1 over enough drafts (``request_outlier``, a warning: garbled output or a
repetition loop). A run that accepts (almost) nothing as a whole is zero_acceptance's: its
requests near 0 are not news."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from specscope.analysis.evidence import (
    Evidence,
    confidence,
    finding_for,
    nothing_accepted,
)
from specscope.analysis.findings import Finding, Severity
from specscope.analysis.requests import TRAITS, Distribution, Request, distribution, extremes
from specscope.stats import coverage, one_sided

# Where a record prints neither verify steps nor k, its bounds take the largest k plausible
# (the fewest verify steps, the widest bounds): the claim then assumes no k, and says so.
MAX_K = " (verify steps and k not printed: bounded at the largest k plausible)"


def request_distribution(ev: Evidence) -> list[Finding]:
    out: list[Finding] = []
    for run_id, rows in _runs(ev):
        dist = distribution(run_id, rows, ev.config, ev.config["evidence"]["z"])
        if dist is None:
            continue
        if len(dist.requests) >= ev.config["request_acceptance"]["min_requests"]:
            out.append(_spread(ev, dist))
        out.extend(_outliers(ev, dist))
    return out


def _runs(ev: Evidence) -> list[tuple[str, pl.DataFrame]]:
    if ev.requests is None or ev.requests.is_empty():
        return []
    known = ev.requests.filter(pl.col("run_id").is_in(list(ev.runs)))
    return [(str(key[0]), rows) for key, rows in known.group_by("run_id", maintain_order=True)]


def _spread(ev: Evidence, dist: Distribution) -> Finding:
    q = dist.quantiles
    z = ev.config["evidence"]["z"]
    few = (
        f" {dist.few} request{'s' if dist.few != 1 else ''} that drafted fewer than "
        f"{dist.min_draft_tokens} tokens {'are' if dist.few != 1 else 'is'} counted apart."
        if dist.few
        else ""
    )
    low = ", ".join(
        f"line {r.line}: {r.accepted:,} of {r.drafted:,} ({r.rate:.1%})" for r in dist.lowest
    )
    shared = "; ".join(
        f"median {TRAITS[t]} {v['lowest']:,.0f} among them against {v['rest']:,.0f} for the rest"
        for t, v in dist.shared.items()
    )
    interval = dist.median_interval
    test = (
        f"median {q['p50']:.1%}, {coverage(z)} interval {interval[0]:.1%}-{interval[1]:.1%} "
        f"(order statistics of {len(dist.requests)} requests)"
        if interval
        else f"median {q['p50']:.1%} of {len(dist.requests)} requests"
    )
    return finding_for(
        ev,
        "request_acceptance",
        Severity.INFO,
        dist.run_id,
        ev.spec_of(dist.run_id),
        explanation=f"Acceptance request by request over {len(dist.requests)} requests: "
        f"p10 {q['p10']:.1%}, median {q['p50']:.1%}, p90 {q['p90']:.1%} of each request's "
        f"drafted tokens.{few} Least accepted: {low}."
        + (f" What they share: {shared}." if shared else ""),
        next_step="look at the least accepted requests' prompts and outputs: a kind of "
        "request the drafter does not know (another language, code, long context) shows "
        "here before it moves the run's mean",
        measured=dist.to_dict(),
        expected={},
        sample={"requests": len(dist.requests), "few_drafts": dist.few},
        confidence=confidence(
            ev,
            "likely",
            test,
            {
                "requests": len(dist.requests),
                "drafted tokens": sum(r.drafted for r in dist.requests),
            },
        ),
    )


def _outliers(ev: Evidence, dist: Distribution) -> list[Finding]:
    cfg = ev.config["request_acceptance"]
    claim, certain = (float(ev.config["evidence"][k]) for k in ("z_claim", "z_certain"))
    zero, one = extremes(dist, ev.config, claim)
    agg = ev.per_run.get(dist.run_id, {})
    if zero and agg and nothing_accepted(ev, dist.run_id, agg):
        zero = []
    out = []
    for side, found in (("zero", zero), ("one", one)):
        if not found:
            continue
        sure = {id(r) for r in extremes(dist, ev.config, certain)[0 if side == "zero" else 1]}
        level = "certain" if all(id(r) in sure for r in found) else "likely"
        out.append(_outlier(ev, dist, side, found, level, cfg))
    return out


def _outlier(
    ev: Evidence,
    dist: Distribution,
    side: str,
    found: Sequence[Request],
    level: str,
    cfg: Mapping[str, Any],
) -> Finding:
    z = ev.config["evidence"]["z_certain" if level == "certain" else "z_claim"]
    lines = [r.line for r in found if r.line is not None]
    listed = ", ".join(
        f"line {r.line}: {r.accepted:,} of {r.drafted:,} ({r.rate:.1%})" for r in found[:8]
    )
    more = f" and {len(found) - 8} more" if len(found) > 8 else ""
    of = f" of the run's {len(dist.requests)}" if len(dist.requests) > len(found) else ""
    if side == "zero":
        bound = max(r.interval(z)[1] for r in found)
        what = (
            f"{len(found)} request{'s' if len(found) != 1 else ''}{of} accepted almost none "
            f"of {'their' if len(found) != 1 else 'its'} drafts ({listed}{more}). A request "
            "the drafter cannot follow at all is a sign of garbled output (a broken chat "
            "template, a tokenizer the drafter does not share, a kernel producing noise for "
            "some inputs), not of a weak drafter."
        )
        step = (
            "read those requests' outputs; compare their prompts with the others' "
            "(language, format, length); if the output is garbage, the target is at fault"
        )
        test = f"{one_sided(z)} upper bound {bound:.1%} < {cfg['near_zero']:.0%} for each"
    else:
        bound = min(r.interval(z)[0] for r in found)
        what = (
            f"{len(found)} request{'s' if len(found) != 1 else ''}{of} accepted almost every "
            f"drafted token ({listed}{more}). Near-total acceptance on a request is the mark "
            "of a repetition loop (the output repeats itself, and the drafter predicts it) "
            "or of copied text."
        )
        step = (
            "read those requests' outputs for loops (repeated lines, a hit max_tokens); "
            "a loop wants a repetition penalty or another sampling setting, not a drafter change"
        )
        test = f"{one_sided(z)} lower bound {bound:.1%} > {cfg['near_one']:.0%} for each"
    if not all(r.k_known for r in found):
        test += MAX_K
    finding = finding_for(
        ev,
        "request_outlier",
        Severity.WARNING,
        dist.run_id,
        None,
        explanation=what,
        next_step=step,
        measured={
            "side": side,
            "requests": [
                {"line": r.line, "drafted": r.drafted, "accepted": r.accepted, "rate": r.rate}
                for r in found
            ],
        },
        expected={"near_zero" if side == "zero" else "near_one": cfg[f"near_{side}"]},
        sample={"requests": len(found), "drafted tokens": sum(r.drafted for r in found)},
        confidence=confidence(
            ev,
            level,
            test,
            {"requests": len(found), "drafted tokens": sum(r.drafted for r in found)},
        ),
    )
    finding.lines = (min(lines), max(lines)) if lines else (None, None)
    return finding


__all__ = ["request_distribution"]
