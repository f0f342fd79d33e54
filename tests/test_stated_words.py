"""An author's verdict on speed in words or as a ratio, with no two throughputs to compare
(parsers/stated_speedup_words.toml, parsers/stated_speedup_ratio.toml): a claim, judged by
no_speedup as the author's word, suggestive; the condition after it kept in its words;
hedges, questions, others' figures, negations and prefill refused."""

from __future__ import annotations

import time

import pytest

from specscope.logs.parser import parse_text

from .helpers import findings_of_paste

# fixtures/world/214 (nibor1896/Crow #29): a stated acceptance between the subject and the
# verdict; both are records, and the good acceptance is no blame.
CROW = (
    "## The draft-model half, measured. A working drafter at 85.09 % acceptance buys "
    "nothing here, and the reason is not the acceptance rate.\n"
)
# fixtures/world/203 (sgl-project/sglang #4543): tested with and without, a condition after.
NEXTN = " On 2*H20, I tested serving w/wo mtp, throughput will be down when batch size >32\n"


def _claims(text: str) -> list[dict]:
    rows = parse_text(text).tables.get("bench", [])
    return [r for r in rows if r.get("format") in ("stated_speedup_words", "stated_speedup_ratio")]


def test_a_verdict_in_words_is_a_suggestive_no_speedup_quoting_the_author(tmp_path) -> None:
    found = findings_of_paste(tmp_path, CROW)
    (slow,) = [f for f in found if f.kind == "no_speedup"]
    assert slow.measured == {"stated": "slower"}
    assert "buys nothing here" in slow.explanation
    assert slow.confidence is not None and slow.confidence.level == "suggestive"
    assert not {"low_acceptance", "zero_acceptance"} & {f.kind for f in found}
    spec = parse_text(CROW).tables.get("spec_decode", [])
    assert [r.get("format") for r in spec] == ["stated_acceptance"]  # not hidden by the verdict


def test_the_condition_after_a_verdict_stays_in_its_words(tmp_path) -> None:
    (slow,) = [f for f in findings_of_paste(tmp_path, NEXTN) if f.kind == "no_speedup"]
    assert "throughput will be down when batch size >32" in slow.explanation


@pytest.mark.parametrize(
    ("line", "speedup"),
    [
        (
            "for the final output token throughput, the performance with MTP is approximately "
            "70% of without it.",
            0.70,
        ),
        (
            "What differs between hosts is what that acceptance buys: M5 Max turns 35% into a "
            "**1.72×** speedup, GB10 into a **0.52×** regression, because the verify runs as K "
            "narrow passes.",
            0.52,
        ),
        ("MTP is 20% slower than plain decoding.", 0.80),
        ("decode \u221223% with DSpark on the GB10.", 0.77),
    ],
)
def test_a_ratio_is_a_slowdown_by_its_value(tmp_path, line: str, speedup: float) -> None:
    (slow,) = [f for f in findings_of_paste(tmp_path, line + "\n") if f.kind == "no_speedup"]
    assert slow.measured["speedup"] == pytest.approx(speedup)
    assert f"{speedup:.2f}x its speed" in slow.explanation


@pytest.mark.parametrize(
    "line",
    [
        "MTP might be slower than not using it?",
        "Speculative decoding should be no faster than plain decoding at batch 256.",
        "We expected a 0.9x speedup with MTP at high batch.",
        "The paper reports that EAGLE lags behind the baseline at batch 64.",
        "MTP is no longer slower than plain decoding.",
        "MTP is not slower than running without it.",
        "Prefill throughput with MTP is 70% of without it.",
        "With MTP the decode throughput is about 96% of the no-spec baseline.",
        "The throughput falls short of the baseline.",  # speculation never named
        "EAGLE-3 gives no speedup over EAGLE-2.",  # two methods, not speculation against none
    ],
)
def test_what_a_careful_reader_takes_for_no_claim_is_no_record(line: str) -> None:
    assert _claims(line + "\n") == []


def test_a_verdict_does_not_make_a_line_read_as_wrapped_into_the_next() -> None:
    # A rate short of the baseline, speculation named only on the next line: two lines,
    # no claim (a look ahead across the break would join them).
    text = "The throughput falls short of the baseline.\nMTP doesn't hurt throughput.\n"
    assert _claims(text) == []


_UNITS = [
    "MTP at 85.09 % acceptance ",
    "Eagle. throughput fall short of the baseline ",
    "MTP buys nothing. ",
    "w/wo mtp, throughput will be down when ",
    "0.52× regression ",
    "with MTP the throughput is 70% of ",
    "EAGLE was ~15% slower than without it at batch 128, ",
    "drafter a",
    "no. ",
]


def _seconds(text: str) -> float:
    # CPU seconds: what the parse costs, not what other processes on a loaded machine
    # took from it (CI's wall clock ran 11 s against 8.5 for the same work).
    start = time.process_time()
    parse_text(text)
    return time.process_time() - start


@pytest.mark.parametrize("unit", _UNITS)
def test_a_line_of_a_repeated_verdict_reads_in_linear_time(unit: str) -> None:
    # Four times the line, about four times the time (a shape that backtracks grows with
    # the square: sixteen); small lines, so that a slow constant costs CI no minutes, and
    # room for a loaded machine's noise.
    n = 12_000 // len(unit.encode())
    small, large = _seconds(unit * n), _seconds(unit * 4 * n)
    assert large < 10 * small + 1.0
