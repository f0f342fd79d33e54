"""How much is accepted: zero, low against the reference, or too few drafts to say."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from specscope.analysis.evidence import (
    Evidence,
    drafts_of,
    enough_drafts,
    finding_for,
    method_of,
)
from specscope.analysis.findings import Finding, Severity
from specscope.stats import wilson
from specscope.vocabulary import QUANTIZED


def insufficient(ev: Evidence) -> list[Finding]:
    out = []
    need = ev.config["evidence"]["min_drafts"]
    for run_id, agg in ev.per_run.items():
        drafts = drafts_of(agg)
        if agg.get("draft_tokens") is not None and drafts < need:
            rows = ev.spec_of(run_id)
            out.append(
                finding_for(
                    ev,
                    "insufficient_data",
                    Severity.INFO,
                    run_id,
                    rows,
                    explanation=f"{drafts} drafts are too few to judge this run: a rate on so few "
                    f"drafts says little (a 100% on 66 tokens says nothing).",
                    next_step="collect more intervals (a longer log, a longer pull) before judging",
                    measured={"drafts": drafts, "acceptance_rate": agg.get("acceptance_rate")},
                    expected={"drafts at least": need},
                    sample={"records": agg["records"]},
                )
            )
    return out


def zero(ev: Evidence) -> list[Finding]:
    out = []
    limit = ev.config["zero_acceptance"]["max_rate"]
    for run_id, agg in ev.per_run.items():
        rate = agg.get("acceptance_rate")
        if rate is None or not enough_drafts(ev, agg) or rate > limit:
            continue
        run = ev.runs.get(run_id, {})
        explanation, step = _why_zero(ev, run_id, run)
        rows = ev.spec_of(run_id)
        out.append(
            finding_for(
                ev,
                "zero_acceptance",
                Severity.CRITICAL,
                run_id,
                rows,
                explanation=explanation,
                next_step=step,
                measured={
                    "acceptance_rate": rate,
                    "accepted_tokens": agg["accepted_tokens"],
                    "draft_tokens": agg["draft_tokens"],
                    "mean_acceptance_length": agg.get("mean_acceptance_length"),
                },
                expected={"acceptance_rate above": limit},
                sample={"drafts": drafts_of(agg), "records": agg["records"]},
            )
        )
    return out


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
            "drafts never match (seed 003: 0.0% on every INT4 quant, 85.8% on BF16).",
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
            "the quantized model (seed 003: 0.0% on every quant, 85.8% on BF16). The log "
            "does not say the quantization.",
            "if the target is quantized, serve the BF16 or FP8 checkpoint; re-ingest with "
            "--set quantization=... to record it; otherwise check the MTP weights are loaded",
        )
    if quant == "" and method is None:
        return (
            "Drafting happens but nothing is accepted. The log does not say the method or the "
            "quantization: with an MTP head on an INT4 target this is the known breakage; with "
            "a draft model, a tokenizer mismatch; otherwise an unloaded head.",
            "re-ingest with --set quantization=... --set spec_method=..., or check the startup "
            "log for 'Detected MTP model' and the speculative config",
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
    out = []
    cfg = ev.config["low_acceptance"]
    z = ev.config["evidence"]["z"]
    zero = ev.config["zero_acceptance"]["max_rate"]
    for run_id, agg in ev.per_run.items():
        run = ev.runs.get(run_id, {})
        method = method_of(run)
        curve = agg.get("per_position") or []
        if method is None or not curve or not enough_drafts(ev, agg):
            continue
        if (agg.get("acceptance_rate") or 0) <= zero:
            continue  # zero_acceptance speaks for it
        entry = _reference_for(ev.reference, method, run.get("model"), agg.get("k"))
        if entry is None or entry.get("a1") is None:
            continue
        counts = agg.get("accepted_per_pos") or []
        a1, drafts = curve[0], drafts_of(agg)
        low, high = wilson(counts[0], drafts, z) if counts else (a1, a1)
        ref = float(entry["a1"])
        if high >= cfg["fraction_of_reference"] * ref:
            continue
        severity = Severity.CRITICAL if high < cfg["critical_fraction"] * ref else Severity.WARNING
        rows = ev.spec_of(run_id)
        out.append(
            finding_for(
                ev,
                "low_acceptance",
                severity,
                run_id,
                rows,
                explanation=f"The first draft position is accepted {a1:.0%} of the time; {method} "
                f"usually reaches about {ref:.0%} there ({entry.get('workload', '')}). "
                f"Source: {entry.get('source', 'reference table')}.",
                next_step="compare with a run on the unquantized target and with prefix "
                "caching off; check that the drafter was trained for this exact target and "
                "chat template",
                measured={
                    "a1": a1,
                    "a1_interval": [low, high],
                    "mean_acceptance_length": agg.get("mean_acceptance_length"),
                },
                expected={"a1": ref, "method": method},
                sample={"drafts": drafts},
            )
        )
    return out


def _reference_for(
    entries: list[dict[str, Any]], method: str, model: str | None, k: int | None
) -> dict[str, Any] | None:
    best = None
    for e in entries:
        if e.get("method") != method:
            continue
        if e.get("model") and (not model or e["model"].lower() not in model.lower()):
            continue
        score = (1 if e.get("model") else 0) + (1 if e.get("k") == k else 0)
        if best is None or score > best[0]:
            best = (score, e)
    return best[1] if best else None
