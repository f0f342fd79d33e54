"""How much is accepted: (almost) nothing, or far less than the method reaches."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import polars as pl

from specscope.analysis.detectors.acceptance_stated import against_stated
from specscope.analysis.detectors.acceptance_words import low_in_words
from specscope.analysis.evidence import (
    K_ASSUMED,
    BoundTest,
    Evidence,
    Trials,
    confidence,
    engine_rows,
    engine_said,
    engine_sums,
    finding_for,
    method_of,
    nothing_accepted,
    sample_of,
    strength,
    trials_of,
)
from specscope.analysis.findings import Finding, Severity
from specscope.analysis.gain_bound import gain_upper
from specscope.stats import coverage, drafts_to_tell, wilson
from specscope.vocabulary import DRAFTER_KINDS, QUANTIZED

# Judges a run's (or one engine's) sums: the finding, or None.
Judge = Callable[[Evidence, str, Mapping[str, Any], "int | None"], "Finding | None"]


def zero(ev: Evidence) -> list[Finding]:
    """Drafting happens and (almost) nothing is accepted: at most ``max_first`` of the drafts
    get even their first token accepted, and the upper bound of that share is below
    ``max_upper``, which even weak drafters reach (0 of 150 drafts bounds it under 2% at
    95%). Where the log gives no per-position counts, the accepted tokens per draft bound
    the first position from above. A data-parallel run whose sum says nothing is judged
    engine by engine too."""
    return _one_per_llamacpp_server(ev, by_engine(ev, _zero_of))


def by_engine(ev: Evidence, judge: Judge) -> list[Finding]:
    """``judge`` of each run, and of each engine of a data-parallel run where the run's
    sum is not found wanting (one engine's failure is not hidden by the others)."""
    out: list[Finding] = []
    for run_id, agg in ev.per_run.items():
        found = judge(ev, run_id, agg, None)
        if found is not None:
            out.append(found)
            continue
        for engine, part in engine_sums(ev, run_id):
            found = judge(ev, run_id, part, engine)
            if found is not None:
                out.append(found)
    return out


def _zero_of(
    ev: Evidence, run_id: str, agg: Mapping[str, Any], engine: int | None
) -> Finding | None:
    cfg = ev.config["zero_acceptance"]
    trials = trials_of(ev, run_id, agg)
    if trials is None:
        return None
    first = _FirstPosition(agg, trials)
    if first.point > cfg["max_first"]:
        return None
    test = BoundTest("upper bound of a1", first.upper, cfg["max_upper"])
    level = strength(ev, test.holds)
    if level is None:
        return None
    level, test, trials = _whatever_k(ev, agg, trials, level, test)
    run = ev.runs.get(run_id, {})
    explanation, step = _why_zero(ev, run_id, run)
    return finding_for(
        ev,
        "zero_acceptance",
        Severity.CRITICAL,
        run_id,
        engine_rows(ev, run_id, engine),
        explanation=engine_said(engine, explanation),
        next_step=step,
        measured={
            "acceptance_rate": (
                trials.rate if agg.get("acceptance_rate") is None else agg["acceptance_rate"]
            ),
            "accepted_tokens": agg.get("accepted_tokens"),
            "draft_tokens": agg.get("draft_tokens"),
            "mean_acceptance_length": agg.get("mean_acceptance_length"),
            **({"engine": engine} if engine is not None else {}),
        },
        expected={"a1 above": cfg["max_first"]},
        sample={"drafts": round(trials.drafts), "records": agg["records"]},
        confidence=confidence(
            ev,
            level,
            test.said,
            sample_of(trials),
            trials.assumptions,
        ),
    )


def _llamacpp_echoes(ev: Evidence) -> dict[str, list[str]]:
    """llama-server prints each request's line and, beside it, the since-start
    ``statistics`` line of each speculative implementation: the same tokens, stored as runs
    of their own (never summed). Each run of request lines (no drafts counted) with the
    runs of the same log's statistics lines (drafts counted) that count its tokens again."""
    counted: dict[str, list[str]] = {}
    requests: dict[str, str] = {}
    for run_id, run in ev.runs.items():
        source = run.get("source_id")
        if run.get("server") != "llama.cpp" or not source or run_id not in ev.per_run:
            continue
        if ev.per_run[run_id].get("drafts"):
            counted.setdefault(str(source), []).append(run_id)
        else:
            requests[run_id] = str(source)
    return {r: counted[s] for r, s in requests.items() if s in counted}


def _one_per_llamacpp_server(ev: Evidence, found: list[Finding]) -> list[Finding]:
    """One fault, one finding: where a llama.cpp log's statistics run says nothing is
    accepted, its request lines' run, which says so again, gets no finding of its own; the
    statistics run's (it counts drafts) names it."""
    echoes = _llamacpp_echoes(ev)
    fired = {f.run_id for f in found}
    echoed = {r: runs for r, runs in echoes.items() if fired & set(runs)}
    out = []
    for f in found:
        if f.run_id in echoed:
            continue
        same = sorted(r for r, runs in echoed.items() if f.run_id in runs)
        if same:
            f = replace(
                f,
                explanation=f.explanation + " The requests' own lines in this log (run "
                f"{', '.join(same)}) count the same tokens: one fault, one finding.",
            )
        out.append(f)
    return out


def _whatever_k(
    ev: Evidence, agg: Mapping[str, Any], trials: Trials, level: str, test: BoundTest
) -> tuple[str, BoundTest, Trials]:
    """Where k was assumed, the claim tried again at the largest k a drafter uses (the
    fewest drafts the tokens can be): if it holds there too, it holds whatever k was, and
    the k assumed is no assumption of the finding's."""
    if not any(a.startswith(K_ASSUMED) for a in trials.assumptions) or agg.get("drafts"):
        return level, test, trials
    k = float(ev.config["evidence"]["max_plausible_k"])
    worst = replace(
        trials,
        drafts=trials.drafts * trials.k / k,
        k=k,
        assumptions=tuple(a for a in trials.assumptions if not a.startswith(K_ASSUMED)),
    )
    bound = BoundTest(
        f"upper bound of a1 (any k up to {k:g})",
        _FirstPosition(agg, worst).upper,
        test.threshold,
    )
    sure = strength(ev, bound.holds)
    return (sure, bound, worst) if sure is not None else (level, test, trials)


def _said_how(run_id: str) -> str:
    """Where a --set goes: on the paste given to triage, or on the run already stored."""
    return f"(with specscope triage LOG, or specscope ingest LOG --run {run_id} for the stored run)"


def _why_zero(ev: Evidence, run_id: str, run: Mapping[str, Any]) -> tuple[str, str]:
    method = method_of(run) or _method_before(ev, run)
    quant = (run.get("quantization") or "").lower()
    quantized = any(q in quant for q in QUANTIZED)
    codes = set(ev.events.filter(pl.col("run_id") == run_id)["code"].to_list()) | set(
        ev.events.filter(pl.col("source_id") == run.get("source_id", ""))["code"].to_list()
    )
    if quantized and method in (None, "mtp"):
        head = "an MTP head" if method == "mtp" else "a draft head (MTP?)"
        return (
            f"Drafting happens but nothing is accepted, on a quantized target ({quant}) with "
            f"{head}: the known INT4 breakage. The head predicts from the full-precision "
            "model's hidden states; the quantized target's logits differ enough that its "
            "drafts never match (reported for Qwen3.5 MTP on vLLM 0.19: 0.0% on every INT4 "
            "quant, 85.8% on BF16).",
            "serve the BF16 or FP8 checkpoint (or a quantization that keeps the MTP layer in "
            "high precision), or turn speculation off for this model",
        )
    draft = (run.get("draft_model") or "").lower()
    target = (run.get("model") or "").lower()
    if method == "draft_model" or "tensor_size_mismatch" in codes:
        family = _family(draft) != _family(target) if draft and target else None
        detail = f" ({run.get('draft_model')} for {run.get('model')})" if family else ""
        return (
            "Drafting happens but nothing is accepted, with a separate draft model"
            f"{detail}: a draft from another family or size does not share the target's "
            "tokenizer or architecture, so its tokens never match (a hidden-size mismatch "
            "like 'size of tensor a (5120) must match ... (4096)' is the same fault).",
            "use a draft model of the target's own family and tokenizer (for Qwen2.5-32B, "
            "Qwen2.5-0.5B), or the model's MTP head if it has one",
        )
    if quant == "" and method == "mtp":
        return (
            "Drafting happens but nothing is accepted, with an MTP head (the run, or the "
            "launch before it in this log, loaded one). On an INT4-quantized target (AWQ, "
            "GPTQ, NVFP4, AutoRound) this is the known breakage: the head's drafts never match "
            "the quantized model (reported for Qwen3.5 MTP on vLLM 0.19: 0.0% on every quant, "
            "85.8% on BF16). The log "
            "does not say the quantization.",
            "if the target is quantized, serve the BF16 or FP8 checkpoint, and say so: "
            f"--set quantization=NAME {_said_how(run_id)}; otherwise check the MTP weights "
            "are loaded",
        )
    if quant == "" and method is None:
        return (
            "Drafting happens but nothing is accepted. The log does not say the method or the "
            "quantization: with an MTP head on an INT4 target this is the known breakage; with "
            "a draft model, a tokenizer mismatch; otherwise an unloaded head.",
            "say what the log does not: --set quantization=NAME --set spec_method=METHOD "
            f"{_said_how(run_id)}; or check the startup log for 'Detected MTP model' and the "
            "speculative config",
        )
    return (
        "Drafting happens but nothing is accepted: the draft head is probably not loaded or "
        "is randomly initialised (a checkpoint without its MTP/EAGLE weights, a wrong "
        "speculative model path).",
        "check the startup log for the drafter's weights being loaded, and that the "
        "speculative config points at the head trained for this exact target",
    )


def _method_before(ev: Evidence, run: Mapping[str, Any]) -> str | None:
    """The method of the nearest earlier run of the same source that states one: a paste
    shows the startup of one launch and the metrics of the next, of the same setup."""
    before = [
        r
        for r in ev.runs.values()
        if r.get("source_id") == run.get("source_id")
        and (r.get("ordinal") or 0) < (run.get("ordinal") or 0)
        and method_of(r)
    ]
    return method_of(max(before, key=lambda r: r["ordinal"])) if before else None


def _family(name: str) -> str:
    base = name.rsplit("/", 1)[-1].lower()
    for sep in ("-", "_", "."):
        base = base.replace(sep, " ")
    words = base.split()
    return words[0] if words else ""


def low(ev: Evidence) -> list[Finding]:
    """The first draft position is accepted far less than the method reaches: the upper
    bound of a_1 is below ``fraction_of_reference`` of the reference (``reference.toml``,
    by method and model). With the method not stated, or named with no entry at the run's
    k, a learned drafter is assumed (MTP, EAGLE, a draft model and DFlash all reach
    ``unknown_method_a1`` or so), and the finding says so; n-gram and suffix lookups are
    judged only when named (their scale is lower). A data-parallel run whose sum says
    nothing is judged engine by engine too. A run whose author calls acceptance low in
    words, with no number at all, is judged on that word (``acceptance_words``)."""
    return by_engine(ev, _low_of) + low_in_words(ev)


def _low_of(
    ev: Evidence, run_id: str, agg: Mapping[str, Any], engine: int | None
) -> Finding | None:
    cfg = ev.config["low_acceptance"]
    run = ev.runs.get(run_id, {})
    trials = trials_of(ev, run_id, agg)
    if trials is None or nothing_accepted(ev, run_id, agg):
        return None  # nothing to judge, or zero_acceptance speaks for it
    method = method_of(run)
    claim = _low_claim(ev, run_id, agg, trials, method)
    if claim is None:
        return None
    test, level, ref, said, assumptions = claim
    a1 = _FirstPosition(agg, trials)
    high = test.bound(ev.config["evidence"]["z"])
    severity = Severity.CRITICAL if high < cfg["critical_fraction"] * ref else Severity.WARNING
    return finding_for(
        ev,
        "low_acceptance",
        severity,
        run_id,
        engine_rows(ev, run_id, engine),
        explanation=engine_said(engine, said),
        next_step="compare with a run on the unquantized target and with prefix "
        "caching off; check that the drafter was trained for this exact target and "
        "chat template"
        + (
            "; if this is n-gram or suffix decoding, say so (--set spec_method=ngram): "
            "lookups are judged on their own scale"
            if method is None
            else ""
        ),
        measured={
            # (without per-position counts a1 is only bounded by the tokens per draft: a
            # point of 1.000 there would read as a measurement)
            "a1": a1.point if a1.count is not None else None,
            "mean_acceptance_length": agg.get("mean_acceptance_length"),
            **({"engine": engine} if engine is not None else {}),
        },
        expected={test.what.removeprefix("upper bound of "): ref, "method": method},
        sample={"drafts": round(trials.drafts)},
        confidence=confidence(
            ev,
            level,
            test.said,
            sample_of(trials),
            assumptions,
        ),
    )


def _low_claim(
    ev: Evidence,
    run_id: str,
    agg: Mapping[str, Any],
    trials: Trials,
    method: str | None,
) -> tuple[BoundTest, str, float, str, list[str]] | None:
    """The low-acceptance claim that holds for a run, if any: its test, level, reference,
    the words that explain it, and what it assumes. The first position against the
    method's a_1; failing that, the mean accepted tokens per draft (tau - 1) against a
    reference tau at about the run's k, which is how block drafters (DFlash) are judged.
    Where the method is not stated, or is a learned drafter the reference table has no
    entry for at this k (DFlash at k = 8 on a model it does not list, Medusa, a method it
    does not know), a learned drafter's floor, the assumption said: naming the method must
    not leave a run unjudged that the same numbers unnamed would be judged on."""
    cfg = ev.config["low_acceptance"]
    fraction = cfg["fraction_of_reference"]
    run = ev.runs.get(run_id, {})
    a1 = _FirstPosition(agg, trials)
    stated = against_stated(ev, agg, trials)
    if stated is not None:
        return stated or None  # (empty: the value reaches the author's own reference)
    if method is None:
        return _learned_floor(
            ev,
            agg,
            trials,
            "the method is not stated: a learned drafter (MTP, EAGLE, draft model, DFlash)",
        )
    assumptions = list(trials.assumptions)
    entry = _reference_for(ev.reference, method, run.get("model"), agg.get("k"))
    ref_a1 = _a1_of(entry) if entry else None
    if entry is not None and ref_a1 is not None:
        what, bound, assumptions = _a1_whatever_k(ev, run_id, agg, trials, a1)
        test = BoundTest(what, bound, fraction * ref_a1)
        level = strength(ev, test.holds)
        if level:
            said = (
                f"The first draft position is accepted about {a1.point:.0%} of the time; "
                f"{method} usually reaches about {ref_a1:.0%} there ({entry.get('workload', '')})."
                f" Source: {entry.get('source', 'reference table')}."
            )
            return test, level, ref_a1, said, assumptions
    run_k = agg.get("k") or run.get("k")
    tau_entry = _reference_tau(ev.reference, method, run.get("model"), run_k)
    if tau_entry is None:
        if ref_a1 is not None or _is_lookup(method):
            return None  # judged on the method's own a_1, or a lookup's own scale
        k_said = f" at k={run_k}" if run_k else ""
        return _learned_floor(
            ev,
            agg,
            trials,
            f"the reference table has no entry for {method}{k_said}: the floor of a learned "
            "drafter (MTP, EAGLE, draft model, DFlash)",
        )
    ref_gain = float(tau_entry["tau"]) - 1
    test = BoundTest(
        "upper bound of tau - 1", partial(gain_upper, trials), fraction * ref_gain, percent=False
    )
    level = strength(ev, test.holds)
    if not level:
        return None
    said = (
        f"Each draft has about {trials.rate * trials.k:.2f} tokens accepted (mean acceptance "
        f"length {1 + trials.rate * trials.k:.2f}); {method} at k={tau_entry['k']} reaches "
        f"{tau_entry['tau']} ({tau_entry.get('workload', '')}). "
        f"Source: {tau_entry.get('source', 'reference table')}."
    )
    return test, level, ref_gain, said, assumptions


def _is_lookup(method: str) -> bool:
    """n-gram, suffix and other lookups copy from the context: no learned drafter's floor
    applies to them (their acceptance depends on the workload, not the model)."""
    if DRAFTER_KINDS.get(method) == "lookup":
        return True
    return any(word in method for word in ("ngram", "suffix", "lookup", "lookahead"))


def _learned_floor(
    ev: Evidence, agg: Mapping[str, Any], trials: Trials, why: str
) -> tuple[BoundTest, str, float, str, list[str]] | None:
    """The claim against what learned drafters reach (MTP, EAGLE, draft models and DFlash
    all reach ``unknown_method_a1`` or so at the first position), ``why`` said as its
    assumption: the first position, or failing that the accepted tokens per draft against
    such a drafter's curve at this k."""
    cfg = ev.config["low_acceptance"]
    fraction = cfg["fraction_of_reference"]
    assumptions = [*trials.assumptions, why]
    a1 = _FirstPosition(agg, trials)
    ref = float(cfg["unknown_method_a1"])
    decay = float(cfg["unknown_method_decay"])
    test = BoundTest("upper bound of a1", a1.upper, fraction * ref)
    level = strength(ev, test.holds)
    said = (
        f"The first draft position is accepted about {a1.point:.0%} of the time; learned "
        f"drafters (MTP, EAGLE, draft models, DFlash) reach {ref:.0%} or so there."
    )
    if level and _low_at_any_k(ev, agg, trials, ref, decay):
        return test, level, ref, said, assumptions
    # No count of the first position: the accepted tokens per draft against what such
    # a drafter's curve gives at this k (each position keeping ``unknown_method_decay``
    # of the one before).
    k = int(trials.k)
    gain = sum(ref * decay**i for i in range(k))
    test = BoundTest(
        "upper bound of tau - 1",
        partial(gain_upper, trials),
        fraction * gain,
        percent=False,
    )
    level = strength(ev, test.holds)
    said = (
        f"Each draft has about {trials.rate * trials.k:.2f} tokens accepted (mean acceptance "
        f"length {1 + trials.rate * trials.k:.2f}); a learned drafter at k={k} gives about "
        f"{gain:.2f} (first position {ref:.0%}, each next keeping {decay:.0%})."
    )
    if level and not _low_at_any_k(ev, agg, trials, ref, decay):
        return None
    return (test, level, gain, said, assumptions) if level else None


def _a1_whatever_k(
    ev: Evidence, run_id: str, agg: Mapping[str, Any], trials: Trials, a1: _FirstPosition
) -> tuple[str, Callable[[float], float], list[str]]:
    """The upper bound of a_1 a claim may rest on, its words and what it assumes. Where
    tokens are counted but verify steps are not and k was assumed (llama.cpp's request
    lines with the method named, e.g. a draft model at llama.cpp's default of 16), a_1 is
    bounded by the accepted tokens per draft, which are the most at the largest k: the
    bound taken there holds whatever k was, and assumes no k (at k = 3 assumed, 8% of
    1,000 drafted tokens put a_1 under 28%; at k = 16 it may be 100%). The largest k is
    the most a drafter uses, or where the same log's statistics lines count the verify
    steps of the same tokens, the k they give."""
    assumed = [a for a in trials.assumptions if a.startswith(K_ASSUMED)]
    if not assumed or agg.get("drafts") or not agg.get("draft_tokens"):
        return "upper bound of a1", a1.upper, list(trials.assumptions)
    top = float(ev.config["evidence"]["max_plausible_k"])
    counted = [ev.per_run[r] for r in _llamacpp_echoes(ev).get(run_id, []) if r in ev.per_run]
    ks = [s["draft_tokens"] / s["drafts"] for s in counted if s.get("drafts")]
    what = f"upper bound of a1 (any k up to {top:g})"
    if ks and max(ks) < top:
        top = max(ks)
        what = f"upper bound of a1 (k up to {top:.3g}, the statistics lines' drafts)"
    widest = _FirstPosition(agg, replace(trials, drafts=trials.drafts * trials.k / top, k=top))

    def bound(z: float) -> float:
        return max(a1.upper(z), widest.upper(z))

    return what, bound, [a for a in trials.assumptions if a not in assumed]


def _low_at_any_k(
    ev: Evidence, agg: Mapping[str, Any], trials: Trials, ref: float, decay: float
) -> bool:
    """Whether a learned drafter's claim holds whatever k was, where tokens are counted
    but verify steps are not (llama.cpp's responses and request lines, a vLLM line without
    its per-position list): the tokens per draft are then the k assumed, and at the largest
    k a drafter uses the same tokens are the fewest drafts, each accepting the most, while
    a learned drafter's curve gains least per position. A printed mean length (SGLang's)
    does not depend on k: its claim stands as made."""
    assumed = any(a.startswith(K_ASSUMED) for a in trials.assumptions)
    if not assumed or agg.get("drafts") or not agg.get("draft_tokens"):
        return True
    top = float(ev.config["evidence"]["max_plausible_k"])
    widest = replace(trials, drafts=trials.drafts * trials.k / top, k=top)
    most = sum(ref * decay**i for i in range(int(top)))
    fraction = float(ev.config["low_acceptance"]["fraction_of_reference"])
    return gain_upper(widest, ev.config["evidence"]["z"]) < fraction * most


def _reference_tau(
    entries: list[dict[str, Any]], method: str, model: str | None, k: int | None
) -> dict[str, Any] | None:
    """The entry with a mean acceptance length for this method at about this k (within
    two), of the run's model family when there is one."""
    best = None
    for e in entries:
        if e.get("method") != method or e.get("tau") is None or e.get("k") is None:
            continue
        if k is None or abs(int(e["k"]) - int(k)) > 2:
            continue
        if e.get("model") and (not model or e["model"].lower() not in model.lower()):
            continue
        score = 1 if e.get("model") else 0
        if best is None or score > best[0]:
            best = (score, e)
    return best[1] if best else None


def _a1_of(entry: Mapping[str, Any]) -> float | None:
    if entry.get("a1") is not None:
        return float(entry["a1"])
    positions = entry.get("positions")
    return float(positions[0]) if positions else None


class _FirstPosition:
    """The first position's acceptance: its point and its upper bound at a z. From its own
    count where the log gives per-position counts; otherwise from the mean, a_1 being at
    most the accepted tokens per draft (the curve only falls)."""

    def __init__(self, agg: Mapping[str, Any], trials: Trials) -> None:
        counts = agg.get("accepted_per_pos") or []
        drafts = agg.get("drafts")
        # Counts per position of only some of the run's drafts (vLLM responses, some with a
        # histogram) are no first position of them all: the mean bounds it then.
        reached = agg.get("drafted_per_pos") or []
        if counts and reached and reached[0] is not None and reached[0] < (drafts or 0):
            counts = []
        self.count = counts[0] if counts and counts[0] is not None and drafts else None
        self.drafts, self.trials = drafts, trials
        self.point = (
            self.count / drafts if self.count is not None else min(1.0, trials.rate * trials.k)
        )

    def upper(self, z: float) -> float:
        if self.count is not None and self.drafts:
            return wilson(self.count, self.drafts, z)[1]
        # A draft whose first token is accepted adds at least one accepted token: there are
        # at most as many such drafts as accepted tokens.
        t = self.trials
        return wilson(min(t.accepted, t.drafts), t.drafts, z)[1]


def _reference_for(
    entries: list[dict[str, Any]], method: str, model: str | None, k: int | None
) -> dict[str, Any] | None:
    best = None
    for e in entries:
        if e.get("method") != method:
            continue
        if e.get("model") and (not model or e["model"].lower() not in model.lower()):
            continue
        # An entry that gives a first-position rate is the one to compare with.
        score = (2 if _a1_of(e) is not None else 0) + (1 if e.get("model") else 0)
        score += 1 if e.get("k") == k else 0
        if best is None or score > best[0]:
            best = (score, e)
    return best[1] if best else None


def insufficient(ev: Evidence, judged: Iterable[str]) -> list[Finding]:
    """Runs about which no detector could say anything and whose acceptance is still
    uncertain (its interval wider than ``tell_apart``), with what would settle it."""
    out = []
    cfg = ev.config["evidence"]
    z, width = cfg["z"], cfg["tell_apart"]
    done = {part for run_ids in judged for part in run_ids.split(",")}
    # A llama.cpp log's request lines count the tokens its statistics lines count: the
    # statistics run's verdict is theirs.
    done |= set(_llamacpp_echoes(ev))
    for run_id, agg in ev.per_run.items():
        if run_id in done:
            continue
        trials = trials_of(ev, run_id, agg)
        if trials is None:
            continue
        low_, high = trials.interval(z)
        if high - low_ <= width and not trials.assumptions:
            continue  # narrow enough, and no detector objected: nothing to report
        need = drafts_to_tell(trials.rate, width, z)
        more = max(need - round(trials.drafts), 0)
        lo_rate, hi_rate = max(trials.rate - width / 2, 0.0), min(trials.rate + width / 2, 1.0)
        # A rate an author states rests on no drafts of its own: more of them cannot come.
        uncounted = agg.get("draft_tokens") is None
        stated = agg.get("stated_rate") is not None and uncounted
        settle = (
            "the Accepted/Drafted counts of the lines these rates were printed on would settle it"
            if agg.get("printed_rate") is not None and uncounted
            else "the counts the author's rate was read from would settle it"
            if stated
            else f"about {more:,} more drafts would tell {lo_rate:.0%} from {hi_rate:.0%}"
            if more
            else "counted drafts (a log that prints Accepted/Drafted) would settle it"
        )
        narrow = high - low_ <= width  # then what is uncertain is what had to be assumed
        why = (
            f"it rests on what had to be assumed ({'; '.join(trials.assumptions)}): too "
            "uncertain to call it low or healthy; the log's own counts, or --set k=N, "
            "would settle it"
            if narrow
            else f"too uncertain to call it low or healthy; {settle}"
        )
        test = (
            f"{coverage(z)} interval {low_:.0%}-{high:.0%} resting on assumptions"
            if narrow
            else f"{coverage(z)} interval {low_:.0%}-{high:.0%} wider than {width:.0%}"
        )
        out.append(
            finding_for(
                ev,
                "insufficient_data",
                Severity.INFO,
                run_id,
                ev.spec_of(run_id),
                explanation=f"Acceptance here is {trials.rate:.0%}, somewhere between "
                f"{low_:.0%} and {high:.0%} ({coverage(z)}), but {why}."
                if narrow
                else f"Acceptance here is {trials.rate:.0%}, somewhere between "
                f"{low_:.0%} and {high:.0%} ({coverage(z)}): {why}.",
                next_step="say what the log does not (--set k=N), or read the server's "
                "counters (specscope scrape of its /metrics) for exact counts"
                if narrow
                else "paste the log or counters the stated rate came from"
                if stated
                else "collect more intervals (a longer log, a longer pull) before judging",
                measured={"acceptance_rate": trials.rate, "interval": [low_, high]},
                expected={"interval narrower than": width},
                sample={"drafts": round(trials.drafts), "records": agg["records"]},
                confidence=confidence(
                    ev,
                    "likely",
                    test,
                    sample_of(trials),
                    trials.assumptions,
                ),
            )
        )
    return out
