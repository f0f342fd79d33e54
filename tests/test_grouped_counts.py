"""Counts grouped in thousands ('63,669', f"{n:,}"; '63_669'; a thin space) read as the
count wherever a count label is read (issue 16): a server line, a V0 line, the offline
example's summary, a benchmark block; and the bulk reader (whose plain shapes take digits
only) leaves such a line to the line parser, which reads it the same."""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope
from specscope.logs.definitions import FieldSpec
from specscope.logs.fields import convert
from tests.test_bulk import _same

COUNT = FieldSpec(label="n", column="n", type="int")
RATE = FieldSpec(label="r", column="r", type="float")


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("63,669", 63669),
        ("63,669.", 63669),  # the end of a V0 line
        ("63,669 tokens", 63669),
        ("1,234,567", 1234567),
        ("63_669", 63669),
        ("63\u202f669", 63669),
        ("63\u00a0669 tokens", 63669),
        ("4960", 4960),
    ],
)
def test_a_grouped_count_reads_whole(raw: str, want: int) -> None:
    assert convert(COUNT, raw) == want


@pytest.mark.parametrize("raw", ["1,23", "1,2345", "1,234,56", "63,669.5", "1,234_567"])
def test_what_is_not_grouped_in_threes_is_not_taken_for_a_count(raw: str) -> None:
    """Groups other than three digits, a decimal part or mixed separators: not a grouped
    count (read as before, up to the first separator)."""
    assert convert(COUNT, raw) == int(raw[: next(i for i, c in enumerate(raw) if not c.isdigit())])


def test_a_rate_keeps_its_comma() -> None:
    """In a rate a comma may be a decimal comma: only counts are ungrouped."""
    assert convert(RATE, "1,500") == 1.0


def _spec(text: str) -> list[dict]:
    return specscope.parse_text(text).tables.get("spec_decode", [])


def test_v0_line_with_grouped_counts() -> None:
    line = (
        "INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.642, "
        "System efficiency: 0.598, Number of speculative tokens: 3, Number of accepted tokens: "
        "63,669, Number of draft tokens: 99,174, Number of emitted tokens: 79,121."
    )
    (row,) = _spec(line)
    assert (row["accepted_tokens"], row["draft_tokens"], row["k"]) == (63669, 99174, 3)
    assert row["drafts"] == 33058


def test_offline_summary_with_grouped_counts() -> None:
    """The offline example's summary as an author pastes it with f"{n:,}" counts."""
    text = "\n".join(
        [
            "-" * 50,
            "total_num_output_tokens: 105,376",
            "num_drafts: 29,930",
            "num_draft_tokens: 89,790",
            "num_accepted_tokens: 63,669",
            "mean acceptance length: 3.13",
            "-" * 50,
            "acceptance at token 0: 0.85",
            "acceptance at token 1: 0.72",
            "acceptance at token 2: 0.56",
        ]
    )
    (row,) = _spec(text)
    assert (row["drafts"], row["draft_tokens"], row["accepted_tokens"]) == (29930, 89790, 63669)
    assert row["k"] == 3


def test_server_line_with_grouped_counts_reads_the_same_in_bulk(tmp_path: Path) -> None:
    head = "(APIServer pid=7) INFO 04-07 17:19:{:02d} [metrics.py:101] "
    body = (
        "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 100.00 "
        "tokens/s, Drafted throughput: 200.00 tokens/s, Accepted: {acc} tokens, Drafted: "
        "{dr} tokens, Per-position acceptance rate: 0.800, 0.700, Avg Draft acceptance rate: "
        "75.0%"
    )
    lines = [head.format(i) + body.format(acc="1500", dr="2000") for i in range(20)]
    lines[7] = head.format(7) + body.format(acc="1,500", dr="2,000")
    path = tmp_path / "grouped.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fast = _same(path, block_bytes=1024)
    spec = fast["tables"]["spec_decode"]
    assert spec["accepted_tokens"].to_list() == [1500] * 20
    assert spec["draft_tokens"].to_list() == [2000] * 20
    assert fast["bulk_rows"] > 0
