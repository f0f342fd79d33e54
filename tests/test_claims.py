"""The sentence-level claim reader (specscope/logs/claims.py, parsers/stated_claims*.toml):
hedges, questions and quotes scoped to their clause, conditions kept, negation, the
numbers bound to their side, and linear time on long lines. Generated variants of each
predicate, as different authors word it, beside the definitions' real samples."""

from __future__ import annotations

import time

import pytest

from specscope.logs.claims import lexicon, read_claims, sentences
from specscope.logs.definitions import load_definitions
from specscope.logs.parser import parse_text

LEX = lexicon(load_definitions())


def _kinds(text: str) -> list[str]:
    assert LEX is not None
    return [c.kind for c in read_claims(LEX, text)]


def test_sentences_end_at_a_full_stop_that_is_no_decimal_point() -> None:
    got = sentences("accuracy can reach 0.8. However, vllm0.25.1 is slower; is it? yes")
    assert [s for s, _ in got] == [
        "accuracy can reach 0.8",
        "However, vllm0.25.1 is slower",
        "is it",
        "yes",
    ]
    assert [m for _, m in got] == [".", ";", "?", ""]


@pytest.mark.parametrize(
    "text",
    [
        "I found that EAGLE slows down a lot compared to the baseline.",
        "we measured MTP as slower than without it on the H20",
        "In my runs the draft model made decoding slower.",
        "With n-gram on, our throughput dropped.",
        "the throughput decreased compared to when no draft model is used",
        "I see TPOT went up with speculative decoding compared to no-spec",
        "Honestly DFlash brought no speedup for us.",
        "It works, but I'm seeing a slowdown with the drafter.",
        # (the only speed stated is the baseline's: no pair, the word stands; world 343)
        "decode is *slower* than with no speculation at all (61 tok/s baseline on this box).",
        "With MTP, generation is slower than without it (61 tok/s without MTP).",
    ],
)
def test_a_slowdown_in_words_is_read(text: str) -> None:
    assert _kinds(text) == ["slower"]


@pytest.mark.parametrize(
    "text",
    [
        # questions, hedges, forecasts, quotes
        "Is EAGLE slower than the baseline for you?",
        "I think MTP might be slower than without it at batch 64.",
        "We expect the draft model to slow down decoding at high batch.",
        "The paper reports that speculative decoding is slower at batch 64.",
        "I wonder whether the drafter slows down generation.",
        # negation
        "MTP is not slower than plain decoding in my tests.",
        "We no longer see EAGLE slow down decoding.",
        "MTP doesn't hurt our throughput.",
        # another measure, another method, another cause
        "I found prefill throughput dropped with MTP on.",
        "I found EAGLE-3 is slower than EAGLE-2 here.",
        "Our throughput decreased compared to yesterday.",
        "If acceptance is low, MTP can be slower than not using it.",
        # a speed of either side, or a ratio, bound to no side: the numbered shapes' to read
        "MTP is slower than without it, 45 tok/s vs 61 tok/s baseline.",
        "MTP is slower than without it at 45 tok/s (61 tok/s baseline).",
        # a rule, not an observation
        "By default a request stops speculating once its cycles measure slower than plain decode.",
    ],
)
def test_what_is_no_claim_of_the_authors_run_is_not_read_as_one(text: str) -> None:
    assert "slower" not in _kinds(text)


def test_a_hedge_belongs_to_its_clause() -> None:
    # the guess in one sentence leaves the observation in the other alone
    text = "I found MTP slower than without it, but maybe it's my GPU."
    assert _kinds(text) == ["slower"]
    assert _kinds("Maybe MTP is slower than without it, I am not sure.") == []


def test_a_condition_on_a_setting_is_kept_with_its_claim() -> None:
    assert LEX is not None
    (claim,) = read_claims(
        LEX, "If NUM_PARALLEL is larger than one, I found eagle slows down vs the baseline."
    )
    assert claim.condition == "If NUM_PARALLEL is larger than one"
    assert claim.concurrency
    (zero,) = read_claims(LEX, "when VLLM_USE_V2=1 is set, the acceptance rate will be ~0%")
    assert (zero.kind, zero.spec, zero.condition) == ("zero", 0.0, "when VLLM_USE_V2=1 is set")
    # a high batch is no collapse at two requests
    (high,) = read_claims(LEX, "We found MTP slower than without it when batch size > 32.")
    assert high.condition == "when batch size > 32" and not high.concurrency
    # a forecast under a condition on a state is no observation
    assert _kinds("If the draft is bad, the acceptance rate will be close to 0%.") == []


@pytest.mark.parametrize(
    ("text", "spec", "base"),
    [
        ("i'm getting about 16 t/s knowing that base is 22.5 t/s", 16.0, 22.5),
        ("Without spec decoding we get 42 tok/s, with it only 30 tok/s", 30.0, 42.0),
        ("I get 12 tokens/s with the drafter vs 20 tokens/s baseline", 12.0, 20.0),
    ],
)
def test_rates_are_bound_to_their_side(text: str, spec: float, base: float) -> None:
    assert LEX is not None
    (claim,) = read_claims(LEX, text)
    assert (claim.kind, claim.spec, claim.base) == ("comparison", spec, base)


def test_a_faster_rate_against_the_base_is_positive() -> None:
    assert _kinds("I'm getting about 30 t/s knowing that base is 22.5 t/s") == ["faster"]
    rows = parse_text("I'm getting about 30 t/s knowing that base is 22.5 t/s").tables
    assert rows.get("bench", []) == []  # positive: read, kept nowhere


def test_a_length_before_a_fix_is_the_state_reported() -> None:
    assert LEX is not None
    (claim,) = read_claims(LEX, "After the fix, accepted tokens went from 1.3 to 2.1 at k=3.")
    assert (claim.kind, claim.spec, claim.k) == ("length", 1.3, 3)
    assert _kinds("The paper reports the acceptance length improved from 1.4 to 1.8.") == []


def test_the_line_another_definition_read_keeps_its_record_alone() -> None:
    rows = parse_text("MTP hurts throughput at high concurrency.").tables["bench"]
    assert [r["format"] for r in rows] == ["stated_speedup_words"]


def test_a_slowdown_whose_subject_is_what_the_colon_introduces() -> None:
    text = "It runs, but I'm noticing somewhat of a slowdown:\n\n`./llama-speculative -md d.gguf`"
    rows = parse_text(text).tables.get("bench", [])
    assert [r["format"] for r in rows] == ["stated_claims"]
    # and without speculation named after it, nothing
    assert parse_text("It runs, but I'm noticing a slowdown:\n\nsee below").tables == {}


def _seconds(text: str) -> float:
    assert LEX is not None
    start = time.monotonic()
    read_claims(LEX, text)
    return time.monotonic() - start


@pytest.mark.parametrize(
    "unit",
    [
        "I found MTP slower than without it, ",
        "if NUM_PARALLEL > 1, ",
        "from 1.4 to 1.8 accepted tokens ",
        "16 t/s base is 22.5 t/s ",
        "no no no not ",
        "EAGLE. ",
    ],
)
def test_a_long_line_of_a_repeated_claim_reads_in_linear_time(unit: str) -> None:
    # Four times the line, about four times the time (quadratic work would be sixteen).
    n = 12_000 // len(unit)
    small, large = _seconds(unit * n), _seconds(unit * 4 * n)
    assert large < 10 * small + 0.5
