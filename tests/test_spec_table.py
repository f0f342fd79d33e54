"""An author's markdown table of spec-decode counts (parsers/spec_decode_table.toml): one
record a row with counts, on the row's line, each row a run of its own; rates alone or
counts that cannot be (more accepted than drafted) make no record."""

from __future__ import annotations

import json

from specscope.logs.definitions import load_definitions
from specscope.logs.parser import parse_text

TABLE = next(d for d in load_definitions() if d.name == "spec_decode_table")
KEYS = next(d for d in load_definitions() if d.name == "bench_result_json_keys")


def _rows(text: str) -> list[dict]:
    return [r for r in parse_text(text).tables.get("spec_decode", []) if r["format"] == TABLE.name]


def test_tables_without_counts_and_keys_in_prose_give_no_record() -> None:
    # (tests/test_definitions checks only the samples that give records)
    for defn in (TABLE, KEYS):
        negatives = [s for s in defn.samples if not s.records]
        assert negatives
        for sample in negatives:
            assert parse_text(sample.text).tables.get("spec_decode", []) == []


def test_result_keys_pasted_as_bullets_read_as_the_document() -> None:
    keys = (
        '- "spec_decode_num_drafts": 100\n'
        '- "spec_decode_draft_tokens": **300**\n'
        '- "spec_decode_accepted_tokens": 30\n'
        '- "spec_decode_per_position_acceptance_rates": [0.2, 0.07, 0.03]\n'
    )
    (row,) = parse_text("Results:\n" + keys).tables["spec_decode"]
    assert (row["line"], row["end_line"], row["k"]) == (2, 5, 3)
    assert row["acceptance_rate"] == 0.1
    assert row["accepted_per_pos"] == [20, 7, 3]
    assert not row.get("partial")


def test_each_row_is_a_run_on_its_own_line_with_its_label() -> None:
    text = (
        "Results:\n\n"
        "| Arm | Accepted / Drafted | Acceptance |\n"
        "|---|---:|---:|\n"
        "| greedy | 10 / 400 | 2.5% |\n"
        "| sampled | 300 / 400 | 75% |\n"
    )
    result = parse_text(text)
    rows = _rows(text)
    assert [r["line"] for r in rows] == [5, 6]
    assert [json.loads(r["extra"])["row"] for r in rows] == ["greedy", "sampled"]
    assert rows[0]["_run"] != rows[1]["_run"]
    assert len(result.runs) == 2
    assert rows[0]["acceptance_rate"] == 0.025


def test_counts_that_cannot_be_or_are_missing_make_no_record() -> None:
    text = (
        "| Arm | Accepted / Drafted |\n"
        "|---|---|\n"
        "| no spec | - |\n"
        "| broken | 500 / 400 |\n"
        "| MTP | 1,200 / 2,000 |\n"
    )
    rows = _rows(text)
    assert [(r["accepted_tokens"], r["draft_tokens"]) for r in rows] == [(1200, 2000)]
    assert rows[0]["line"] == 5


# A table's header can open more than one definition's block: the counts go to spec_decode
# and the throughput comparison to bench, each read by its own definition; a table of rates
# is still read as the comparison it holds, though spec_decode_table opens it first.
ARMS = """| arm | {acceptance} | decode tok/s |
|---|---|---|
| no spec | - | 90 |
| MTP k=3 | {mtp} | 61 |
"""


def test_a_table_of_counts_and_a_comparison_gives_both() -> None:
    tables = parse_text(ARMS.format(acceptance="accepted / drafted", mtp="1393 / 13548")).tables
    (spec,) = tables["spec_decode"]
    assert (spec["accepted_tokens"], spec["draft_tokens"], spec["line"]) == (1393, 13548, 4)
    (bench,) = tables["bench"]
    assert bench["format"] == "stated_speedup_table" and bench["output_throughput"] == 61.0
    assert json.loads(bench["extra"])["baseline"] == 90.0


def test_a_table_of_rates_is_still_the_comparison_it_holds() -> None:
    tables = parse_text(ARMS.format(acceptance="accept rate", mtp="35.8%")).tables
    (spec,) = tables["spec_decode"]  # the rate as printed, partial: no counts made up
    assert spec["reported_rate"] == 0.358 and spec["partial"]
    assert spec.get("accepted_tokens") is None and spec.get("draft_tokens") is None
    (bench,) = tables["bench"]
    assert bench["format"] == "stated_speedup_table" and bench["output_throughput"] == 61.0


def test_counts_in_the_rate_cells_are_read() -> None:
    tables = parse_text(ARMS.format(acceptance="Draft acceptance", mtp="**4.2%** (17/402)")).tables
    (spec,) = tables["spec_decode"]
    assert (spec["accepted_tokens"], spec["draft_tokens"]) == (17, 402)
