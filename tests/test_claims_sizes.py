"""A slowdown stated with its size (issue 16): the claim reader keeps the speedup a multiple or
a share gives ('13.6x lower', '76% latency regression', '-32% throughput', 'dropped by 30%',
'0.8x of baseline'), a time's share of the time and a rate's of the rate, and no_speedup
quotes it as the author's ratio; a time that falls, a negation, a question, prefill's share
and a regression between builds are no slowdown."""

from __future__ import annotations

import json

import pytest

from specscope.logs.parser import parse_text

from .helpers import findings_of_paste

# Real sentences of fixtures/claims (mlx-lm#1211, vllm#35387, vllm#15025), then variants.
SIZED = [
    (
        "Two ratios, and they are not the same number: **decode throughput is 13.6x lower** "
        "with MTP on; **wall time is 3.7x longer**.",
        round(1 / 13.6, 4),
    ),
    ("[Performance]: MTP causes 76% latency regression on Qwen3-Next-80B-A3B-Instruct-FP8", 0.5682),
    (
        "Still I get consistent performance drop ~30% in terms of speed when using 5 speculative "
        "tokens, when I reduce number speculative tokens - speed increases, but the best speed "
        "in achieved when using main model only without speculative.",
        0.7,
    ),
    ("With the draft model I get -32% throughput on prose.", 0.68),
    ("EAGLE-3 runs at 0.8x of baseline for us.", 0.8),
]


def _said(text: str) -> list[dict]:
    rows = parse_text(text + "\n").tables.get("bench", [])
    return [json.loads(r["extra"]) for r in rows if r.get("format") == "stated_claims"]


@pytest.mark.parametrize(("text", "speedup"), SIZED)
def test_a_sized_slowdown_keeps_the_speedup_its_size_gives(text: str, speedup: float) -> None:
    (said,) = _said(text)
    assert said["claim"] == "slower"
    assert said["speedup"] == pytest.approx(speedup, abs=1e-4)


def test_no_speedup_quotes_the_authors_ratio(tmp_path) -> None:
    found = findings_of_paste(tmp_path, SIZED[1][0] + "\n")
    (slow,) = [f for f in found if f.kind == "no_speedup"]
    assert slow.measured["speedup"] == pytest.approx(0.5682, abs=1e-4)
    assert "0.57x its speed by the ratio the author gives" in slow.explanation
    assert slow.confidence is not None and slow.confidence.level == "suggestive"


@pytest.mark.parametrize(
    "text",
    [
        "With MTP our TPOT dropped by 30%.",  # a time that falls: faster
        "With MTP TPOT is -25% for us.",  # a signed share of a time
        "MTP gives 3x lower latency for us.",
        "MTP is not 2x slower for us.",
        "Is MTP 2x slower for you?",
        "The paper reports that EAGLE is 2x slower at batch 64.",
        # ik_llama.cpp#1741 (fixtures/claims): prefill's share in the sentence after it
        "This PR improves PP performance when MTP is used. It is still about 10% lower than "
        "without MTP, but better than the 20-50% observed on the main branch.",
        # omlx#3770 (fixtures/claims): MTP against MTP before a change
        "perf(qwen4_exp): MTP decode 14–26% slower after #3719 — SpeculativeCacheTransaction "
        "on every forward inflates depth-controller costs",
    ],
)
def test_what_is_no_sized_slowdown_of_speculation_is_not_read(text: str) -> None:
    assert _said(text) == []
