"""Acceptance forced by an environment variable (issue 21), as ROCm/ATOM#555 lists the
engines' APIs: SGLang's SGLANG_SIMULATE_ACC_LEN and TensorRT-LLM's
TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS, written above what the server printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specscope
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_text

GRAMMAR = Grammar(load_definitions())
JUDGING = {"zero_acceptance", "low_acceptance", "position_cliff", "k_too_large"}


def _iterations(accepted: int, n: int = 40) -> list[str]:
    """TensorRT-LLM iteration stats pasted a JSON line each: 8 requests drafting 3 tokens."""
    stats = {"numDraftTokens": 24, "numRequestsWithDraftTokens": 8, "draftOverhead": 0.2}
    return [
        json.dumps({"iter": i, "specDecodingStats": {**stats, "numAcceptedTokens": accepted}})
        for i in range(n)
    ]


def test_a_forced_count_above_pasted_iteration_stats_judges_nothing(tmp_path) -> None:
    plain = {f.kind for f in _findings(tmp_path / "plain", _iterations(accepted=1))}
    assert plain & JUDGING
    setting = "export TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0.1"
    found = _findings(tmp_path / "forced", [setting, *_iterations(accepted=1)])
    assert not {f.kind for f in found} & JUDGING
    forced = [f for f in found if f.kind == "forced_acceptance"]
    assert forced and all(f.measured == {"force_num_accepted_tokens": 0.1} for f in forced)
    assert all("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS unset" in f.next_step for f in forced)


def _decode_batches(n: int = 40) -> list[str]:
    """SGLang decode lines in the form of sgl-project/sglang#11948, nothing accepted."""
    return [
        f"[2025-10-22 10:{27 + i // 60:02d}:{i % 60:02d} TP0] Decode batch. #running-req: 1, "
        f"#token: {100 + 4 * i}, token usage: 0.00, accept len: 1.00, accept rate: 0.00, "
        "cuda graph: True, gen throughput (token/s): 90.12, #queue-req: 0, "
        for i in range(n)
    ]


def _findings(tmp_path: Path, lines: list[str]) -> list:
    tmp_path.mkdir(exist_ok=True)
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    specscope.ingest(log, store=tmp_path / "s", year=2026).raise_for_errors()
    return specscope.detect(specscope.open_store(tmp_path / "s"))


@pytest.mark.parametrize(
    "setting",
    [
        "SGLANG_SIMULATE_ACC_LEN: '1.0'   # AL from the committed golden YAML",
        "    - SGLANG_SIMULATE_ACC_LEN=1.0",
        "docker run --gpus all -e SGLANG_SIMULATE_ACC_LEN=1 lmsysorg/sglang:latest",
    ],
)
def test_a_simulated_length_above_the_log_judges_nothing(tmp_path, setting) -> None:
    plain = {f.kind for f in _findings(tmp_path / "plain", _decode_batches())}
    assert plain & JUDGING and "forced_acceptance" not in plain
    found = _findings(tmp_path / "forced", [setting, *_decode_batches()])
    assert not {f.kind for f in found} & JUDGING
    (forced,) = [f for f in found if f.kind == "forced_acceptance"]
    assert forced.measured == {"synthetic_acceptance_length": 1.0}
    assert "forced" in forced.explanation and "SGLANG_SIMULATE_ACC_LEN unset" in forced.next_step


def _config(text: str) -> dict:
    config: dict = {}
    for run in parse_text(text, GRAMMAR).runs:
        config.update({k: v for k, v in run.config.items() if not k.startswith("_")})
    return config


@pytest.mark.parametrize(
    "text",
    [
        "SGLANG_SIMULATE_ACC_LEN=0 python3 -m sglang.launch_server --model-path m",
        "# SGLANG_SIMULATE_ACC_LEN=3.24",
        "I set SGLANG_SIMULATE_ACC_LEN=3.24 and the rate went to 0.56",
        "Try SGLANG_SIMULATE_ACC_LEN=2 to see the ceiling?",
        "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0 trtllm-serve nvidia/Llama-3.3-70B",
        "I set TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=2 for the run",
    ],
)
def test_a_zero_a_comment_or_prose_forces_nothing(text: str) -> None:
    config = _config(text)
    assert "synthetic_acceptance_length" not in config
    assert "force_num_accepted_tokens" not in config
