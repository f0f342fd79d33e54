"""llama.cpp's llama-speculative summary (parsers/llamacpp_speculative_summary.toml): the
counts as printed, the decode speed as a bench row with speculation on, and nothing from a
summary that lacks a count."""

from __future__ import annotations

from pathlib import Path

from specscope.logs.parser import parse_text

WORLD = Path(__file__).resolve().parent.parent / "fixtures" / "world"
FORMAT = "llamacpp_speculative_summary"


def _summary(drafted: int, accepted: int, speed: float) -> str:
    rate = 100.0 * accepted / drafted
    return (
        f"encoded   12 tokens in    0.514 seconds, speed:   23.325 t/s\n"
        f"decoded  371 tokens in   34.412 seconds, speed: {speed:8.3f} t/s\n\n"
        f"n_draft   = 16\nn_predict = 371\nn_drafted = {drafted}\n"
        f"n_accept  = {accepted}\naccept    = {rate:.3f}%\n"
    )


def test_world_paste_gives_its_counts_and_speed() -> None:
    result = parse_text((WORLD / "201_llamacpp_speculative_3060_72pct_healthy.log").read_text())
    (spec,) = result.tables["spec_decode"]
    (bench,) = result.tables["bench"]
    assert (spec["accepted_tokens"], spec["draft_tokens"]) == (526, 730)
    assert spec.get("k") is None and spec.get("drafts") is None  # n_draft is no k
    assert bench["speculative"] is True
    assert bench["output_throughput"] == 55.473
    assert bench["total_generated_tokens"] == 673


def test_two_summaries_are_two_runs() -> None:
    text = _summary(912, 313, 10.781) + "\nand with a smaller draft:\n\n" + _summary(400, 300, 20.5)
    result = parse_text(text)
    rows = result.tables["spec_decode"]
    assert [(r["accepted_tokens"], r["draft_tokens"]) for r in rows] == [(313, 912), (300, 400)]
    assert len({r["_run"] for r in rows}) == 2
    speeds = [b["output_throughput"] for b in result.tables["bench"]]
    assert speeds == [10.781, 20.5]


def test_summary_without_the_drafted_count_is_skipped_with_its_line() -> None:
    # examples/lookahead prints n_accept without a drafted count: no record, and no bench row
    # (its speed would read as a baseline without speculation).
    text = (
        "encoded   12 tokens in    0.514 seconds, speed:   23.325 t/s\n"
        "decoded  371 tokens in   20.100 seconds, speed:   18.458 t/s\n\n"
        "W = 15\nN = 5\nG = 15\n\nn_predict = 371\nn_accept  = 160\n"
    )
    result = parse_text(text)
    assert not result.tables.get("spec_decode") and not result.tables.get("bench")
    (skip,) = result.skipped
    assert skip.line == 1 and "n_drafted" in skip.reason


def test_an_unreadable_count_is_a_problem_not_a_number() -> None:
    text = _summary(912, 313, 10.781).replace("n_accept  = 313", "n_accept  = 3.5")
    result = parse_text(text)
    assert not result.tables.get("spec_decode")
    assert any("n_accept" in s.reason for s in result.skipped)
