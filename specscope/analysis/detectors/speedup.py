"""Is speculation faster at all? Three kinds of evidence, never mixed: benchmark results
with and without speculation at the same concurrency; a comparison the author states in a
sentence or a table (`parsers/stated_speedup*.toml`: a claim, not counts); and a launch
without speculation beside one with it in the same log, their engine stats at the same
load. Where the paste also shows why, the finding says so. An author's sweep of the draft
depth against no drafting also says whether a smaller k is faster (`k_too_large`)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from specscope.analysis.evidence import Evidence, nothing_accepted, scalar
from specscope.analysis.findings import Confidence, Finding, Severity

# A stated comparison rests on the author's word: one measurement each side, its spread
# and its workload unknown. It is at most suggestive, whatever the ratio.
STATED = (
    "the author's own measurement, not counts: both sides taken as the same work at the same load"
)
LAUNCHES = "the two launches served comparable requests (the log shows the load, not the prompts)"


def no_speedup(ev: Evidence) -> list[Finding]:
    told = _stated_rows(ev.bench)
    return [*_benchmarks(ev, told), *_stated(ev, told), *_depths(ev, told), *_launches(ev)]


def _stated_rows(bench: pl.DataFrame) -> pl.Series:
    """Which bench rows an author stated (their `extra` says "stated"): never paired with a
    tool's benchmark output."""
    if "extra" not in bench.columns or bench.is_empty():
        return pl.Series([False] * bench.height, dtype=pl.Boolean)
    return bench["extra"].str.contains('"stated"', literal=True).fill_null(False)


def _benchmarks(ev: Evidence, told: pl.Series) -> list[Finding]:
    out: list[Finding] = []
    limit = ev.config["no_speedup"]["max_ratio"]
    bench = ev.bench.filter(~told).filter(pl.col("output_throughput").is_not_null())
    if bench.is_empty():
        return out
    spec_rows = bench.filter(pl.col("speculative").fill_null(False))
    base_rows = bench.filter(~pl.col("speculative").fill_null(False))
    for s in spec_rows.to_dicts():
        peers = base_rows.filter(
            (pl.col("max_concurrency") == s["max_concurrency"])
            if s["max_concurrency"] is not None
            else pl.col("max_concurrency").is_null()
        )
        if s.get("model"):
            same = peers.filter(pl.col("model") == s["model"])
            peers = same if same.height else peers
        # A script's run without speculation is the baseline of its speculative runs: two
        # tools count throughput over different spans (SGLang's MT-bench script over the
        # wall clock of its questions, a serving benchmark over its requests).
        same = peers.filter(pl.col("format") == s["format"])
        peers = same if same.height else peers
        if peers.is_empty():
            continue
        baseline = scalar(peers["output_throughput"].max(), float)
        ratio = s["output_throughput"] / baseline if baseline else None
        if ratio is None or ratio > limit:
            continue
        out.append(
            Finding(
                kind="no_speedup",
                severity=Severity.WARNING,
                run_id=s["run_id"],
                source=s["source"],
                lines=(s["line"], s["end_line"]),
                window=(None, None),
                explanation="With speculation the benchmark produced "
                f"{s['output_throughput']:,.0f} tok/s against {baseline:,.0f} without, at "
                "concurrency "
                f"{s['max_concurrency'] or 'unlimited'}: {ratio:.2f}x. At high batch the target is "
                "no longer memory-bound, so verifying drafts costs more than it saves."
                + _why(ev, s["run_id"]),
                next_step="keep speculation for low-concurrency traffic, lower k, or set "
                "--speculative-disable-by-batch-size (V0) / serve two pools",
                measured={"speedup": ratio, "output_throughput": s["output_throughput"]},
                expected={"speedup above": limit, "baseline_output_throughput": baseline},
                sample={"baseline_results": peers.height},
                # One result each, no spread: the ratio's size is all there is to go on.
                confidence=Confidence(
                    "certain" if ratio <= 0.8 else "likely" if ratio <= 0.95 else "suggestive",
                    f"one benchmark result against {peers.height}: {ratio:.2f}x",
                    {"benchmark results": 1 + peers.height},
                ),
            )
        )
    return out


