"""Every sample in parsers/ gives the values its definition says."""

from __future__ import annotations

import math
from typing import Any

import pytest

from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_text

DEFINITIONS = load_definitions()
GRAMMAR = Grammar(DEFINITIONS)
SAMPLES = [
    pytest.param(d, s, id=f"{d.name}-{i + 1}") for d in DEFINITIONS for i, s in enumerate(d.samples)
]


def _same(actual: Any, expected: Any) -> bool:
    if expected == "null":
        return actual is None
    if isinstance(expected, float):
        return isinstance(actual, int | float) and math.isclose(actual, expected, abs_tol=1e-9)
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_same(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return actual == expected


def _check(row: dict[str, Any], expected: dict[str, Any], where: str) -> None:
    for key, value in expected.items():
        assert _same(row.get(key), value), f"{where}: {key} = {row.get(key)!r}, want {value!r}"


def test_every_definition_has_samples():
    for d in DEFINITIONS:
        assert d.samples, f"{d.name} has no samples"


def test_every_format_kind_is_present():
    kinds = {d.kind for d in DEFINITIONS}
    assert {"envelope", "fields", "config", "event"} <= kinds


@pytest.mark.parametrize(("defn", "sample"), SAMPLES)
def test_sample(defn, sample):
    where = f"{defn.name} sample from {sample.source or 'no source'}"
    if defn.kind == "envelope":
        match = GRAMMAR.envelopes_in(sample.text)[0]
        assert defn.pattern.search(sample.text) is not None
        got = {k: v for k, v in match.groupdict().items() if v is not None}
        got = {k: int(v) if k in ("pid", "month", "day") else v for k, v in got.items()}
        got["body"] = sample.text[match.end() :]
        _check(got, dict(sample.expect or {}), where)
        return
    result = parse_text(sample.text, GRAMMAR)
    assert not result.skipped, f"{where}: skipped {result.skipped}"
    if sample.records:
        rows = result.tables.get(sample.table or defn.table or defn.name, [])
        assert len(rows) == len(sample.records), f"{where}: {len(rows)} records"
        for row, expected in zip(rows, sample.records, strict=True):
            _check(row, dict(expected), where)
    if sample.runs is not None:
        assert len(result.runs) == sample.runs, f"{where}: {len(result.runs)} runs"
    if sample.run is not None:
        assert result.runs, f"{where}: no run"
        config: dict[str, Any] = {}
        for run in result.runs:
            for key, value in run.config.items():
                config.setdefault(key, value)
        _check(config, dict(sample.run), where)
