"""``rules``: a Prometheus rule file that mirrors the detectors PromQL can express.

Recording rules give acceptance rate, mean acceptance length and per-position acceptance per
instance, model and engine, from ``rate()`` of the counters summed before dividing (never
an average of ratios). Alerting rules: zero acceptance while drafting, acceptance below a
threshold, acceptance with several requests running far below acceptance with one, and a
KV cache saturated with a queue. Thresholds come from the ``[rules]`` section of the same
config as ``detect``. Metric names are matched in both spellings (``vllm:`` and ``vllm_``).
"""

from __future__ import annotations

import json
from typing import Any

from specscope.errors import UsageError
from specscope.prometheus.pull import series_selector
from specscope.thresholds import Config, load_config

BY = "instance, model_name, engine"
PREFIX = "specscope:spec_decode"


def _metric(name: str, matchers: str) -> str:
    """A selector for ``vllm:name`` or ``vllm_name`` with the user's matchers."""
    extra = f", {matchers}" if matchers else ""
    return f'{{__name__=~"vllm[:_]{name}"{extra}}}'


def _matchers(selector: str | None) -> str:
    if not selector:
        return ""
    series_selector(selector)  # validates: label matchers only
    text = selector.strip()
    return text[1:-1].strip().rstrip(",") if text.startswith("{") else text