def _ratio(measure: str, spec: float, base: float) -> float:
    """How many times faster speculation is: rates divide one way, times (seconds for the
    same work, milliseconds a token) the other."""
    return base / spec if measure in ("duration_s", "mean_tpot_ms") else spec / base


def _stated(ev: Evidence, told: pl.Series) -> list[Finding]:
    out: list[Finding] = []
    limit = ev.config["no_speedup"]["max_ratio"]
    for row in ev.bench.filter(told).to_dicts():
        said = json.loads(row["extra"])
        measure, base = said.get("measure"), said.get("baseline")
        spec = row.get(measure) if measure else None
        if said.get("claim") == "slower":
            out.append(_claimed(ev, row, said))
            continue
        if not spec and said.get("side") == "baseline" and measure:
            spec = _measured_beside(ev, row, measure, told)  # 'I usually get about 11 t/s'
        if not spec or not base:
            continue  # a stated comparison whose values do not compare (its problems say why)
        ratio = _ratio(measure, spec, base)
        line = (row["line"] or 0) + int(said.get("offset") or 0)
        pairs = said.get("rows") or []
        slower = [p for p in pairs if _ratio(measure, p["speculative"], p["baseline"]) <= limit]
        if ratio > limit:
            # A table of configurations is decided by its fastest; one the author measured
            # slower than no speculation is still a configuration where it does not pay (a
            # sweep of depths is k_too_large's, where its best depth pays).
            worse = [p for p in slower if not p.get("k")]
            if not worse:
                continue
            p = min(worse, key=lambda p: _ratio(measure, p["speculative"], p["baseline"]))
            spec, base = p["speculative"], p["baseline"]
            ratio = _ratio(measure, spec, base)
            line = (row["line"] or 0) + int(p.get("offset") or 0)
            said = said | {"stated": f"{p.get('row', '')}: {spec:g} against {base:g}"}
        where = (
            f"; slower in {len(slower)} of the {len(pairs)} rows of the author's table"
            if len(pairs) > 1
            else ""
        )
        unit = f" {said['unit']}" if said.get("unit") else ""
        out.append(
            _stated_finding(
                row,
                line,
                f"The author measured speculation as no faster: {spec:g}{unit} with "
                f"it against {base:g}{unit} without, {ratio:.2f}x{where} (line {line}: "
                f"\u201c{said.get('stated', '')}\u201d)."
                + _why(ev, _spoken_of(ev, row))
                + " This is the author's stated comparison, not telemetry specscope counted.",
                measured={"speedup": ratio, measure: spec},
                expected={"speedup above": limit, f"baseline_{measure}": base},
                sample="stated comparison",
                test=f"the author's stated comparison: {ratio:.2f}x",
            )
        )
    return out


def _measured_beside(
    ev: Evidence, row: dict[str, Any], measure: str, told: pl.Series
) -> float | None:
    """The paste's own speculative measurement beside a rate its author usually gets
    without speculation: a tool's result in the same source (the slowest, if several)."""
    bench = ev.bench.filter(~told)
    if measure not in bench.columns:
        return None
    spec = bench.filter(
        pl.col("speculative").fill_null(False)
        & (pl.col("source") == row["source"])
        & pl.col(measure).is_not_null()
    )
    if spec.is_empty():
        return None
    best = spec[measure].max() if measure in ("duration_s", "mean_tpot_ms") else spec[measure].min()
    return scalar(best, float)


def _stated_finding(
    row: dict[str, Any],
    line: int,
    explanation: str,
    *,
    measured: dict[str, Any],
    expected: dict[str, Any],
    sample: str,
    test: str,
) -> Finding:
    """A no_speedup on what the author states: suggestive at most, whatever it says."""
    return Finding(
        kind="no_speedup",
        severity=Severity.WARNING,
        run_id=row["run_id"],
        source=row["source"],
        lines=(line, line),
        window=(None, None),
        explanation=explanation,
        next_step="measure both sides the same way (vllm bench serve with and without "
        "--speculative-config, same prompts and concurrency) and paste the results; "
        "keep speculation off where it does not pay",
        measured=measured,
        expected=expected,
        sample={sample: 1},
        confidence=Confidence("suggestive", test, {sample: 1}, [STATED]),
    )


