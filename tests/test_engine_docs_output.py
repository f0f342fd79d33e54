"""Output the engines print in their own documentation, verbatim (issue 21): what a user
who pastes it gets. Neither server speculates in these examples, so each says what it can
of a run that did not draft, and nothing more."""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope
from specscope.errors import NoTelemetryError
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_text

GRAMMAR = Grammar(load_definitions())

# sgl-project/sglang docs/references/production_metrics.md @00b08c49 ("Here is an example
# of the metrics"), its lines from the command to the cache hit rate and the last four
# gauges (the histograms between them left out): counts in exponent notation.
SGLANG_DOCS = """$ curl http://localhost:30000/metrics
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.28
# HELP sglang:cache_hit_rate The cache hit rate
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.007507552643049313
# HELP sglang:num_running_reqs The number of running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 162.0
# HELP sglang:num_used_tokens The number of used tokens
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{model_name="meta-llama/Llama-3.1-8B-Instruct"} 123859.0
# HELP sglang:gen_throughput The generate throughput (token/s)
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="meta-llama/Llama-3.1-8B-Instruct"} 86.50814177726902
# HELP sglang:num_queue_reqs The number of requests in the waiting queue
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2826.0
"""

# NVIDIA/TensorRT-LLM docs/source/commands/trtllm-serve/trtllm-serve.rst @0434755f, the
# /metrics "Example output" as the docs print it: indented, and elided with "..." (so no
# JSON document).
TRTLLM_DOCS = """    [
        {
            "gpuMemUsage": 76665782272,
            "iter": 154,
            "iterLatencyMS": 7.00688362121582,
            "kvCacheStats": {
                "allocNewBlocks": 3126,
                "allocTotalBlocks": 3126,
                "cacheHitRate": 0.00128,
                "freeNumBlocks": 101253,
                "maxNumBlocks": 101256,
                "missedBlocks": 3121,
                "reusedBlocks": 4,
                "tokensPerBlock": 32,
                "usedNumBlocks": 3
            },
            "numActiveRequests": 1
            ...
        }
    ]
"""


def test_sglang_metrics_without_speculation_say_it_never_ran() -> None:
    result = parse_text(SGLANG_DOCS, GRAMMAR)
    assert not result.tables.get("spec_decode")
    (skip,) = result.skipped
    # Generated tokens and no verify step: no draft, so no 0% either.
    assert skip.line == 7 and "never ran" in skip.reason and "not 0%" in skip.reason
    (run,) = result.runs
    assert run.config["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_trtllm_iteration_stats_without_speculation_are_no_record(tmp_path: Path) -> None:
    result = parse_text(TRTLLM_DOCS, GRAMMAR)
    assert not result.tables.get("spec_decode") and not result.skipped
    paste = tmp_path / "metrics.json"
    paste.write_text(TRTLLM_DOCS, encoding="utf-8")
    # Ingest says so in one line naming the file, as of any paste with nothing to read.
    with pytest.raises(NoTelemetryError, match=r"metrics\.json: no speculative-decoding"):
        specscope.ingest(paste, store=tmp_path / "s").raise_for_errors()