def build_rules(config: Config, selector: str | None = None) -> dict[str, Any]:
    cfg = config["rules"]
    window = cfg["window"]
    m = _matchers(selector)

    def rate(name: str, by: str = BY) -> str:
        return f"sum by ({by}) (rate({_metric(name, m)}[{window}]))"

    drafts = rate("spec_decode_num_drafts_total")
    tokens = rate("spec_decode_num_draft_tokens_total")
    accepted = rate("spec_decode_num_accepted_tokens_total")
    per_pos = rate("spec_decode_num_accepted_tokens_per_pos_total", BY + ", position")
    running = f"max by ({BY}) ({_metric('num_requests_running', m)})"
    waiting = f"max by ({BY}) ({_metric('num_requests_waiting', m)})"
    usage = (
        f'max by ({BY}) ({{__name__=~"vllm[:_](kv_cache_usage_perc|gpu_cache_usage_perc)"'
        f"{', ' + m if m else ''}}})"
    )
    recording = [
        {"record": f"{PREFIX}:drafts:rate{window}", "expr": drafts},
        {"record": f"{PREFIX}:draft_tokens:rate{window}", "expr": tokens},
        {"record": f"{PREFIX}:accepted_tokens:rate{window}", "expr": accepted},
        {"record": f"{PREFIX}:acceptance_rate:rate{window}", "expr": f"{accepted} / {tokens}"},
        {
            "record": f"{PREFIX}:mean_acceptance_length:rate{window}",
            "expr": f"1 + {accepted} / {drafts}",
        },
        {
            "record": f"{PREFIX}:per_position_acceptance:rate{window}",
            "expr": f"{per_pos} / on ({BY}) group_left {drafts}",
        },
        # Counts by load, so that the collapse alert divides sums, not averages of ratios.
        {
            "record": f"{PREFIX}:accepted_tokens_one_running:rate{window}",
            "expr": f"{accepted} and on ({BY}) ({running} == 1)",
        },
        {
            "record": f"{PREFIX}:draft_tokens_one_running:rate{window}",
            "expr": f"{tokens} and on ({BY}) ({running} == 1)",
        },
        {
            "record": f"{PREFIX}:accepted_tokens_several_running:rate{window}",
            "expr": f"{accepted} and on ({BY}) ({running} >= 2)",
        },
        {
            "record": f"{PREFIX}:draft_tokens_several_running:rate{window}",
            "expr": f"{tokens} and on ({BY}) ({running} >= 2)",
        },
    ]
    rec = {r["record"].split(":")[2]: r["record"] for r in recording}
    span = cfg["collapse_window"]

    def runbook(alert: str) -> str:
        # A section of docs/runbooks.md, under the base the operator hosts it at.
        return f"{cfg['runbook_base']}#{alert.lower()}"

    # Who and how much: the server, model and engine from the alert's labels, and the
    # value of its expression (the left side of an `and` is what an alert's $value holds).
    where = "{{ $labels.instance }} ({{ $labels.model_name }}, engine {{ $labels.engine }})"
    zero_max = config["zero_acceptance"]["max_rate"]
    low = cfg["low_acceptance_rate"]
    ratio = config["concurrency_collapse"]["max_ratio"]
    alerts = [
        {
            "alert": "SpecDecodeZeroAcceptance",
            "expr": f"{rec['acceptance_rate']} <= {zero_max} and {rec['drafts']} > 0",
            "for": cfg["zero_for"],
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"Speculative decoding on {where} accepts (almost) no draft token",
                "description": "Acceptance is {{ $value | humanizePercentage }} of draft tokens "
                f"(at most {zero_max:.0%}) while drafting goes on: every draft is wasted work. "
                "Typical causes: an MTP head on an INT4-quantized target, a draft model of "
                "another family, an unloaded head. To confirm: specscope pull --prometheus URL "
                "--since 1h, then specscope detect (zero_acceptance).",
                "runbook_url": runbook("SpecDecodeZeroAcceptance"),
            },
        },
        {
            "alert": "SpecDecodeLowAcceptance",
            "expr": f"{rec['acceptance_rate']} < {low} and {rec['acceptance_rate']} > "
            f"{zero_max} and {rec['drafts']} > 0",
            "for": cfg["low_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"Speculative decoding acceptance is low on {where}",
                "description": "Acceptance is {{ $value | humanizePercentage }} of draft tokens "
                f"(below {low:.0%}): drafting may cost more than it saves. To confirm: "
                "specscope pull --prometheus URL --since 1h, then specscope detect "
                "(low_acceptance, k_too_large) and specscope advise.",
                "runbook_url": runbook("SpecDecodeLowAcceptance"),
            },
        },
        {
            "alert": "SpecDecodeConcurrencyCollapse",
            "expr": (
                f"(sum_over_time({rec['accepted_tokens_several_running']}[{span}]) / "
                f"sum_over_time({rec['draft_tokens_several_running']}[{span}])) < "
                f"{ratio} * "
                f"(sum_over_time({rec['accepted_tokens_one_running']}[{span}]) / "
                f"sum_over_time({rec['draft_tokens_one_running']}[{span}]))"
            ),
            "for": cfg["collapse_for"],
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"Acceptance collapses on {where} when requests share a batch",
                "description": "With two or more requests running, acceptance is "
                "{{ $value | humanizePercentage }}, below "
                f"{ratio:.0%} of what it is with one. To confirm: specscope pull --prometheus URL "
                f"--since {span}, then specscope detect (concurrency_collapse).",
                "runbook_url": runbook("SpecDecodeConcurrencyCollapse"),
            },
        },
        {
            "alert": "KVCacheSaturatedWithQueue",
            "expr": f"{usage} >= {config['kv_cache_saturation']['min_usage']} and on ({BY}) "
            f"{waiting} > 0",
            "for": cfg["kv_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"KV cache full with requests waiting on {where}",
                "description": "The KV cache is {{ $value | humanizePercentage }} full and "
                "requests queue: slowness here is memory, not speculation.",
                "runbook_url": runbook("KVCacheSaturatedWithQueue"),
            },
        },
    ]
    return {
        "groups": [
            {"name": "specscope-spec-decode-recording", "rules": recording},
            {"name": "specscope-spec-decode-alerts", "rules": alerts},
        ]
    }


def to_yaml(value: Any, indent: int = 0) -> str:
    """A small YAML writer for the rule file's shapes: strings are double-quoted JSON
    scalars (valid YAML), so a PromQL expression needs no escaping rules of its own."""
    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{key}:\n{to_yaml(item, indent + 1)}")
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
        return "\n".join(lines)
    if isinstance(value, list):
        lines = []
        for item in value:
            body = to_yaml(item, indent + 1)
            lines.append(f"{pad}- {body.lstrip()}")
        return "\n".join(lines)
    return pad + _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def rules_yaml(config_path: str | None = None, selector: str | None = None) -> str:
    config = load_config(config_path)
    if "rules" not in config:
        raise UsageError("the config has no [rules] section")
    return (
        "# Generated by `specscope rules`: load it into Prometheus (rule_files) or a "
        "Thanos/Mimir ruler.\n" + to_yaml(build_rules(config, selector)) + "\n"
    )


__all__ = ["build_rules", "rules_yaml", "to_yaml"]
