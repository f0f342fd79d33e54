"""Per-position rates as a table's columns (parsers/spec_decode_table.toml, ``position``):
the header wordings authors use, the target's token at 1.00 dropped, 0-based labels kept
as the first position when they are no bonus, and columns that only look like positions
(percentiles) read as none."""

from __future__ import annotations

from specscope.logs.parser import parse_text


def _rows(text: str) -> list[dict]:
    return [
        r
        for r in parse_text(text).tables.get("spec_decode", [])
        if r["format"] == "spec_decode_table"
    ]


def test_short_labels_p1_and_hash() -> None:
    text = (
        "| setup | p1 | p2 | p3 | accept len |\n"
        "|---|---|---|---|---|\n"
        "| fp16 | 0.81 | 0.62 | 0.44 | 2.87 |\n"
        "\n"
        "| run | #1 | #2 | acc len |\n"
        "|---|---|---|---|\n"
        "| a | 71% | 40% | 2.11 |\n"
    )
    first, second = _rows(text)
    assert first["per_position_rate"] == [0.81, 0.62, 0.44] and first["k"] == 3
    assert first["mean_acceptance_length"] == 2.87 and first["partial"]
    assert second["per_position_rate"] == [0.71, 0.40] and second["k"] == 2


def test_a_first_position_at_index_0_that_is_no_bonus_is_kept() -> None:
    text = (
        "| backend | token 0 | token 1 | token 2 | accept length |\n"
        "|---|---|---|---|---|\n"
        "| a | 0.90 | 0.70 | 0.50 | 3.10 |\n"
        "| b | 1.00 | 0.80 | 0.60 | 3.40 |\n"
    )
    a, b = _rows(text)
    assert a["per_position_rate"] == [0.9, 0.7, 0.5]
    assert b["per_position_rate"] == [1.0, 0.8, 0.6]


def test_percentiles_are_no_positions() -> None:
    text = (
        "| model | p50 | p90 | p99 | accept rate |\n"
        "|---|---|---|---|---|\n"
        "| eagle3 | 0.9 | 0.8 | 0.7 | 61% |\n"
    )
    [row] = _rows(text)
    assert row.get("per_position_rate") is None
    assert row["reported_rate"] == 0.61
