"""A cliff stated in words (specscope/logs/claim_positions.py, detectors/positions_words.py):
a later draft position named and a collapse said of it, or a fall a setting causes, read as
a claim of kind ``cliff`` and judged a suggestive position_cliff on the author's word. The
world excerpts are real threads (fixtures/world/188, 251, 270, 271); the variants beside
them are constructed in the shapes of issue 16, with the healthy and general sentences that
name positions without a cliff, which must stay unread."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specscope
from specscope.logs.claims import lexicon, read_claims
from specscope.logs.definitions import load_definitions
from specscope.logs.parser import parse_text

LEX = lexicon(load_definitions())
WORLD = Path(__file__).resolve().parent.parent / "fixtures" / "world"


def _cliffs(text: str) -> list[str]:
    assert LEX is not None
    return [c.stated for c in read_claims(LEX, text) if c.kind == "cliff"]


@pytest.mark.parametrize(
    "text",
    [
        "Acceptance drops to zero after position 1.",
        "The second draft token is almost never accepted with the int4 head.",
        "With num_speculative_tokens=3, the third token's acceptance is basically 0.",
        "With the V2 runner, acceptance for draft positions 1 and above collapses.",
        "Per-position acceptance dies after the first token on our traffic.",
        "Per-position acceptance rate shows the draft chain collapsing from token 2 onward.",
        "Look at the per-position curve \u2014 it falls off a cliff to 0.000 after position ~4-5.",
        "K=8 measured worse than K=4 \u2014 per-position acceptance collapses past match-depth 3 "
        "regardless of batch size.",
        "MTP 第二个token的接受率几乎为0",
        # (a question that asks the cause of a cliff states the cliff)
        "Why does acceptance collapse past draft position 1 with the FP8 head?",
        # (the shares alone: the first position high, one of the next three dead)
        "On our traffic per-position acceptance is 88% at position 0 and 2% at position 2.",
        # (the positions past one named by its ordinal: fixtures/world/357, and a variant)
        "At ctx=128 the mean accepted length is 1.2549 at depth 3 and exactly 1.2549 at 4, 5 "
        "and 6 \u2014 proposals past the third are never accepted.",
        "Acceptance collapses after the second draft token with the FP8 head.",
        # (a plain fall of the later positions, read where a setting causes it)
        "When enforce_eager=False is set, the acceptance rate of the second and third tokens "
        "will decrease.",
    ],
)
def test_a_cliff_in_words_is_read(text: str) -> None:
    assert _cliffs(text), text


@pytest.mark.parametrize(
    "text",
    [
        # the curve every drafter has: a fall along the positions, in general or as expected
        "Acceptance naturally decreases for later draft positions.",
        "As expected, the acceptance rate of the second and third tokens is lower than the first.",
        "Per-position acceptance falls off front to back (e.g. 0.99/0.98/0.95).",
        "Per-position acceptance falls off front to back (e.g. 0.99/0.98/0.95/0.87/0.81 at the "
        "91.8% window vs 0.66/0.37/0.22/0.13/0.08 at the 29.4% window) \u2014 later draft "
        "positions hurt most on hard stretches.",
        # a collapse inside a condition is a rule
        "That is the LENGTH=1 signature only when later draft positions also collapse to the "
        "same ~1.00 ratio.",
        "The first drafted token is accepted four times out of five, the second only two "
        "times out of three.",
        "Position 2 acceptance is 45%, position 3 is 38%.",
        "Position 3 dropped from 41% to 38% after the update.",
        # shares of a steady decay, or a dead tail far out in a long draft
        "Per-position acceptance is 80% at position 0 and 45% at position 2.",
        "Per-position acceptance is 80% at position 0 and 2% at position 9.",
        "the rate falls because later draft positions are speculative guesses, but the early "
        "positions are nearly certain.",
        # a level or a fall to a level a drafter keeps, under a setting: the usual curve
        "When using k=3, the acceptance rate of the third token is lower.",
        "With num_speculative_tokens=3 set, the acceptance of the third token drops to 40%.",
        # a hypothesis, a forecast, a question, a negation, a paper's, advice
        "If the head was not trained for multi-step, acceptance collapses past position 1.",
        "We expect the third token's acceptance to collapse.",
        "Does per-position acceptance collapse after position 0 for you?",
        "With this fix, acceptance no longer collapses past draft position 1.",
        "The acceptance of the second token does not collapse with the new head.",
        "The paper reports that acceptance collapses after position 2.",
        "Increasing K can waste compute if later draft positions are rarely accepted.",
        "Higher K values would only make this worse, and acceptance rate drops at later positions.",
        # a depth or a recipe's step is no position; a collapse to a level a drafter keeps
        "depths 2-3 collapse to ~44-62% acceptance and pay the over-draft cost on every forward",
        "Step 3: acceptance collapses when the prompt is short.",
        # an ordinal of something else than the draft, and a hypothesis about the proposals
        "Acceptance collapsed after the third day of traffic.",
        "If proposals past the third are never accepted, depth 4 is wasted.",
        # the first position alone is low acceptance, not a cliff
        "MTP acceptance collapses at position 0 on this checkpoint.",
        # a collapse said to be over
        "The new release shows the recovery, acceptance back up with non-zero positions out "
        "to pos 14, i.e. the cliff is gone.",
        # a later position's healthy share, and the usual fall, in Chinese
        "根据评估\uff0c第二个Token预测的接受率在85%到95%之间。",
        "但第n个草稿token的接受率通常逐级下降。",
        "DS v3 MTP预测第三个token的接受率还可以\uff1b",
    ],
)
def test_no_cliff_where_positions_are_named_without_one(text: str) -> None:
    assert not _cliffs(text), text


@pytest.mark.parametrize(
    "text",
    [
        "Per-position acceptance dies after the first token on our traffic.",
        "With the V2 runner, acceptance past draft position 1 is destroyed.",
    ],
)
def test_a_line_with_only_the_words_of_a_break_reaches_the_reader(text: str) -> None:
    # (no trigger word of the other readers: 'dies', 'destroyed' bring the line)
    rows = parse_text(text + "\n").tables.get("spec_decode", [])
    assert [json.loads(r["extra"])["claim"] for r in rows] == ["cliff"]


def test_a_cliff_is_kept_with_the_words_and_no_rate_made_up() -> None:
    rows = parse_text(
        "With `num_speculative_tokens > 1`, per-position acceptance collapses after "
        "position 0 (e.g. position 2 ≈ 10%).\n"
    ).tables["spec_decode"]
    assert len(rows) == 1
    row = rows[0]
    assert row["format"] == "stated_claims_acceptance" and row["partial"]
    # no overall rate, length or count: the claim is of a position, not of the run
    for column in ("reported_rate", "acceptance_rate", "mean_acceptance_length", "drafts"):
        assert row.get(column) is None, column
    said = json.loads(row["extra"])
    assert said["claim"] == "cliff"
    assert said["rate_at_position"] == pytest.approx(0.10)  # ('position 2 ≈ 10%', as stated)
    assert said["stated"].startswith("per-position acceptance collapses after position 0")


def _findings(paths: list[Path], tmp_path: Path) -> list[specscope.Finding]:
    store = tmp_path / "store"
    specscope.ingest(paths, store=store, year=2026)
    return list(specscope.detect(specscope.open_store(store)))


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("188_", "collapses past draft position 1"),
        ("251_", "the acceptance rate of the second and third tokens will decrease"),
        ("270_", "第三个token的接受率基本为0"),
        ("271_", "per-position acceptance collapses after position 0"),
    ],
)
def test_a_stated_cliff_is_a_suggestive_position_cliff(
    case: str, words: str, tmp_path: Path
) -> None:
    (path,) = WORLD.glob(f"{case}*.log")
    found = _findings([path], tmp_path)
    cliffs = [f for f in found if f.kind == "position_cliff"]
    assert len(cliffs) == 1, [f.kind for f in found]
    assert cliffs[0].confidence is not None and cliffs[0].confidence.level == "suggestive"
    assert words in cliffs[0].explanation
    # the word of a cliff blames nothing else (no low acceptance made of it)
    assert not {f.kind for f in found} & {"low_acceptance", "zero_acceptance", "k_too_large"}


def test_counts_decide_where_the_paste_has_them(tmp_path: Path) -> None:
    # The author's words beside vLLM's per-position counts of a healthy curve: the counts
    # are judged, the words left out (one claim, one record).
    paste = tmp_path / "paste.log"
    paste.write_text(
        "INFO 05-02 10:00:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: "
        "2.40, Accepted throughput: 10.00 tokens/s, Drafted throughput: 15.00 tokens/s, "
        "Accepted: 1680 tokens, Drafted: 2100 tokens, Per-position acceptance rate: 0.800, "
        "0.600, 0.400, Avg Draft acceptance rate: 80.0%\n"
        "Per-position acceptance collapses after position 0 on this build.\n",
        encoding="utf-8",
    )
    found = _findings([paste], tmp_path)
    assert "position_cliff" not in {f.kind for f in found}


def test_low_acceptance_in_words_beside_a_cliff_in_words(tmp_path: Path) -> None:
    # Two claims of one paste: neither shadows the other (each its own column).
    paste = tmp_path / "paste.log"
    paste.write_text(
        "With the int4 checkpoint the acceptance rate is very low.\n"
        "The second draft token is almost never accepted with the int4 head.\n",
        encoding="utf-8",
    )
    kinds = {f.kind for f in _findings([paste], tmp_path)}
    assert {"low_acceptance", "position_cliff"} <= kinds
