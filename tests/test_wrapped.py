"""A wrapped record's readings are kept between the lines offered to it (issue 17): the line
parser reads the same tables, runs and skipped lines with them kept as it does reading
every text afresh, on logs whose records are wrapped at a terminal's width, glued or pasted
in fragments; and it reads fewer times."""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest

from specscope.logs import fields, parser, wrapped
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_lines
from tests.helpers import FIXTURES

sys.path.insert(0, str(FIXTURES))

import synth

GRAMMAR = Grammar(load_definitions())
DISTURBED = (("hardwrap",), ("hardwrap_narrow",), ("glue",), ("hardwrap", "glue", "noise"))


def _parse(text: str) -> tuple[Any, int]:
    """The line parser's result on ``text``, and how many times it read a record's fields."""
    calls = 0
    real = fields.read_fields

    def counted(defn: Any, body: str) -> Any:
        nonlocal calls
        calls += 1
        return real(defn, body)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wrapped, "read_fields", counted)
        result = parse_lines(enumerate(text.split("\n"), 1), GRAMMAR)
    return result, calls


def _afresh(self: wrapped.Pending, body: str) -> Any:
    return wrapped.read_fields(self.anchor.definitions[0], body)


def _log(seed: int, wrappings: tuple[str, ...]) -> str:
    return synth.generate(random.Random(seed), wrappings).text


@pytest.mark.parametrize("wrappings", DISTURBED, ids="+".join)
@pytest.mark.parametrize("seed", [3, 17, 2026])
def test_kept_readings_read_as_reading_afresh(seed: int, wrappings: tuple[str, ...]) -> None:
    text = _log(seed, wrappings)
    kept, kept_calls = _parse(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wrapped.Pending, "_read", _afresh)
        fresh, fresh_calls = _parse(text)
    assert kept.tables == fresh.tables
    assert [(s.line, s.reason, s.text) for s in kept.skipped] == [
        (s.line, s.reason, s.text) for s in fresh.skipped
    ]
    assert [(r.ordinal, r.first_line, r.last_line, r.counts) for r in kept.runs] == [
        (r.ordinal, r.first_line, r.last_line, r.counts) for r in fresh.runs
    ]
    assert (kept.lines, kept.telemetry_lines) == (fresh.lines, fresh.telemetry_lines)
    assert sum(len(rows) for rows in kept.tables.values()) > 0
    if "hardwrap" in wrappings or "hardwrap_narrow" in wrappings:
        assert kept_calls < fresh_calls  # the readings kept are used


def test_pasted_fragments_read_as_reading_afresh() -> None:
    rng = random.Random(11)
    log = synth.generate_format("fragment", rng, ("md_quote",))
    kept, _ = _parse(log.text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wrapped.Pending, "_read", _afresh)
        fresh, _ = _parse(log.text)
    assert kept.tables == fresh.tables
    assert [(s.line, s.reason) for s in kept.skipped] == [(s.line, s.reason) for s in fresh.skipped]
    assert kept.tables.get("spec_decode")


def test_a_long_wrapped_record_keeps_the_readings_of_its_text_only() -> None:
    """Held over many lines a record keeps two readings at most, not one per prefix."""
    lines = [
        "(APIServer pid=1) INFO 11-21 10:00:00 [metrics.py:1] SpecDecoding metrics: "
        "Mean acceptance length: 2.50, Accepted throughput: 1.00 tokens/s, "
        "Drafted throughput: 2.00 tokens/s, Accepted: 10 tokens, Drafted: 20 tokens, "
        "Per-position acceptance rate: 0.800,",
        *[" 0.700," for _ in range(20)],
        " 0.100, Avg Draft acceptance rate: 50.0%",
    ]
    p = parser.LineParser(GRAMMAR)
    most = 0
    for n, line in enumerate(lines, 1):
        p.feed(n, line)
        if p._pending is not None:
            most = max(most, len(p._pending._readings))
    assert 1 <= most <= 2
    result = p.finish()
    assert len(result.tables["spec_decode"]) == 1