def _claimed(ev: Evidence, row: dict[str, Any], said: dict[str, Any]) -> Finding:
    """The author's word that speculation is slower or gains nothing, with no numbers in
    the paste (a ratio at most)."""
    line = (row["line"] or 0) + int(said.get("offset") or 0)
    speedup = said.get("speedup")
    how = (
        f", {speedup:.2f}x its speed by the ratio the author gives, with no measurement of "
        "either side in the paste"
        if speedup
        else ", with no numbers in the paste to measure by how much"
    )
    return _stated_finding(
        row,
        line,
        # (the words may say slower, or only that it gains nothing: 'buys nothing here')
        "The author says speculation does not pay: no faster than decoding without it (line "
        f"{line}: \u201c{said.get('stated', '')}\u201d){how}." + _why(ev, _spoken_of(ev, row)),
        measured={"stated": "slower"} | ({"speedup": speedup} if speedup else {}),
        expected={"speedup above": ev.config["no_speedup"]["max_ratio"]},
        sample="stated claim",
        test="the author's word, without numbers",
    )


# A deeper draft at least this much slower than the best depth of the author's sweep is
# drafting too deep (a difference of a few percent is one run's noise).
DEEPER_SLOWER = 0.9


def _depths(ev: Evidence, told: pl.Series) -> list[Finding]:
    """An author's sweep of the draft depth: the fastest depth, and a deeper one that is
    clearly slower than it, is k too large. Against a row at depth 0 (the speedups of each
    depth), or, where no row ran without drafting, the speeds of one drafter's depths side
    by side (``sweep``: 'DFlash2 | 7' against 'DFlash2 | 5'), each drafter on its own."""
    out: list[Finding] = []
    for row in ev.bench.filter(told).to_dicts():
        said = json.loads(row["extra"])
        measure, alone = said.get("measure"), bool(said.get("sweep"))
        swept = [
            p | {"k": p.get("k") or p.get("named_k")}
            for p in said.get("rows") or []
            if (p.get("k") or p.get("named_k")) and (alone or p.get("baseline"))
        ]
        if not measure:
            continue
        # Each configuration's depths in each condition (a column: 'mainline decode' beside
        # 'fork decode') on their own: two builds' speeds are no sweep of one.
        groups: dict[Any, list[dict[str, Any]]] = {}
        for p in swept:
            groups.setdefault((p.get("group"), p.get("column")), []).append(p)
        for ps in groups.values():
            found = _deeper(ev, row, said, ps, measure, alone)
            if found is not None:
                out.append(found)
                break
    return out


