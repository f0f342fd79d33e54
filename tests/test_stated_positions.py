"""Per-position acceptance an author states in a sentence (parsers/
stated_acceptance_positions.toml): the rates as stated, k their number, no counts and no
overall rate; a sequence that rises is no per-position curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from specscope.logs.parser import parse_text

WORLD = Path(__file__).resolve().parent.parent / "fixtures" / "world"
FORMAT = "stated_acceptance_positions"


def _curves(text: str) -> list[list[float]]:
    rows = parse_text(text).tables.get("spec_decode", [])
    return [r["per_position_rate"] for r in rows if r["format"] == FORMAT]


def test_world_paste_gives_both_curves_without_counts() -> None:
    text = (WORLD / "207_mlxserve_mtp_per_index_050_022_009_prose.log").read_text()
    rows = [r for r in parse_text(text).tables["spec_decode"] if r["format"] == FORMAT]
    assert [r["per_position_rate"] for r in rows] == [[0.5, 0.22, 0.09], [0.97, 0.81, 0.63]]
    for row in rows:
        assert row["k"] == 3 and row["partial"] is True
        assert all(row.get(c) is None for c in ("accepted_per_pos", "drafts", "reported_rate"))


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("per-position acceptance: 0.9/0.9/0.7", [[0.9, 0.9, 0.7]]),  # a flat step is no rise
        ("per-position acceptance: 0.9/0.95/0.7", []),
        ("per-step acceptance rates are 80%, 60%, 45% and 30%", [[0.8, 0.6, 0.45]]),
        ("acceptance per position: p1=0.8, p2=0.61, p3=0.4", [[0.8, 0.61, 0.4]]),
        ("acceptance per position: p1=0.8, p2=0.61, p3=0.9", []),
    ],
)
def test_a_curve_never_rises(text: str, want: list[list[float]]) -> None:
    assert _curves(text) == want


def test_a_long_line_of_numbers_reads_fast() -> None:
    # Hostile input: the words, then thousands of items, with the refusing end at the tail.
    import time

    text = "per-position acceptance " + "/".join(["0.5"] * 20000) + "-0.4"
    start = time.perf_counter()
    assert _curves(text) == []
    assert time.perf_counter() - start < 10.0  # quadratic took minutes
