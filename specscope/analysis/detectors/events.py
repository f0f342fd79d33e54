"""Errors and warnings the log itself names (events), as findings."""

from __future__ import annotations

from datetime import datetime

from specscope.analysis.evidence import (
    Evidence,
    scalar,
)
from specscope.analysis.findings import Confidence, Finding, Severity

_EVENT_SEVERITY = {
    "engine_core_fatal": Severity.CRITICAL,
    "engine_dead": Severity.CRITICAL,
    "tensor_size_mismatch": Severity.CRITICAL,
    "cuda_oom": Severity.CRITICAL,
    "sglang_process_exception": Severity.CRITICAL,
    "sglang_child_failed": Severity.CRITICAL,
    "v0_fallback": Severity.WARNING,
    "mtp_k_gt_1": Severity.WARNING,
    "nan_detected": Severity.WARNING,
    "method_deprecated": Severity.INFO,
    "draft_max_len_override": Severity.INFO,
}


_EVENT_TEXT = {
    "tensor_size_mismatch": (
        "a tensor size mismatch: a draft model whose hidden size differs "
        "from the target's (as in a reported 5120 against 4096)",
        "use a draft of the target's own family and size, or its MTP head",
    ),
    "v0_fallback": (
        "speculative decoding fell back to the V0 engine",
        "use a method the V1 engine supports, or a newer vLLM",
    ),
    "mtp_k_gt_1": (
        "the MTP layer is run several times per step for k > 1",
        "use k=1 for heads trained for one step, or a multi-step MTP checkpoint",
    ),
    "engine_core_fatal": ("the engine core died", "read the traceback after the event line"),
    "engine_dead": ("the engine core died", "read the traceback before this line"),
    "sglang_process_exception": (
        "an SGLang process died (scheduler, tokenizer or worker)",
        "read the traceback after the event line",
    ),
    "sglang_child_failed": (
        "an SGLang child process failed and the server was shut down",
        "read the child's error just before this line",
    ),
    "cuda_oom": (
        "CUDA ran out of memory",
        "lower --gpu-memory-utilization headroom use, k, or --max-num-seqs; drafts take memory too",
    ),
    "nan_detected": ("NaNs appeared in the model's outputs", "check the quantization and dtype"),
    "method_deprecated": ("a deprecated method name was used", "use the new name"),
    "draft_max_len_override": (
        "the draft model's max length was overridden",
        "check the draft model's context length",
    ),
}


def errors(ev: Evidence) -> list[Finding]:
    out: list[Finding] = []
    if ev.events.is_empty():
        return out
    for (run_id, code), group in ev.events.group_by(["run_id", "code"], maintain_order=True):
        what, step = _EVENT_TEXT.get(code, (code, "read the log around the event"))
        out.append(
            Finding(
                kind="error_signature",
                severity=_EVENT_SEVERITY.get(code, Severity.INFO),
                run_id=run_id,
                source=group["source"][0],
                lines=(scalar(group["line"].min(), int), scalar(group["line"].max(), int)),
                window=(
                    scalar(group["ts"].min(), datetime),
                    scalar(group["ts"].max(), datetime),
                ),
                explanation=f"The log shows {what} ({code}, {group.height}x): "
                f"{group['message'][0][:160]}",
                next_step=step,
                measured={"code": code, "count": group.height},
                confidence=Confidence("certain", "the log says so", {"events": group.height}),
            )
        )
    return out
