"""The Prometheus text format (0.0.4) as servers expose it and people paste it, and one
definition of acceptance over every engine's counters.

    acceptance rate         = accepted draft tokens / drafted tokens
    mean acceptance length  = 1 + accepted draft tokens / verify steps (drafts)
    per-position rate       = accepted at position i / drafted at position i
                              (drafted at i: the drafts, where an engine counts no more)

An engine's metric names map onto roles (``ROLES``): vLLM's and llama.cpp's counters are
the drafts, draft tokens, accepted tokens and accepted tokens per position; TensorRT-LLM
counts drafted and accepted tokens per ``token_position`` (every draft drafts position 0,
so its drafted count there is the drafts); SGLang counts verify steps and generated
tokens (each verify step emits the accepted tokens and one of its own). Gauges (SGLang's
``spec_accept_length``, TensorRT-LLM's ``acceptance_length``) are last values, not counts:
a row holding only them is partial. ``parse_sample`` reads one sample line, for ``scrape``
and for pasted text alike; ``spec_row`` turns one target's totals into a spec_decode row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Sample = tuple[str, dict[str, str], float]

# ``name{label="value",...} value [timestamp]``
_LINE = re.compile(
    r"([a-zA-Z_:][a-zA-Z0-9_:]*)[ \t]*(?:\{(.*)\})?[ \t]*([^ \t{}]+)(?:[ \t]+\S+)?[ \t]*"
)
_PAIR = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(,|$)')
_ESCAPE = re.compile(r"\\(.)")


def parse_sample(line: str) -> Sample | None:
    """A sample line as (name, labels, value); None when it is not one."""
    match = _LINE.fullmatch(line)
    if match is None:
        return None
    name, text, number = match.groups()
    labels: dict[str, str] = {}
    at = 0
    while text and at < len(text):
        pair = _PAIR.match(text, at)
        if pair is None:
            if text[at:].strip():
                return None
            break
        key, value, comma = pair.groups()
        labels[key] = _ESCAPE.sub(_unescape, value) if "\\" in value else value
        at = pair.end()
        if not comma:
            break
    if text and at < len(text) and text[at:].strip():
        return None
    try:
        return name, labels, float(number)
    except ValueError:
        return None


def _unescape(match: re.Match[str]) -> str:
    return "\n" if match[1] == "n" else match[1]


PREFIXES = ("vllm", "sglang", "llamacpp", "trtllm", "lmdeploy")


def metric_name(name: str) -> str:
    """One spelling per metric: the engine's prefix with a colon (``vllm_x`` is what
    prometheus_client 0.22+ writes for ``vllm:x`` under OpenMetrics 1.0, ``trtllm_x`` what
    TensorRT-LLM writes and Dynamo prefixes ``trtllm:``), without a counter's ``_total``
    (a family's HELP line and some exporters leave it out)."""
    for prefix in PREFIXES:
        if name.startswith(prefix + "_"):
            name = prefix + ":" + name[len(prefix) + 1 :]
            break
    return name.removesuffix("_total")


COUNTER_ROLES = ("drafts", "draft_tokens", "accepted_tokens", "verify_steps", "generated_tokens")
POSITION_ROLES = ("accepted_per_pos", "drafted_per_pos")
# SGLang 0.5.23's gauges of the speculative setup at the last interval, kept in extra as
# read (a chain's steps are its k: spec_row).
SETUP_GAUGES = (
    "spec_num_steps",
    "spec_num_draft_tokens",
    "spec_cap_length",
    "spec_block_accept_length",
)
GAUGE_ROLES = ("mean_acceptance_length", "reported_rate", "draft_overhead", *SETUP_GAUGES)
ROLES = (*COUNTER_ROLES, *POSITION_ROLES, *GAUGE_ROLES)
POSITION_LABELS = ("position", "token_position")


# Every engine's spec-decode series (``metric_name`` spelling) and its role: the one map
# the paste reader (specscope.logs.pasted, by a definition's engine) and pull and scrape
# (specscope.prometheus.names) both read, so that a name learnt for one is learnt for all.
NAMES: dict[str, dict[str, str]] = {
    # vllm/v1/spec_decode/metrics.py (SpecDecodingProm)
    "vllm": {
        "vllm:spec_decode_num_drafts": "drafts",
        "vllm:spec_decode_num_draft_tokens": "draft_tokens",
        "vllm:spec_decode_num_accepted_tokens": "accepted_tokens",
        "vllm:spec_decode_num_accepted_tokens_per_pos": "accepted_per_pos",
        "vllm:spec_decode_num_draft_tokens_per_pos": "drafted_per_pos",
    },
    # tools/server/server-task.cpp (ggml-org/llama.cpp#26389): vLLM's shape
    "llama.cpp": {
        "llamacpp:spec_decode_num_drafts": "drafts",
        "llamacpp:spec_decode_num_draft_tokens": "draft_tokens",
        "llamacpp:spec_decode_num_accepted_tokens": "accepted_tokens",
        "llamacpp:spec_decode_num_accepted_tokens_per_pos": "accepted_per_pos",
    },
    # lmdeploy/metrics/loggers.py (PrometheusStatLogger): vLLM's shape, labels model_name
    # and engine (the DP rank)
    "lmdeploy": {
        "lmdeploy:spec_decode_num_drafts": "drafts",
        "lmdeploy:spec_decode_num_draft_tokens": "draft_tokens",
        "lmdeploy:spec_decode_num_accepted_tokens": "accepted_tokens",
        "lmdeploy:spec_decode_num_accepted_tokens_per_pos": "accepted_per_pos",
    },
    # python/sglang/srt/metrics/collector.py: verify steps and generated tokens, counted
    # when a request finishes, beside the last interval's gauges
    "sglang": {
        "sglang:spec_verify_calls": "verify_steps",
        "sglang:generation_tokens": "generated_tokens",
        "sglang:spec_accept_length": "mean_acceptance_length",
        "sglang:spec_accept_rate": "reported_rate",
        **{f"sglang:{g}": g for g in SETUP_GAUGES},
    },
    # tensorrt_llm/metrics/collector.py: per-``token_position`` counters counted when a
    # request finishes (each created at its first count), iteration counters and gauges
    "tensorrt-llm": {
        "trtllm:spec_decode_drafted_tokens": "drafted_per_pos",
        "trtllm:spec_decode_accepted_tokens": "accepted_per_pos",
        "trtllm:spec_decode_num_draft_tokens": "draft_tokens",
        "trtllm:spec_decode_num_accepted_tokens": "accepted_tokens",
        "trtllm:spec_decode_acceptance_length": "mean_acceptance_length",
        "trtllm:spec_decode_draft_overhead": "draft_overhead",
    },
}
ENGINE_OF_PREFIX = {
    "vllm": "vllm",
    "llamacpp": "llama.cpp",
    "sglang": "sglang",
    "trtllm": "tensorrt-llm",
    "lmdeploy": "lmdeploy",
}


def engine_of(name: str) -> str | None:
    """The engine whose prefix a metric name carries (either spelling)."""
    head = re.match(r"[a-z]+", name)
    return ENGINE_OF_PREFIX.get(head[0]) if head else None


@dataclass
class Totals:
    """One target's values at one moment (or their change since the moment before), by
    role; per-position roles by position."""

    counters: dict[str, float] = field(default_factory=dict)
    positions: dict[str, dict[int, float]] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)


