"""A cliff seen against a sibling (analysis/detectors/sibling_cliff.py): two sides of one
paste whose per-position curves agree up to a position and part there. The table of world
case 257 (positions as columns, rates without counts), the same break with counts in V1
lines, and a side weaker from the first position on, which is a lower curve, not a break."""

from __future__ import annotations

from pathlib import Path

import specscope
from tests.test_sibling_runs import _findings, _restarts

WORLD = Path(__file__).resolve().parent.parent / "fixtures" / "world"


def _kinds(findings: list[specscope.Finding]) -> set[str]:
    return {f.kind for f in findings}


def test_the_backend_table_of_world_257_breaks_at_position_2(tmp_path: Path) -> None:
    text = WORLD / "257_sglang_dsv4_mtp_unified_kv_triton_position_table_token2_collapse.log"
    findings = _findings(tmp_path, text.read_text(encoding="utf-8"))
    [cliff] = [f for f in findings if f.kind == "position_cliff"]
    assert cliff.measured["position"] == 2
    assert cliff.measured["a_position"] == 0.223
    assert "unified_kv_triton (before)" in cliff.explanation and "'triton'" in cliff.explanation
    assert cliff.confidence is not None and cliff.confidence.level == "suggestive"
    # The break is what its lower acceptance is: no second blame for the same side.
    assert "low_acceptance" not in _kinds(findings)


def test_counted_sides_that_part_at_position_2_are_a_certain_cliff(tmp_path: Path) -> None:
    findings = _findings(tmp_path, _restarts([0.9, 0.8, 0.7], [0.88, 0.2, 0.05]))
    [cliff] = [f for f in findings if f.kind == "position_cliff"]
    assert cliff.measured["position"] == 2
    assert cliff.confidence is not None and cliff.confidence.level == "certain"
    assert "low_acceptance" not in _kinds(findings)


def test_a_side_weaker_from_the_first_position_is_low_not_a_cliff(tmp_path: Path) -> None:
    """A drafter fed other hidden states than it was trained on is weaker at every
    position, the first too: its later conditionals may fall short of the sibling's as
    well, but the chain was apart from the start, so the side is low, not broken at i."""
    findings = _findings(tmp_path, _restarts([0.9, 0.8, 0.7], [0.4, 0.1, 0.02]))
    kinds = _kinds(findings)
    assert "position_cliff" not in kinds
    assert "low_acceptance" in kinds


def test_curves_that_decline_alike_are_no_cliff(tmp_path: Path) -> None:
    findings = _findings(tmp_path, _restarts([0.9, 0.8, 0.7], [0.85, 0.7, 0.55]))
    assert "position_cliff" not in _kinds(findings)
