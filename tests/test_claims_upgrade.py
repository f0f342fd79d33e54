"""A fall in speed after a change of version, set against nothing, is the old version against
the new with speculation on in both (oMLX #1745, world 374): no claim that speculation is
slower than decoding without it. The same words set against a baseline, or a slowdown said
outright, still are."""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope
from specscope.logs.claims import lexicon, read_claims
from specscope.logs.definitions import load_definitions

WORLD = Path(__file__).parent.parent / "fixtures" / "world"
LEX = lexicon(load_definitions())


def _claims(text: str) -> list[str]:
    assert LEX is not None
    return [c.kind for c in read_claims(LEX, text) if c.blames]


@pytest.mark.parametrize(
    "text",
    [
        # oMLX #1745 (world 374), as written
        "After upgrading to v0.4.2, single-request visible decode speed dropped sharply for "
        "this custom Qwopus MTP model.",
        # the same shape, other words
        "Since the update to 0.11, MTP decode throughput decreased a lot on our box.",
        "After the merge, EAGLE-3 throughput fell sharply for the 8B target.",
    ],
)
def test_a_fall_after_an_upgrade_is_no_claim_against_no_speculation(text: str) -> None:
    assert _claims(text) == []


@pytest.mark.parametrize(
    "text",
    [
        # a reference to no speculation in the clause: the comparison is on against off
        "After upgrading to v0.4.2, MTP decode speed dropped below the baseline without MTP.",
        # a change named before a slowdown against a baseline (llamadart #274)
        "PR #270 validated behavior for multiple speculative strategies, but most local "
        "configurations did not beat baseline throughput.",
        # a slowdown said outright keeps its word
        "After upgrading to v0.9, speculative decoding is slower than no speculation.",
    ],
)
def test_against_a_baseline_the_claim_stands(text: str) -> None:
    assert _claims(text), text


def test_world_374_blames_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    name = "374_omlx_issue1745_mtp_accept_716_835pct_streaming_slow_logs.log"
    specscope.ingest([WORLD / name], store=store, year=2026)
    kinds = {f.kind for f in specscope.detect(specscope.open_store(store))}
    assert "no_speedup" not in kinds
