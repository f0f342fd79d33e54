"""The series specscope reads, by name, and what column each fills: every engine's
spec-decode series by their role on the one definition (``specscope.exposition.NAMES``,
which the paste reader reads too), and vLLM's and SGLang's neighbours (requests, KV cache,
prefix cache, tokens, latency histograms). Both spellings of a name are read
(``canonical_name``)."""

from __future__ import annotations

from specscope.exposition import GAUGE_ROLES, NAMES, PREFIXES


def _total(name: str) -> str:
    return name + "_total"


def _role(engines: tuple[str, ...], *roles: str) -> dict[str, str]:
    return {_total(n): role for e in engines for n, role in NAMES[e].items() if role in roles}


# vLLM's, llama.cpp's and LMDeploy's: drafts (verify steps), draft tokens, accepted tokens
_VLLM_SHAPED = ("vllm", "llama.cpp", "lmdeploy")
SPEC_COUNTERS = _role(_VLLM_SHAPED, "drafts", "draft_tokens", "accepted_tokens")
PER_POSITION_NAMES = tuple(_role(_VLLM_SHAPED, "accepted_per_pos"))
PER_POSITION = PER_POSITION_NAMES[0]
# Drafted tokens per position, where the server counts them (vLLM's main branch, with
# adaptive verification): each position's own denominator.
DRAFTED_PER_POSITION_NAMES = tuple(_role(("vllm", "llama.cpp"), "drafted_per_pos"))

# Engines whose counters are read one interval at a time through the one definition
# (``specscope.exposition.spec_row``): TensorRT-LLM's per-position drafted and accepted
# tokens, SGLang's verify steps and generated tokens. Counters and gauges alike, by role.
COUNTED = {
    engine: {(n if role in GAUGE_ROLES else _total(n)): role for n, role in NAMES[engine].items()}
    for engine in ("tensorrt-llm", "sglang")
}
# What makes a target's rows counted ones: without these, SGLang's gauges alone are read
# as before (each interval's mean length as printed).
COUNTED_BY = {"tensorrt-llm": "drafted_per_pos", "sglang": "verify_steps"}


# V0 increments these by its cumulative totals every few seconds: they over-count.
V0_ONLY = "vllm:spec_decode_num_emitted_tokens_total"


GAUGES = {
    "vllm:num_requests_running": "running_reqs",
    "vllm:num_requests_waiting": "waiting_reqs",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "sglang:num_running_reqs": "running_reqs",
    "sglang:num_queue_reqs": "waiting_reqs",
    "sglang:token_usage": "kv_cache_usage",
    # tensorrt_llm/metrics/collector.py: iteration stats' active and queued requests, and
    # used over max KV-cache blocks
    "trtllm:num_requests_running": "running_reqs",
    "trtllm:num_requests_waiting": "waiting_reqs",
    "trtllm:kv_cache_utilization": "kv_cache_usage",
    # lmdeploy/metrics/loggers.py: the engine's running and waiting requests, KV usage
    "lmdeploy:num_requests_running": "running_reqs",
    "lmdeploy:num_requests_waiting": "waiting_reqs",
    "lmdeploy:gpu_cache_usage_perc": "kv_cache_usage",
}


RATE_COUNTERS = {
    "vllm:prompt_tokens_total": "prompt_throughput",
    "vllm:generation_tokens_total": "generation_throughput",
}


PREFIX_CACHE = {  # (queries, hits); the 0.8 names counted blocks, later ones tokens
    "vllm:prefix_cache_queries_total": ("new", "queries"),
    "vllm:prefix_cache_hits_total": ("new", "hits"),
    "vllm:gpu_prefix_cache_queries_total": ("old", "queries"),
    "vllm:gpu_prefix_cache_hits_total": ("old", "hits"),
}


SGLANG_ACCEPT = {
    n: role
    for n, role in NAMES["sglang"].items()
    if role in ("mean_acceptance_length", "reported_rate")
}


CONFIG_INFO = "vllm:cache_config_info"


LATENCY = (
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:time_per_output_token_seconds",
)


SERIES_NAMES = (
    *SPEC_COUNTERS,
    *PER_POSITION_NAMES,
    *DRAFTED_PER_POSITION_NAMES,
    V0_ONLY,
    *GAUGES,
    *RATE_COUNTERS,
    *PREFIX_CACHE,
    *SGLANG_ACCEPT,
    *(n for names in COUNTED.values() for n in names),
    CONFIG_INFO,
    *(f"{name}_{part}" for name in LATENCY for part in ("sum", "count")),
)


def canonical_name(name: str) -> str:
    """``vllm_spec_decode_...`` -> ``vllm:spec_decode_...``: prometheus_client 0.22+ escapes
    the colon to an underscore when a scraper negotiates OpenMetrics 1.0, so a Prometheus
    may hold either spelling."""
    for prefix in PREFIXES:
        if name.startswith(prefix + "_"):
            return prefix + ":" + name[len(prefix) + 1 :]
    return name
