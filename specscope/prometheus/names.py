"""The series specscope reads, by name, and what column each fills: vLLM's and SGLang's
spec-decode counters and their neighbours (requests, KV cache, prefix cache, tokens,
latency histograms), and llama.cpp server's spec-decode counters, which have vLLM's shape
(ggml-org/llama.cpp#26389; the same roles as parsers/prometheus_text_llamacpp.toml gives
them). Both spellings of a name are read (``canonical_name``)."""

from __future__ import annotations

SPEC_COUNTERS = {
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
    "llamacpp:spec_decode_num_drafts_total": "drafts",
    "llamacpp:spec_decode_num_draft_tokens_total": "draft_tokens",
    "llamacpp:spec_decode_num_accepted_tokens_total": "accepted_tokens",
}


PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
LLAMACPP_PER_POSITION = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
PER_POSITION_NAMES = (PER_POSITION, LLAMACPP_PER_POSITION)
LLAMACPP = "llamacpp:"  # the prefix of a llama.cpp server's series: its runs' server


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
    "sglang:spec_accept_length": "mean_acceptance_length",
    "sglang:spec_accept_rate": "reported_rate",
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
    V0_ONLY,
    *GAUGES,
    *RATE_COUNTERS,
    *PREFIX_CACHE,
    *SGLANG_ACCEPT,
    CONFIG_INFO,
    *(f"{name}_{part}" for name in LATENCY for part in ("sum", "count")),
)


def canonical_name(name: str) -> str:
    """``vllm_spec_decode_...`` -> ``vllm:spec_decode_...``: prometheus_client 0.22+ escapes
    the colon to an underscore when a scraper negotiates OpenMetrics 1.0, so a Prometheus
    may hold either spelling."""
    for prefix in ("vllm", "sglang", "llamacpp"):
        if name.startswith(prefix + "_"):
            return prefix + ":" + name[len(prefix) + 1 :]
    return name