def _count(value: float | None) -> int | None:
    return None if value is None else round(value)


def spec_row(totals: Totals, max_k: int) -> tuple[dict[str, Any] | None, str]:
    """A spec_decode row on the one definition, or None and why there is none (all
    counters at 0: speculation never ran, which is no 0% acceptance)."""
    c = totals.counters
    accepted_at = totals.positions.get("accepted_per_pos", {})
    drafted_at = totals.positions.get("drafted_per_pos", {})
    drafts, tokens, accepted = c.get("drafts"), c.get("draft_tokens"), c.get("accepted_tokens")
    extra: dict[str, Any] = {}
    top = max([*accepted_at, *drafted_at], default=-1) + 1
    if top > max_k:
        return None, f"per-position counters up to position {top - 1}, past SPECSCOPE_MAX_K"
    if set(drafted_at or accepted_at) != set(range(top)):
        # A paste of some positions only: the others are not known to be 0.
        extra["positions_pasted"] = sorted({*accepted_at, *drafted_at})
        accepted_at, drafted_at, top = {}, {}, 0
    if drafts is None and drafted_at:
        # Per-position counters with their own denominators (TensorRT-LLM): one family, so
        # every total is taken from it; the iteration counters beside them are kept aside.
        extra["iteration_draft_tokens"], extra["iteration_accepted_tokens"] = tokens, accepted
        drafts, tokens = drafted_at.get(0, 0.0), sum(drafted_at.values())
        accepted = sum(accepted_at.values()) if accepted_at else None
    if accepted is None and accepted_at and not drafted_at:
        accepted = sum(accepted_at.values())  # vLLM's and llama.cpp's total is their sum
    if drafts is None and c.get("verify_steps") is not None:
        # SGLang: a verify step emits its accepted tokens and one more.
        drafts = c["verify_steps"]
        if c.get("generated_tokens") is not None:
            accepted = c["generated_tokens"] - drafts
            extra["accepted_from"] = "generated tokens - verify steps"
    extra = {k: v for k, v in extra.items() if v is not None}
    gauges = totals.gauges
    counted = [v for v in (drafts, tokens, accepted) if v is not None]
    if not counted and not accepted_at:
        length = gauges.get("mean_acceptance_length")
        if not length:
            return None, _never_ran(totals)
        row: dict[str, Any] = {"mean_acceptance_length": length, "partial": True}
        if gauges.get("reported_rate") is not None:
            row["reported_rate"] = gauges["reported_rate"]
        setup = _setup(gauges)
        if gauges.get("draft_overhead") is not None:
            setup["draft_overhead"] = gauges["draft_overhead"]
        if setup:
            row["extra"] = setup
        return row, ""
    if drafts is None and tokens is None and accepted is not None and not accepted_at:
        # The accepted counter pasted alone: kept as printed, partial. Of drafts nobody
        # counted it gives no rate and no k, and 0 of them is no 0%: a server that never
        # drafted prints 0 too.
        row = {"accepted_tokens": _count(accepted), "partial": True}
        if setup := _setup(gauges):
            row["extra"] = setup
        return row, ""
    if not any(counted) and not any(accepted_at.values()):
        return None, _never_ran(totals)
    if accepted is None:
        # Drafts with nothing accepted beside them would read as 0% acceptance.
        return None, (
            "drafts counted but not what was accepted (part of the counters pasted): "
            "nothing to judge acceptance on"
        )
    if accepted < 0:
        return None, "more verify steps than generated tokens: not one server's counters"
    if drafts is None and tokens is None:
        # Accepted tokens over nothing: no rate, and a k that is only the positions seen.
        return None, (
            "accepted tokens counted but not what was drafted (part of the counters "
            "pasted): nothing to judge acceptance on"
        )
    row = {
        "drafts": _count(drafts),
        "draft_tokens": _count(tokens),
        "accepted_tokens": _count(accepted),
        "partial": False,
    }
    if top:
        row["accepted_per_pos"] = [round(accepted_at.get(i, 0.0)) for i in range(top)]
    if drafted_at:
        row["drafted_per_pos"] = [round(drafted_at.get(i, 0.0)) for i in range(top)]
        pairs = zip(row["accepted_per_pos"], row["drafted_per_pos"], strict=True)
        row["per_position_rate"] = [a / d if d else 0.0 for a, d in pairs]
    elif top and drafts:
        row["per_position_rate"] = [a / drafts for a in row["accepted_per_pos"]]
    row["k"] = _k(row, top)
    setup = _setup(gauges)
    extra.update(setup)
    steps, verified = setup.get("spec_num_steps"), setup.get("spec_num_draft_tokens")
    if row["k"] is None and steps and verified == steps + 1:
        # A chain (topk 1) drafts its steps' tokens, verified with the root: k as set at the
        # last interval. A tree verifies more tokens than a step can accept: no k.
        row["k"] = round(steps)
    if tokens:
        row["acceptance_rate"] = accepted / tokens
    length = gauges.get("mean_acceptance_length")
    if drafts:
        row["mean_acceptance_length"] = 1 + accepted / drafts
        if length is not None:
            extra["gauge_mean_acceptance_length"] = length  # the last interval's, not the sum's
    elif length:
        row["mean_acceptance_length"] = length
    if gauges.get("draft_overhead") is not None:
        extra["draft_overhead"] = gauges["draft_overhead"]
    if gauges.get("reported_rate") is not None:
        row["reported_rate"] = gauges["reported_rate"]
    if extra:
        row["extra"] = extra
    return row, ""


