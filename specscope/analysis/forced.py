"""Runs whose acceptance is not the drafter's: forced by a benchmark setting (vLLM's
``rejection_sample_method = "synthetic"`` at a set ``synthetic_acceptance_length`` or
``synthetic_acceptance_rates``) or not comparable with standard rejection sampling
(``block`` verification, the lossy ``fly``); llama.cpp's benchmark-only
``--spec-synthetic-acceptance-length`` / ``-rates`` (ggml-org/llama.cpp#27711) force it the
same way, as do SGLang's ``SGLANG_SIMULATE_ACC_LEN`` and TensorRT-LLM's
``TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS`` environment variables (their APIs as
ROCm/ATOM#555 lists them). Read from the run's configuration (the ``speculative_config``
of vLLM's ``non-default args``, kept by ``logs.derive.vllm_config``; a llama-server
command line, ``logs.derive.llamacpp_config``, under vLLM's key names; the variables,
``logs.derive.forced_acceptance_env``).

A finding on such a run that judges acceptance would judge the setting, not the drafter:
it is set apart, and a ``forced_acceptance`` finding says why (vllm-project/tpu-inference
#2819: synthetic length 3.0 printed ``Per-position acceptance rate: 1.000, 1.000, 0.000``,
a cliff by construction).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from specscope.analysis.evidence import Evidence
from specscope.analysis.findings import Confidence, Finding, Severity

# The kinds that judge acceptance itself: meaningless where the setting fixes it.
JUDGING = (
    "zero_acceptance",
    "low_acceptance",
    "position_cliff",
    "k_too_large",
    "concurrency_collapse",
    "acceptance_drift",
    "request_outlier",
)

_SAID = {
    "synthetic": "acceptance is forced by synthetic acceptance (a benchmark setting)",
    "block": "block verification accepts by another rule than standard rejection sampling",
    "fly": "'fly' verification is lossy: its acceptance is not standard rejection sampling's",
    "forced": "acceptance is forced to a set number of draft tokens a step (a benchmark setting)",
}


Forced = tuple[str, dict[str, Any]]  # why, and the settings that say so


def forced(run: Mapping[str, Any]) -> Forced | None:
    """Why the run's acceptance is not the drafter's, and the settings that say so."""
    try:
        config = json.loads(run.get("config") or "{}")
    except ValueError:
        return None
    method = config.get("rejection_sample_method")
    set_to = {k: v for k, v in config.items() if k.startswith("synthetic_acceptance")}
    if method in _SAID:
        return _SAID[str(method)], {"rejection_sample_method": method, **set_to}
    if set_to:
        return _SAID["synthetic"], set_to
    if config.get("force_num_accepted_tokens"):
        return _SAID["forced"], {"force_num_accepted_tokens": config["force_num_accepted_tokens"]}
    return None


def _without(run: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    if "force_num_accepted_tokens" in settings:
        return _UNSET["tensorrt-llm"]
    return _UNSET.get(str(run.get("server")), "rejection_sample_method standard")


_UNSET = {
    "llama.cpp": "no --spec-synthetic-acceptance-length or -rates",
    "sglang": "SGLANG_SIMULATE_ACC_LEN unset",
    "tensorrt-llm": "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS unset or 0",
}


def forced_runs(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, Forced]:
    """Per run whose acceptance a setting forces, why. A setting written above a paste (a
    command, an environment line) is a run of its own with no records, the paste another:
    the setting holds for the runs after it in its source, up to one that states a
    configuration of its own."""
    why = {r: said for r, run in runs.items() if (said := forced(run)) is not None}
    for run_id, said in list(why.items()):
        setting = runs[run_id]
        if setting.get("spec_records") or not setting.get("source_id"):
            continue
        after = sorted(
            (
                (run.get("first_line") or 0, r)
                for r, run in runs.items()
                if run.get("source_id") == setting["source_id"]
                and (run.get("first_line") or 0) > (setting.get("first_line") or 0)
            )
        )
        for _, r in after:
            if _configured(runs[r]):
                break
            why.setdefault(r, said)
    return why


def _configured(run: Mapping[str, Any]) -> bool:
    try:
        return bool(json.loads(run.get("config") or "{}").get("lines"))
    except ValueError:
        return False


def set_apart(ev: Evidence, findings: list[Finding]) -> list[Finding]:
    """The findings with those that judge a forced run's acceptance replaced by one that
    says why they are not made."""
    why = forced_runs(ev.runs)
    if not why:
        return findings
    kept = [f for f in findings if not (f.run_id in why and f.kind in JUDGING)]
    for run_id, (reason, settings) in why.items():
        withheld = sorted({f.kind for f in findings if f.run_id == run_id and f.kind in JUDGING})
        run = ev.runs[run_id]
        kept.append(
            Finding(
                "forced_acceptance",
                Severity.INFO,
                run_id,
                run.get("source"),
                f"This run's {reason} ({_settings(settings)}): its acceptance says nothing of "
                "the drafter, and it is kept out of the verdicts on acceptance"
                + (f" (not raised: {', '.join(withheld)})." if withheld else "."),
                "compare it only with runs at the same setting; for the drafter's own "
                f"acceptance, run without it ({_without(run, settings)})",
                measured=dict(settings),
                confidence=Confidence("certain", "the run's configuration says so"),
            )
        )
    return kept


def _settings(settings: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in settings.items())


__all__ = ["JUDGING", "Forced", "forced", "forced_runs", "set_apart"]
