"""Acceptance an author states in prose (parsers/stated_acceptance.toml): counts are judged
as counts, a lone rate only as a suggestion, and a healthy rate blames nothing."""

from __future__ import annotations

import json

import polars as pl
import pytest

import specscope
from specscope.analysis.evidence import with_stated_rates
from specscope.logs.parser import parse_text

from .helpers import findings_of_paste

_findings = findings_of_paste


def _blamed(found: list[specscope.Finding]) -> dict[str, specscope.Finding]:
    return {f.kind: f for f in found if f.severity.name in ("WARNING", "CRITICAL")}


def test_two_rates_on_one_line_are_two_partial_runs() -> None:
    text = "produces ~0.7% acceptance on Vulkan, while HIP on the same card achieves 81% acceptance"
    result = parse_text(text)
    rows = result.tables["spec_decode"]
    assert [r["reported_rate"] for r in rows] == pytest.approx([0.007, 0.81])
    assert all(r["partial"] and r.get("accepted_tokens") is None for r in rows)
    assert len({r["_run"] for r in rows}) == 2
    assert json.loads(rows[1]["extra"]) == {"stated": "81% acceptance"}


def test_stated_counts_are_whole_and_judged_as_counts(tmp_path) -> None:
    (row,) = parse_text("0 of 402 drafted tokens were accepted").tables["spec_decode"]
    assert (row["accepted_tokens"], row["draft_tokens"], row.get("partial")) == (0, 402, None)
    zero = _blamed(_findings(tmp_path, "0 of 402 drafted tokens were accepted\n"))
    assert "zero_acceptance" in zero


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            "Headline: the Vulkan draft produces ~0.7% acceptance and garbled output\n",
            "zero_acceptance",
        ),
        ("- At temp=0.6 on Qwen3.5-122B-A10B: ~5% acceptance with exact match\n", "low_acceptance"),
    ],
)
def test_a_lone_stated_rate_is_at_most_suggestive(tmp_path, text: str, kind: str) -> None:
    found = _blamed(_findings(tmp_path, text))
    assert set(found) == {kind}
    confidence = found[kind].confidence
    assert confidence is not None and confidence.level == "suggestive"
    assert any("author's rate" in a for a in confidence.assumptions)


@pytest.mark.parametrize(
    "text",
    [
        "With MTP we measured 90.7% draft acceptance and a 54% faster decode.\n",
        "acceptance rate is 62% for EAGLE-3 on our chat traffic\n",
        # the reference is refused, the measurement read
        "The paper reports 5% acceptance untuned; we measured ~60% acceptance on chat.\n",
        # a change and a paper's figure are no level of this thread's drafter (issue 16)
        "HASS (ICLR 2025) 5% acceptance improvement over EAGLE-2; on our chat traffic we"
        " measured 62% acceptance.\n",
        "G1: +0.00% acceptance improvement (identical to baseline); the drafter runs at 71%"
        " acceptance.\n",
        "EAGLE-3 (NeurIPS'25): 3% acceptance on the long tail. Our own run of the same drafter"
        " shows 64% acceptance.\n",
    ],
)
def test_a_healthy_or_unmeasured_rate_blames_nothing(tmp_path, text: str) -> None:
    assert _blamed(_findings(tmp_path, text)) == {}


def test_stated_rates_are_looked_up_only_for_runs_without_counts_or_mean() -> None:
    spec = pl.LazyFrame(
        {
            "run_id": ["a", "b", "c"],
            "format": ["stated_acceptance", "sglang_decode_batch", "stated_acceptance"],
            "reported_rate": [0.05, 0.0, 0.4],
            "acceptance_rate": [None, None, None],
            "per_position_rate": [None, None, None],
        },
        schema_overrides={
            "acceptance_rate": pl.Float64,
            "per_position_rate": pl.List(pl.Float64),
        },
    )
    per_run = pl.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "draft_tokens": [None, None, 100],
            "mean_acceptance_length": [None, None, None],
        },
        schema_overrides={"draft_tokens": pl.Int64, "mean_acceptance_length": pl.Float64},
    )
    got = dict(with_stated_rates(spec, per_run).select("run_id", "stated_rate").iter_rows())
    # b's rate is SGLang's (its meaning changed between releases); c has counts.
    assert got == {"a": 0.05, "b": None, "c": None}
    printed = dict(with_stated_rates(spec, per_run).select("run_id", "printed_rate").iter_rows())
    assert printed == {"a": None, "b": None, "c": None}  # no line printed a share of drafts


def test_an_undecided_stated_rate_asks_for_its_counts_not_more_drafts(tmp_path) -> None:
    # the line of world case 158, its full-width punctuation as the author typed it
    text = "tpot 45ms->60ms (数据集\uff1agsm8k\uff0c并发数\uff1a1\uff0c采纳率~40%\uff09\n"
    found = _findings(tmp_path, text)
    (unsure,) = [f for f in found if f.kind == "insufficient_data"]
    assert "counts the author's rate was read from" in unsure.explanation
    assert "more drafts" not in unsure.explanation
    assert _blamed(found) == {}
