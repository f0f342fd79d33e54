"""Acceptance an author calls low in words, with no rate (issue 16): the claim reader keeps a
rate-free record (parsers/stated_claims_acceptance.toml), and low_acceptance judges it on the
author's word alone (specscope.analysis.detectors.acceptance_words): suggestive, the words as
its sample; never where the paste counts acceptance itself, never beside a rate stated."""

from __future__ import annotations

import json

import pytest

from specscope.logs.parser import parse_text

from .helpers import findings_of_paste

BLAME = {"zero_acceptance", "low_acceptance", "position_cliff", "concurrency_collapse"}

# fixtures/claims: beellama.cpp#26 (a title), vllm-ascend#14306 (a title), colibri#8 (a
# sentence wrapped at its second line in the thread, read here as one line).
REAL = [
    ("Acceptance rate on 2.0 is very low", "Acceptance rate on 2.0 is very low"),
    (
        "[Bug]: Low MTP acceptance rate for GLM-5.2 in FullGraph mode (MRV1)",
        "Low MTP acceptance rate for GLM-5.2 in FullGraph mode (MRV1)",
    ),
    (
        "The int4 MTP head is too lossy to predict accurately: drafts almost always miss, so "
        "speculation never engages.",
        "drafts almost always miss",
    ),
]
# A vLLM interval of world case 06 (62.3% accepted, counted) under the same words.
COUNTED = (
    "(APIServer pid=95669) INFO 07-20 18:11:49 [metrics.py:101] SpecDecoding metrics: Mean "
    "acceptance length: 2.87, Accepted throughput: 9.40 tokens/s, Drafted throughput: 15.10 "
    "tokens/s, Accepted: 282 tokens, Drafted: 453 tokens, Per-position acceptance rate: "
    "0.821, 0.609, 0.437, Avg Draft acceptance rate: 62.3%\n"
)


@pytest.mark.parametrize(("text", "words"), REAL)
def test_low_in_words_is_a_suggestive_low_acceptance_quoting_the_author(
    tmp_path, text: str, words: str
) -> None:
    found = findings_of_paste(tmp_path, text + "\n")
    (low,) = [f for f in found if f.kind == "low_acceptance"]
    assert {f.kind for f in found} & BLAME == {"low_acceptance"}
    assert low.confidence is not None and low.confidence.level == "suggestive"
    assert low.sample == {"author's words": f"\u201c{words}\u201d"}
    assert low.measured == {"stated": "low"}
    assert f"\u201c{words}\u201d" in low.explanation
    assert low.lines == (1, 1)


def test_the_record_holds_the_words_and_no_value() -> None:
    (row,) = parse_text(REAL[0][0] + "\n").tables["spec_decode"]
    assert row["format"] == "stated_claims_acceptance" and row["partial"]
    assert row.get("reported_rate") is None and row.get("mean_acceptance_length") is None
    assert json.loads(row["extra"]) == {"stated": REAL[0][1], "claim": "low"}


def test_counts_in_the_paste_leave_the_words_out(tmp_path) -> None:
    # The counted interval says 62.3%: the author's 'very low' is no second record, and
    # the finding (if any) is the counted detectors'.
    text = COUNTED + "With MTP the acceptance rate is very low.\n"
    spec = parse_text(text).tables["spec_decode"]
    assert [r["format"] for r in spec if r["format"].startswith("stated_")] == []
    found = findings_of_paste(tmp_path, text)
    assert not any(
        f.confidence is not None and "author's words" in f.confidence.sample for f in found
    )


def test_a_rate_stated_beside_the_words_is_judged_not_the_words(tmp_path) -> None:
    # 'very low ... lower than 20%' (beellama.cpp#26/2): the rate is what low_acceptance
    # judges, where a reader of rates reads it; the words make no finding of their own then.
    found = findings_of_paste(
        tmp_path, "The acceptance rate is very low. The acceptance rate is 0.5% with MTP.\n"
    )
    lows = [f for f in found if f.kind in ("low_acceptance", "zero_acceptance")]
    assert lows and all("author's words" not in (f.confidence.sample or {}) for f in lows)


# fixtures/claims cluster#3258/1 (a real sentence): 4 concurrent sessions against one stream.
CROWDED = (
    "Live benchmarking showed 4 concurrent sessions gave **lower** aggregate throughput (~10.8 "
    "tok/s) than a single stream (~33 tok/s) — speculative decoding (`spec-type=draft-mtp`) "
    "doesn't batch across slots, so each of the 4 slots ran its own draft+verify and thrashed.\n"
)


# fixtures/claims llama.cpp#27342/2 (a real paragraph): a fall from one request to two.
NP = (
    "**1. The baseline scales, the drafted paths don't.** Without a drafter, aggregate "
    "throughput goes 11.11 → 20.14 → 34.14, close to linear. With either drafter it *drops* "
    "from np=1 to np=2 and only recovers past the single-stream figure at np=4.\n"
)


@pytest.mark.parametrize(
    "text",
    [CROWDED, NP, "With EAGLE-3 at concurrency 4 the acceptance rate is very low.\n"],
)
def test_a_fall_with_more_requests_at_once_is_a_suggestive_collapse(tmp_path, text) -> None:
    found = findings_of_paste(tmp_path, text)
    (collapse,) = [f for f in found if f.kind == "concurrency_collapse"]
    assert collapse.confidence is not None and collapse.confidence.level == "suggestive"
    assert collapse.measured["stated"] == "collapse"
    # against fewer requests, not against no speculation: no slowdown of speculation claimed
    assert not {"no_speedup", "low_acceptance"} & {f.kind for f in found}
