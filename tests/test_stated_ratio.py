"""A time or rate an author states as a multiple of the baseline without speculation
(parsers/stated_speedup_ratio.toml), and an acceptance rate as a bullet of its own
(parsers/stated_acceptance_bullets.toml): fixtures/world/190's two bullets."""

from __future__ import annotations

import pytest

from specscope.logs.parser import parse_text

from .helpers import findings_of_paste

PARO = """On oMLX 0.3.9.dev2 (M1 Max) without overriding `mtp_enabled`:
- MTP path engages because config declares an MTP layer.
- Accept rate: 0%.
- Decode wall ~1.5× the no-MTP baseline (the MTP head is still computed)...
"""


def test_a_longer_wall_than_the_baseline_is_a_stated_slowdown_by_its_ratio(tmp_path) -> None:
    found = findings_of_paste(tmp_path, PARO)
    (slow,) = [f for f in found if f.kind == "no_speedup"]
    assert slow.lines == (4, 4)
    assert slow.measured["speedup"] == pytest.approx(1 / 1.5, abs=1e-3)
    assert "0.67x its speed" in slow.explanation
    assert "zero_acceptance" in {f.kind for f in found}  # 'Accept rate: 0%.'


@pytest.mark.parametrize(
    "line",
    [
        "- Decode wall ~0.7× the no-MTP baseline.",  # faster
        "- Decode wall ~1.02× the no-MTP baseline.",  # within noise
        "- Decode throughput ~1.8× the no-MTP baseline.",  # a rate, higher
        "- Decode wall ~1.5× the baseline.",  # names nothing off
        "- The decode wall could be ~1.5× the no-MTP baseline.",  # a possibility
    ],
)
def test_no_slowdown_or_no_claim_is_no_record(line: str) -> None:
    assert parse_text(line + "\n").tables.get("bench", []) == []
