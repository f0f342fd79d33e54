"""A per-position curve an author states without counts (issue 207,
parsers/stated_acceptance_positions.toml): a break at one position is a cliff at
"suggestive" confidence, the author's numbers with no sample behind them; a curve that
declines steadily is none, however low (0.50/0.22/0.09 as much as the healthy 0.97/0.81/0.63
or the usual geometric decay)."""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope


def _findings(tmp_path: Path, curve: str) -> list[specscope.Finding]:
    paste = tmp_path / "paste.log"
    paste.write_text(f"At depth 3, per-index acceptance reads **{curve}** on chat traffic.\n")
    store = tmp_path / "store"
    specscope.ingest([paste], store=store, year=2026)
    assert (store / "specscope.json").exists(), "the stated curve was not read"
    return specscope.detect(specscope.open_store(store))


@pytest.mark.parametrize(
    ("curve", "position"),
    [
        ("0.92/0.88/0.04", 2),
        ("0.90/0.85/0.80/0.05/0.01", 3),
        ("91%, 86%, 3%", 2),
    ],
)
def test_a_stated_break_is_a_suggestive_cliff(tmp_path: Path, curve: str, position: int) -> None:
    cliffs = [f for f in _findings(tmp_path, curve) if f.kind == "position_cliff"]
    assert len(cliffs) == 1
    assert cliffs[0].measured["position"] == position
    assert cliffs[0].confidence is not None
    assert cliffs[0].confidence.level == "suggestive"
    assert any("as stated" in a for a in cliffs[0].confidence.assumptions)


@pytest.mark.parametrize(
    "curve",
    [
        "0.97/0.81/0.63",  # world 207's code curve
        "0.8/0.6/0.45",  # the usual geometric decay
        "0.8/0.6/0.45/0.34/0.25/0.19/0.14/0.11",
        "0.50/0.22/0.09",  # world 207's prose curve: low, but no break at a position
    ],
)
def test_a_steady_decline_is_no_cliff(tmp_path: Path, curve: str) -> None:
    kinds = {f.kind for f in _findings(tmp_path, curve)}
    assert not kinds & {"position_cliff", "zero_acceptance", "low_acceptance"}