def _setup(gauges: Mapping[str, float]) -> dict[str, float]:
    return {g: gauges[g] for g in SETUP_GAUGES if gauges.get(g) is not None}


def _k(row: Mapping[str, Any], top: int) -> int | None:
    """Tokens per draft as drafted: the positions drafted at all, else the positions
    counted, else draft tokens over drafts when that is whole."""
    drafted = row.get("drafted_per_pos")
    if drafted:
        return max((i + 1 for i, d in enumerate(drafted) if d), default=0) or None
    if top:
        return top
    drafts, tokens = row.get("drafts"), row.get("draft_tokens")
    if drafts and tokens is not None and tokens % drafts == 0:
        return tokens // drafts
    return None


def _never_ran(totals: Totals) -> str:
    shown = ", ".join(f"{k} {v:g}" for k, v in totals.counters.items()) or ", ".join(
        f"{k} {v:g}" for k, v in totals.gauges.items()
    )
    return (
        f"speculative decoding never ran ({shown or 'nothing counted'}): no draft was "
        "made, so there is no acceptance to judge (not 0%)"
    )


def finite_count(value: float) -> bool:
    """Whether a sample can be a count or a gauge specscope reads (NaN, ±Inf and negative
    values are none)."""
    return math.isfinite(value) and value >= 0


__all__ = [
    "COUNTER_ROLES",
    "ENGINE_OF_PREFIX",
    "GAUGE_ROLES",
    "NAMES",
    "POSITION_LABELS",
    "POSITION_ROLES",
    "PREFIXES",
    "ROLES",
    "Sample",
    "Totals",
    "engine_of",
    "finite_count",
    "metric_name",
    "parse_sample",
    "spec_row",
]
