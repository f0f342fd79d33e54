"""A caption that names a baseline opens a block of tables (parsers/
stated_speedup_tables_joined.toml): where the baseline's table and speculation's join, the
comparison is one bench row; where they join nowhere, the lines are read again as they would
have been without the caption, so nothing under it is lost."""

from __future__ import annotations

import json

from specscope.logs.parser import parse_text

_BASE = """The base model speed:

bs | throughput
-- | --
1 | 222.47
4 | 566.21
"""


def test_tables_that_join_make_one_comparison() -> None:
    text = (
        _BASE
        + """
EAGLE3:

bs | steps | throughput
-- | -- | --
1 | 3 | 207.62
4 | 3 | 447.90
"""
    )
    bench = parse_text(text).tables.get("bench", [])
    assert [r["format"] for r in bench] == ["stated_speedup_tables_joined"]
    extra = json.loads(bench[0]["extra"])
    assert bench[0]["output_throughput"] == 447.9
    assert extra["baseline"] == 566.21
    # The rows differ in k alone: a sweep, each pair with its k.
    assert [p.get("k") for p in extra["rows"]] == [3, 3]
    assert extra["stated"] == "4 | 3 | 447.90"


def test_a_table_of_counts_under_the_caption_is_still_read() -> None:
    text = "Baseline vs EAGLE:\n\n| Variant | Acceptance | Accepted / Drafted |\n"
    text += "|---|---|---|\n| EAGLE-3 | 61.3% | 613 / 1000 |\n"
    result = parse_text(text)
    spec = result.tables.get("spec_decode", [])
    assert [(r["line"], r["accepted_tokens"], r["draft_tokens"]) for r in spec] == [(5, 613, 1000)]
    assert not result.tables.get("bench")


def test_tables_of_other_conditions_join_nowhere() -> None:
    text = (
        _BASE
        + """
EAGLE3 by context:

context | steps | throughput
-- | -- | --
4K | 3 | 150.1
"""
    )
    assert not parse_text(text).tables.get("bench")


def test_a_caption_that_borrows_its_baseline_names_none() -> None:
    text = _BASE.replace("The base model speed:", "Expected baseline speed (paper):")
    text += "\nEAGLE3:\n\nbs | steps | throughput\n-- | -- | --\n1 | 3 | 150.0\n"
    assert not parse_text(text).tables.get("bench")
