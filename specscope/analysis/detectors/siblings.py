"""Verdicts that compare the sides of one paste (``analysis.siblings``): the same setup run
twice with one thing changed, where the careful reader's verdict is the comparison.

- ``k_too_large`` across k: the larger k is too large when it emits fewer tokens per step
  than the smaller one, or no more than the intervals allow while the positions past the
  smaller k accept next to nothing (under the ``k_too_large`` floor), or when its benchmark
  gives less output throughput on the same workload.
- ``position_cliff`` against a sibling (``sibling_cliff``): the curves agree up to a
  position, and there one side's chain breaks while the other's goes on.
- ``low_acceptance`` against a sibling: the tokens accepted per draft (tau - 1) of one
  side under a share of its sibling's, at the positions both draft (``sibling_depths``: the
  same k, or the first positions of each where k differs or may differ): ``known_margin`` where
  the paste names what changes (a table's row labels, a config that differs) and it is not a
  change expected to lower acceptance (temperature, dataset or task, another drafter, the
  context: ``sibling_change``), else the stricter ``unknown_margin``. Acceptance varies that
  much between datasets alone (per subset 2.64-4.57 accepted tokens, English 6.4 against
  Chinese 3.3: a ratio of tau - 1 of about 0.45), so a side unlabelled must fall under that.
  Where what changes is code on the same setup (a version, a build, a fix) and both sides
  have counts, the looser ``regression_margin``: a regression the bounds prove.

With counts on both sides the claims are interval tests on drafts as trials; numbers
printed or stated without counts are taken as they are, and the finding is at most
suggestive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from itertools import combinations
from typing import Any

import polars as pl

from specscope.analysis.detectors.sibling_change import change as change_between
from specscope.analysis.detectors.sibling_change import confounded
from specscope.analysis.detectors.sibling_cliff import cliff_against
from specscope.analysis.detectors.sibling_depths import Reading, readings
from specscope.analysis.evidence import (
    K_ASSUMED,
    Evidence,
    Trials,
    confidence,
    finding_for,
    method_of,
    nothing_accepted,
    strength,
    trials_of,
)
from specscope.analysis.findings import Finding, Severity
from specscope.analysis.siblings import Side
from specscope.stats import one_sided, wilson

_AS_PRINTED = "no draft counts on both sides: the printed values taken as they are"


def siblings(ev: Evidence) -> list[Finding]:
    if not ev.sides:
        return []
    by_source: dict[str, list[Side]] = {}
    for side in ev.sides:
        if side.run_id in ev.per_run or side.split:
            by_source.setdefault(side.source, []).append(side)
    out: list[Finding] = []
    for sides in by_source.values():
        out += _k_sweeps(ev, sides)
        out += _far_below(ev, sides)
    return out


# -- k too large ---------------------------------------------------------------------------


def _k_sweeps(ev: Evidence, sides: list[Side]) -> list[Finding]:
    out = []
    blamed: set[tuple[str, int | None]] = set()
    throughput = _throughputs(ev, sides)
    for a, b in combinations(sides, 2):
        if not (a.k and b.k) or a.k == b.k or not _alike(ev, a, b):
            continue
        if confounded(a, b, ev.runs):
            continue
        small, large = (a, b) if a.k < b.k else (b, a)
        if (large.run_id, large.k) in blamed:
            continue
        if nothing_accepted(ev, small.run_id, _agg(ev, small)):
            continue
        found = _by_acceptance(ev, small, large) or _by_throughput(ev, small, large, throughput)
        if found is not None:
            blamed.add((large.run_id, large.k))
            out.append(found)
    return out


def _by_acceptance(ev: Evidence, small: Side, large: Side) -> Finding | None:
    ts, tl = _trials(ev, small), _trials(ev, large)
    if ts is None or tl is None or small.k is None or large.k is None:
        return None
    counted = not (ts.assumptions or tl.assumptions)
    floor = float(ev.config["k_too_large"]["floor"])
    tails = _tail(ev, large, small.k, counted)

    def tau(t: Trials, z: float) -> tuple[float, float]:
        if not counted:
            return (1 + t.rate * t.k, 1 + t.rate * t.k)
        low, high = t.interval(z)
        return (1 + low * t.k, 1 + high * t.k)

    def fewer(z: float) -> bool:
        return tau(tl, z)[1] < tau(ts, z)[0]

    def wasted(z: float) -> bool:
        if tails is None:
            return False
        more = tau(tl, z)[0] - tau(ts, z)[1]
        # Without counts, a larger k pays where its extra positions add their floor's worth.
        room = 0.0 if counted else floor * (large.k - small.k)  # type: ignore[operator]
        return more <= room and all(upper(z) < floor for upper in tails)

    level = strength(ev, lambda z: fewer(z) or wasted(z))
    if level is None:
        return None
    z = float(ev.config["evidence"]["z_certain" if level == "certain" else "z_claim"])
    tau_s, tau_l = 1 + ts.rate * ts.k, 1 + tl.rate * tl.k
    why = (
        f"fewer tokens a step at k={large.k} ({tau_l:.2f}) than at k={small.k} ({tau_s:.2f})"
        if fewer(z)
        else f"no more tokens a step at k={large.k} ({tau_l:.2f}) than at k={small.k} "
        f"({tau_s:.2f}), its positions past {small.k} under the {floor:.0%} floor"
    )
    bound = "" if not counted else f"{one_sided(z)} bounds: "
    return _k_finding(
        ev,
        small,
        large,
        level,
        test=f"{bound}{why}",
        explanation=f"The same setup at k={large.k} ({large.where}) and at k={small.k} "
        f"({small.where}): mean acceptance length {tau_l:.2f} against {tau_s:.2f}"
        + (
            f", positions {small.k + 1}-{large.k} accepting "
            f"{', '.join(f'{x:.1%}' for x in _tail_points(ev, large, small.k))}"
            if _tail_points(ev, large, small.k)
            else ""
        )
        + f". Drafting past {small.k} buys nothing here and costs verification.",
        measured={"k": large.k, "tau_k": tau_l, "sibling_k": small.k, "sibling_tau": tau_s},
        sample=_sample(ev, large, small, tl, ts, counted),
        assumptions=_assumed(counted, tl, ts),
    )


def _by_throughput(
    ev: Evidence, small: Side, large: Side, throughput: Mapping[int, dict[str, Any]]
) -> Finding | None:
    bs, bl = throughput.get(id(small)), throughput.get(id(large))
    if bs is None or bl is None or not _same_workload(bs, bl):
        return None
    ratio = float(ev.config["siblings"]["max_throughput_ratio"])
    fast, slow = float(bs["output_throughput"]), float(bl["output_throughput"])
    if not slow < ratio * fast:
        return None
    return _k_finding(
        ev,
        small,
        large,
        "suggestive",
        test=f"output throughput {slow:.2f} tok/s at k={large.k} < {ratio:.0%} of "
        f"{fast:.2f} tok/s at k={small.k}",
        explanation=f"The same benchmark at k={large.k} ({large.where}) gives {slow:.2f} "
        f"output tok/s against {fast:.2f} at k={small.k} ({small.where}) "
        f"({slow / fast - 1:+.0%}): the tokens drafted past {small.k} cost more than they "
        "bring.",
        measured={
            "k": large.k,
            "output_throughput": slow,
            "sibling_k": small.k,
            "sibling_output_throughput": fast,
        },
        sample={"benchmarks": 2},
        assumptions=["one benchmark at each k: run-to-run variation not measured"],
    )


def _k_finding(
    ev: Evidence,
    small: Side,
    large: Side,
    level: str,
    *,
    test: str,
    explanation: str,
    measured: dict[str, Any],
    sample: dict[str, Any],
    assumptions: list[str],
) -> Finding:
    finding = _finding(
        ev,
        "k_too_large",
        large,
        explanation=explanation,
        next_step=f"use num_speculative_tokens={small.k} (or try the values between); "
        "compare again on the same workload",
        measured=measured,
        expected={"k": small.k},
        sample=sample,
    )
    finding.confidence = confidence(ev, level, test, sample, assumptions)
    return finding


def _tail(
    ev: Evidence, side: Side, after: int, counted: bool
) -> list[Callable[[float], float]] | None:
    """Upper bounds, at a z, of the positions past ``after``: from counts where the side
    has them, else the printed rates as they are."""
    agg = _agg(ev, side)
    counts, drafts = agg.get("accepted_per_pos") or [], agg.get("drafts")
    reached = agg.get("drafted_per_pos") or []
    k = side.k or 0
    if counted and drafts and len(counts) >= k and all(c is not None for c in counts[:k]):
        n = [int(reached[i]) if len(reached) >= k else int(drafts) for i in range(k)]
        return [partial(_upper, int(counts[i]), n[i]) for i in range(after, k)]
    points = _tail_points(ev, side, after)
    return [partial(_as_printed, x) for x in points] if points else None


def _upper(accepted: int, drafts: int, z: float) -> float:
    return wilson(accepted, drafts, z)[1]


def _as_printed(value: float, z: float) -> float:
    return value


def _tail_points(ev: Evidence, side: Side, after: int) -> list[float]:
    curve = _agg(ev, side).get("per_position") or side.printed or []
    return [float(x) for x in curve[after:] if x is not None] if len(curve) > after else []


def _throughputs(ev: Evidence, sides: list[Side]) -> dict[int, dict[str, Any]]:
    """Each side's benchmark: a result block in its run, or one that follows its lines in
    a run of no records of its own (a log's launch, then the benchmark run against it)."""
    bench = ev.bench
    if bench.is_empty() or "output_throughput" not in bench.columns:
        return {}
    rows = [r for r in bench.to_dicts() if r.get("output_throughput")]
    runs = {s.run_id for s in sides}
    out: dict[int, dict[str, Any]] = {}
    ordered = sorted(sides, key=lambda s: s.lines[1] or 0)
    for row in rows:
        own = [s for s in sides if s.run_id == row["run_id"]]
        if own:
            if len(own) == 1:
                out.setdefault(id(own[0]), row)
            continue
        if row["run_id"] in runs or ev.runs.get(row["run_id"], {}).get("source") != sides[0].source:
            continue
        before = [s for s in ordered if (s.lines[1] or 0) < (row.get("line") or 0)]
        if before and id(before[-1]) not in out:
            out[id(before[-1])] = row
    return out


def _same_workload(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    for key in ("successful_requests", "total_input_tokens", "max_concurrency", "request_rate"):
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            continue
        x, y = float(x), float(y)
        if math.isinf(x) and math.isinf(y):
            continue
        if abs(x - y) > 0.1 * max(abs(x), abs(y)):
            return False
    return True


# -- a sibling far below -----------------------------------------------------------------


def _far_below(ev: Evidence, sides: list[Side]) -> list[Finding]:
    cfg = ev.config["siblings"]
    # A side that accepts nothing is zero_acceptance's: the drafter dead on one path
    # explains the sides low beside it (a flag tried on the same broken path).
    if any(nothing_accepted(ev, s.run_id, _agg(ev, s)) for s in sides):
        return []
    gains = {id(s): g for s in sides if (g := _gain(ev, s)) is not None}
    out = []
    for low in sides:
        if id(low) not in gains:
            continue
        peers = [
            s
            for s in sides
            if s is not low
            and id(s) in gains
            and _alike(ev, low, s)
            # Points along one stated dimension (context lengths) are followed along it
            # (detectors/along.py), not set against each other as setups.
            and not (low.along is not None and s.along == low.along)
        ]
        best: tuple[Finding, float] | None = None
        for high in peers:
            change = change_between(low, high, ev.runs)
            # Like with like: at the positions both draft (``sibling_depths``).
            reads = _readings(ev, low, high)
            if change == "expected" or not reads or not reads[0].points[1] > reads[0].points[0]:
                continue
            # A side whose chain breaks where its sibling's goes on: the break is what its
            # lower acceptance is (sibling_cliff), one finding for the pair.
            found = cliff_against(ev, low, high, _agg(ev, low), _agg(ev, high))
            if found is not None:
                best = (found, math.inf)
                break
            found = _below(ev, low, high, _margin(cfg, change, low, high, ev), change, reads)
            if found is not None and (best is None or gains[id(high)] > best[1]):
                best = (found, gains[id(high)])
        if best is not None:
            out.append(best[0])
    return out


def _margin(cfg: Mapping[str, Any], change: str, low: Side, high: Side, ev: Evidence) -> float:
    """The share of its sibling's tau - 1 under which a side is low. A change of code on the
    same setup (``regression``) should keep acceptance where it was: with counts on both
    sides, a drop of tau - 1 past ``regression_margin`` that the bounds prove is the
    regression a reader calls low (world 137: 1.73 against 2.22 tokens a draft on tens of
    thousands of drafts); printed values alone cannot tell that from rounding and run-to-run
    spread, and are held to ``known_margin`` as any named change."""
    if change == "unknown":
        return float(cfg["unknown_margin"])
    margin = float(cfg["known_margin"])
    if change == "regression":
        tl, th = _trials(ev, low), _trials(ev, high)
        if tl is not None and th is not None and not (tl.assumptions or th.assumptions):
            return max(margin, float(cfg["regression_margin"]))
    return margin


def _readings(ev: Evidence, low: Side, high: Side) -> list[Reading]:
    tl, th = _trials(ev, low), _trials(ev, high)
    if tl is None or th is None:
        return []
    return readings(ev, low, high, (_agg(ev, low), _agg(ev, high)), (tl, th))


def _below(
    ev: Evidence, low: Side, high: Side, margin: float, change: str, reads: list[Reading]
) -> Finding | None:
    tl, th = _trials(ev, low), _trials(ev, high)
    if tl is None or th is None or not reads:
        return None
    counted = not (tl.assumptions or th.assumptions)
    level = strength(ev, lambda z: all(r.holds(z, margin) for r in reads))
    if level is None:
        return None
    z = float(ev.config["evidence"]["z_certain" if level == "certain" else "z_claim"])
    told = reads[0]
    (gl, gh), (bl, bh) = told.points, told.bounds(z)
    what = "bounds" if counted else "values"
    test = (
        f"{one_sided(z) + ' upper ' if counted else ''}{bl:.2f} accepted tokens "
        f"a draft{told.said} {low.name} < {margin:.0%} of {'lower ' if counted else ''}"
        f"{bh:.2f} {high.name}"
    )
    why = {
        "named": "the paste names what changes between them",
        "regression": "the paste names a change of version, build or fix between them, which "
        "should leave acceptance where it was"
        + ("; the drop is past sampling noise at the bounds" if counted else ""),
    }.get(
        change,
        "what changes between them is not said, so only a drop past what a change of "
        "dataset alone gives is called",
    )
    sample = _sample(ev, low, high, tl, th, counted)
    finding = _finding(
        ev,
        "low_acceptance",
        low,
        explanation=f"Against its sibling {high.name} in the same paste, {low.name} accepts "
        + (
            f"{gl:.2f} tokens a draft{told.said} against {gh:.2f}"
            if told.positions is not None
            else f"{gl:.2f} tokens a draft (mean acceptance length {1 + gl:.2f}) against "
            f"{gh:.2f} ({1 + gh:.2f})"
            if _agg(ev, low).get("mean_acceptance_length") is not None
            and _agg(ev, high).get("mean_acceptance_length") is not None
            else f"{tl.rate:.1%} of its draft tokens against {th.rate:.1%}"
        )
        + f": {gl / gh:.0%} of it, under the {margin:.0%} a careful reader allows ({why}; "
        f"{what} compared).",
        next_step=f"find what differs between {low.name} and {high.name} (cache path, "
        "disaggregation, a flag, the version): that change loses the drafter's acceptance",
        measured={"tau_minus_1": gl, "sibling": high.name, "sibling_tau_minus_1": gh}
        | ({"positions": told.positions} if told.positions is not None else {}),
        expected={"tau_minus_1 at least": margin * gh},
        sample=sample,
    )
    finding.confidence = confidence(ev, level, test, sample, _assumed(counted, tl, th))
    return finding


def _sample(
    ev: Evidence, side: Side, sibling: Side, t: Trials, ts: Trials, counted: bool
) -> dict[str, Any]:
    if counted:
        return {"drafts": int(t.drafts), "sibling drafts": int(ts.drafts)}
    records = [int(_agg(ev, s).get("records") or 0) for s in (side, sibling)]
    return {"records": records[0], "sibling records": records[1]}


def _assumed(counted: bool, *trials: Trials) -> list[str]:
    """What a comparison assumes: without counts, the printed values as they are (the
    verify steps a printed mean is taken for no longer matter) and any k assumed."""
    if counted:
        return []
    out = [_AS_PRINTED]
    for t in trials:
        out += [a for a in t.assumptions if a.startswith(K_ASSUMED) and a not in out]
    return out


def _gain(ev: Evidence, side: Side) -> float | None:
    t = _trials(ev, side)
    return None if t is None else t.rate * t.k


def _alike(ev: Evidence, a: Side, b: Side) -> bool:
    """The same measure of the same setup as far as the runs say: read from the same kind
    of line (a request's line and a drafter's since-start statistics are not one measure,
    nor is a mean length of unstated k beside another), and the same model, method and
    drafter where both name them."""
    if a.formats != b.formats:
        return False
    if a.run_id == b.run_id:
        return True
    ra, rb = ev.runs.get(a.run_id, {}), ev.runs.get(b.run_id, {})
    pairs = [(method_of(ra), method_of(rb))]
    pairs += [(ra.get(key), rb.get(key)) for key in ("model", "draft_model")]
    return all(x is None or y is None or x == y for x, y in pairs)


def _agg(ev: Evidence, side: Side) -> Mapping[str, Any]:
    return side.agg if side.split else ev.per_run.get(side.run_id, side.agg)


def _trials(ev: Evidence, side: Side) -> Trials | None:
    return trials_of(ev, side.run_id if not side.split else "", _agg(ev, side))


def _finding(ev: Evidence, kind: str, side: Side, **kw: Any) -> Finding:
    rows = ev.spec_of(side.run_id)
    if side.split and side.lines[0] is not None and not rows.is_empty():
        rows = rows.filter(pl.col("line").is_between(side.lines[0], side.lines[1]))
    return finding_for(ev, kind, Severity.WARNING, side.run_id, rows, **kw)