def _deeper(
    ev: Evidence,
    row: dict[str, Any],
    said: dict[str, Any],
    swept: list[dict[str, Any]],
    measure: str,
    alone: bool,
) -> Finding | None:
    """k_too_large in one sweep (``_depths``), or None."""
    if len({p["k"] for p in swept}) < 2:
        return None
    if alone:  # speeds, no baseline: a time a token is the slower the larger
        timed = measure in ("duration_s", "mean_tpot_ms")
        speed = {id(p): (1 / p["speculative"] if timed else p["speculative"]) for p in swept}
    else:
        speed = {id(p): _ratio(measure, p["speculative"], p["baseline"]) for p in swept}
    best = max(swept, key=lambda p: speed[id(p)])
    deeper = [
        p for p in swept if p["k"] > best["k"] and speed[id(p)] <= DEEPER_SLOWER * speed[id(best)]
    ]
    if not deeper:
        return None
    worst = min(deeper, key=lambda p: speed[id(p)])
    line = (row["line"] or 0) + int(worst.get("offset") or 0)
    unit = f" {said['unit']}" if said.get("unit") else ""
    share = speed[id(worst)] / speed[id(best)]
    if alone:
        who = f"{worst['group']}'s" if worst.get("group") else "the author's"
        a_token = " a token" if measure == "mean_tpot_ms" else ""
        measured = (
            f"In {who} depths side by side, k = {best['k']} is the fastest "
            f"({best['speculative']:g}{unit}{a_token}) and k = {worst['k']} runs at "
            f"{worst['speculative']:g}{unit}{a_token} ({share:.0%} of its speed)"
        )
        test = f"k = {best['k']} {best['speculative']:g}{unit}, k = {worst['k']} {share:.0%} of it"
        speedup = share
    else:
        measured = (
            f"In the author's sweep of the draft depth, k = {best['k']} is the "
            f"fastest ({best['speculative']:g}{unit} against {best['baseline']:g} without "
            f"drafting, {speed[id(best)]:.2f}x) and k = {worst['k']} runs at "
            f"{worst['speculative']:g}{unit} ({speed[id(worst)]:.2f}x)"
        )
        test = f"k = {best['k']} {speed[id(best)]:.2f}x, k = {worst['k']} {speed[id(worst)]:.2f}x"
        speedup = speed[id(worst)]
    depths = {"stated depths": len({p["k"] for p in swept})}
    return Finding(
        kind="k_too_large",
        severity=Severity.WARNING,
        run_id=row["run_id"],
        source=row["source"],
        lines=(line, line),
        window=(None, None),
        explanation=f"{measured}: drafting deeper than k = {best['k']} costs more verify work "
        "than its accepted tokens save. This is the author's stated measurement, not "
        "telemetry specscope counted.",
        next_step=f"draft at most k = {best['k']} on this setup (and measure k again "
        "where the workload accepts more: code, structured output)",
        measured={
            "k": worst["k"],
            ("share of the best k's speed" if alone else "speedup"): speedup,
        },
        expected={"k at most": best["k"]}
        | ({} if alone else {"speedup at best k": speed[id(best)]}),
        sample=depths,
        confidence=Confidence("suggestive", f"the author's sweep: {test}", depths, [STATED]),
    )


def _spoken_of(ev: Evidence, row: dict[str, Any]) -> str | None:
    """The speculative run a stated comparison speaks of: its own run when that has spec
    records, else the nearest one in the same paste (a table opens a run of its own, as a
    benchmark block does, and the log lines after it another)."""
    own = row.get("run_id")
    if own in ev.per_run and ev.per_run[own].get("records"):
        return own
    source = ev.runs.get(own or "", {}).get("source_id")
    line = row.get("line") or 0
    near = [
        (abs((run.get("first_line") or 0) - line), run_id)
        for run_id, run in ev.runs.items()
        if run.get("source_id") == source and ev.per_run.get(run_id, {}).get("records")
    ]
    return min(near)[1] if near else own


def _launches(ev: Evidence) -> list[Finding]:
    """A launch without speculation (no spec records, no method) and one with it, in one
    source, compared by their engine stats' generation throughput at the same number of
    requests running with none waiting (a queue would make either side admission-bound)."""
    out: list[Finding] = []
    limit = ev.config["no_speedup"]["max_ratio"]
    if "generation_throughput" not in ev.stats.columns:
        return out
    speculative = {r for r, agg in ev.per_run.items() if agg.get("records")}
    by_source: dict[Any, tuple[list[str], list[str]]] = {}
    for run_id, run in ev.runs.items():
        spec, plain = by_source.setdefault(run.get("source_id"), ([], []))
        if run_id in speculative:
            spec.append(run_id)
        elif not run.get("spec_method") and not run.get("spec_records"):
            plain.append(run_id)
    for spec_runs, plain_runs in by_source.values():
        for s in spec_runs:
            model = ev.runs[s].get("model")
            peers = [
                p
                for p in plain_runs
                if not (model and ev.runs[p].get("model") and ev.runs[p].get("model") != model)
            ]
            found = _launch_pair(ev, s, peers, limit)
            if found is not None:
                out.append(found)
    return out


def _steady(ev: Evidence, run_id: str) -> pl.DataFrame:
    return ev.stats_of(run_id).filter(
        (pl.col("generation_throughput") > 0)
        & (pl.col("running_reqs") >= 1)
        & (pl.col("waiting_reqs").fill_null(0) == 0)
    )


