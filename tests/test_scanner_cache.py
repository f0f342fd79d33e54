"""What an ingest builds from the definitions is built once a process (issue 17): the plan
and the compiled core's scanner are kept by the definitions they were built from, so a
second paste does not pay for them again, other definitions get their own, and the tables
are the same as when each is built afresh."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import specscope
from specscope.logs import bulkplan, core
from specscope.logs.bulkplan import plan_for
from specscope.logs.definitions import definitions_dir, load_definitions
from specscope.logs.grammar import Grammar, default_grammar
from specscope.store.reading import Store
from tests.helpers import FIXTURES

pytestmark = pytest.mark.skipif(not core.available(), reason="compiled core not built")

# A real server log with spec-decode records (vLLM's envelope: the core reads them in bulk).
SEED = FIXTURES / "seeds" / "002_2dcac71f91935498.txt"


def _copy(tmp_path: Path, name: str) -> Path:
    """The definitions in a directory of their own: loaded, new objects."""
    target = tmp_path / name
    shutil.copytree(definitions_dir(), target)
    return target


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    built: list[Any] = []
    real = core._core.Scanner

    def scanner(*args: Any, **kwargs: Any) -> Any:
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(core._core, "Scanner", scanner)
    return built


def _rows(store: Path) -> pl.DataFrame:
    table = Store(store).table("spec_decode").collect()
    return table.select(sorted(c for c in table.columns if "ingest" not in c and c != "source_id"))


def test_scanner_built_once_per_definitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _counting(monkeypatch)
    first = Grammar(load_definitions(_copy(tmp_path, "a")))
    stores = []
    for i in range(2):
        stores.append(tmp_path / f"s{i}")
        specscope.ingest([SEED], store=stores[-1], grammar=first)
    assert len(built) == 1
    # A grammar built again from the same definitions shares the plan and its scanner.
    again = Grammar(first.definitions)
    assert plan_for(again) is plan_for(first)
    assert core.scanner(plan_for(again)) is built[0]
    # Other definitions (equal in content, other objects) get a scanner of their own.
    other = Grammar(load_definitions(_copy(tmp_path, "b")))
    stores.append(tmp_path / "other")
    specscope.ingest([SEED], store=stores[-1], grammar=other)
    assert len(built) == 2 and built[1] is not built[0]
    rows = [_rows(s) for s in stores]
    assert rows[0].height > 0
    for r in rows[1:]:
        assert r.equals(rows[0])


def test_list_limit_is_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    grammar = Grammar(load_definitions(_copy(tmp_path, "k")))
    plan = plan_for(grammar)
    monkeypatch.setenv("SPECSCOPE_MAX_K", str(plan.max_k + 3))
    from specscope.logs.limits import refresh

    refresh()
    try:
        wider = plan_for(grammar)
        assert wider is not plan and wider.max_k == plan.max_k + 3
    finally:
        monkeypatch.delenv("SPECSCOPE_MAX_K")
        refresh()
    assert plan_for(grammar) is plan


def test_default_grammar_is_kept() -> None:
    assert default_grammar() is default_grammar()
    assert default_grammar().definitions is load_definitions()


def test_only_a_few_plans_are_kept() -> None:
    # Each copy of the definitions is a key of its own: the oldest plans go, the newest stays.
    grammars = [Grammar(tuple(copy.copy(d) for d in load_definitions())) for _ in range(12)]
    plans = [plan_for(g) for g in grammars]
    assert len(bulkplan._PLANS) == bulkplan._KEPT
    assert plan_for(grammars[-1]) is plans[-1]
    assert plan_for(grammars[0]) is not plans[0]