def _launch_pair(ev: Evidence, spec_run: str, peers: list[str], limit: float) -> Finding | None:
    mine = _steady(ev, spec_run)
    if mine.is_empty() or not peers:
        return None
    theirs = pl.concat([_steady(ev, p) for p in peers])
    shared = set(mine["running_reqs"].to_list()) & set(theirs["running_reqs"].to_list())
    if not shared:
        return None
    # The load both launches saw most often.
    running = max(
        shared,
        key=lambda n: min(
            mine.filter(pl.col("running_reqs") == n).height,
            theirs.filter(pl.col("running_reqs") == n).height,
        ),
    )
    a = mine.filter(pl.col("running_reqs") == running)
    b = theirs.filter(pl.col("running_reqs") == running)
    spec = scalar(a["generation_throughput"].mean(), float)
    base = scalar(b["generation_throughput"].mean(), float)
    if not spec or not base or spec / base > limit:
        return None
    ratio = spec / base
    base_run = b["run_id"][0]
    return Finding(
        kind="no_speedup",
        severity=Severity.WARNING,
        run_id=spec_run,
        source=ev.runs[spec_run].get("source"),
        lines=(scalar(a["line"].min(), int), scalar(a["line"].max(), int)),
        window=(None, None),
        explanation=f"With speculation the engine generates {spec:,.1f} tokens/s against "
        f"{base:,.1f} in the launch without it (run {base_run}, line "
        f"{scalar(b['line'].min(), int)}), both with {running} request"
        f"{'s' if running != 1 else ''} running and none waiting: {ratio:.2f}x."
        + _why(ev, spec_run),
        next_step="confirm with vllm bench serve on both launches (same prompts and "
        "concurrency); if it holds, lower k or keep speculation off for this model and load",
        measured={"speedup": ratio, "generation_throughput": spec},
        expected={"speedup above": limit, "baseline_generation_throughput": base},
        sample={"intervals": a.height, "baseline_intervals": b.height},
        confidence=Confidence(
            "suggestive",
            f"engine stats at {running} running: {ratio:.2f}x",
            {"intervals": a.height + b.height},
            [LAUNCHES],
        ),
    )


def _why(ev: Evidence, run_id: str | None) -> str:
    """What the paste shows about why speculation does not pay: acceptance (almost) nil or
    low, a batch capped while requests wait with the KV cache far from full, a tail of
    positions that accept next to nothing."""
    if run_id is None:
        return ""
    reasons = []
    agg = ev.per_run.get(run_id)
    if agg is not None and agg.get("records"):
        tau = agg.get("mean_acceptance_length")
        rate = agg.get("acceptance_rate")
        if nothing_accepted(ev, run_id, agg):
            reasons.append(
                "(almost) no draft token is accepted, so every draft is verify work for nothing"
            )
        elif rate is not None and rate < ev.config["no_speedup"]["low_rate"]:
            reasons.append(f"acceptance is low ({rate:.1%} of draft tokens)")
        elif tau is not None and tau - 1 < ev.config["no_speedup"]["low_gain"]:
            reasons.append(f"each verify step gains little (mean acceptance length {tau:.2f})")
        curve = [p for p in (agg.get("per_position") or []) if p is not None]
        floor = ev.config["k_too_large"]["floor"]
        if len(curve) > 1 and curve[0] > floor and curve[-1] < floor:
            reasons.append(
                f"the last draft position accepts {curve[-1]:.1%}: k = {len(curve)} is more than "
                "the drafter carries"
            )
    stats = ev.stats_of(run_id)
    if not stats.is_empty() and {"waiting_reqs", "kv_cache_usage"} <= set(stats.columns):
        queued = stats.filter(
            (pl.col("waiting_reqs") > 0)
            & (pl.col("kv_cache_usage") < ev.config["no_speedup"]["kv_not_full"])
        )
        if queued.height:
            waiting = scalar(queued["waiting_reqs"].max(), int)
            running = scalar(queued["running_reqs"].max(), int)
            usage = scalar(queued["kv_cache_usage"].max(), float) or 0.0
            reasons.append(
                f"requests wait (up to {waiting}) with {running} running while the KV cache "
                f"is {usage:.0%} used: the running batch is capped, not "
                "out of memory, and drafts add work to every step of it"
            )
    return (" The paste shows why: " + "; ".join(reasons) + ".") if reasons else ""


__all__ = ["no_speedup"]
