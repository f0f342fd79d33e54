"""Stage parts planned together (``assemble.PARTS_PER_PLAN``, issue 17) come out as parts
planned one by one: the same frames part by part, the same run rows, summaries and run
sums, and a reader that stops after one part sums nothing."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from specscope.logs import assemble
from specscope.logs import source as reader
from specscope.logs.bulk import parse_source
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.source import open_source
from specscope.logs.staging import RECORD_TABLES, Stage
from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))

from generate import write_server

GRAMMAR = Grammar(load_definitions())


def _finish(result: Any, stage: Stage) -> Any:
    """A parse finished as the tests' one source (no year, a fixed mtime)."""
    return assemble.finish(
        result,
        stage,
        display="log",
        source_id="s0",
        mtime=datetime(2026, 11, 21),
        year=None,
        user={},
    )


def _read_all(
    log: Path, stage_dir: Path | None, k: int, mp: pytest.MonkeyPatch, memory: int = 0
) -> Any:
    mp.setattr(assemble, "PARTS_PER_PLAN", k)
    stage = Stage(stage_dir, memory=memory)
    result = parse_source(open_source(str(log)), GRAMMAR, stage, block_bytes=20_000)
    done = _finish(result, stage)
    parts = {t: list(done.parts(t)) for t in RECORD_TABLES}
    out = (parts, done.runs, done.acceptance, done.run_sums())
    stage.close()
    return out, len(stage.parts["spec_decode"])


@pytest.mark.parametrize(
    ("on_disk", "memory"),
    [(True, 0), (False, 0), (True, 60_000)],
    ids=["arrow files", "in memory", "in memory, then in files"],
)
def test_parts_planned_together_are_the_parts_planned_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_disk: bool, memory: int
) -> None:
    monkeypatch.setattr(reader, "_CHUNK", 8192)  # blocks of about block_bytes
    log = tmp_path / "server.log"
    with open(log, "w") as f:
        write_server(f, 400_000, runs=3)
    stage_dir = tmp_path / "stage" if on_disk else None
    (alone, runs1, acceptance1, sums1), n = _read_all(log, None, 1, monkeypatch)
    assert n > 7  # several batches, the last one short
    for k in (1, 3, 64):
        (together, runs, acceptance, sums), _ = _read_all(log, stage_dir, k, monkeypatch, memory)
        for table in RECORD_TABLES:
            assert [len(p) for p in together[table]] == [len(p) for p in alone[table]]
            for mine, theirs in zip(together[table], alone[table], strict=True):
                assert mine.equals(theirs, null_equal=True)
        assert (runs, acceptance) == (runs1, acceptance1)
        assert sums.equals(sums1)
    assert sum(len(p) for p in alone["spec_decode"]) > 500


def test_a_reader_that_stops_early_sums_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "_CHUNK", 8192)
    monkeypatch.setattr(assemble, "PARTS_PER_PLAN", 4)
    log = tmp_path / "server.log"
    with open(log, "w") as f:
        write_server(f, 300_000, runs=2)
    stage = Stage(tmp_path / "stage")
    result = parse_source(open_source(str(log)), GRAMMAR, stage, block_bytes=20_000)

    def finished() -> Any:
        return assemble.finish(
            result,
            stage,
            display="log",
            source_id="s0",
            mtime=datetime(2026, 11, 21),
            year=None,
            user={},
        )

    expected = finished().acceptance
    partly = finished()
    first = next(partly.parts("spec_decode"))
    assert 0 < len(first) < partly.counts["spec_decode"]
    assert partly.acceptance == expected
    stage.close()


def test_a_stage_holds_its_rows_in_memory_up_to_its_budget_then_in_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "_CHUNK", 8192)
    log = tmp_path / "server.log"
    with open(log, "w") as f:
        write_server(f, 300_000, runs=2)
    read: dict[int, Any] = {}
    for memory in (1 << 30, 60_000):
        stage = Stage(tmp_path / f"stage-{memory}", memory=memory)
        result = parse_source(open_source(str(log)), GRAMMAR, stage, block_bytes=20_000)
        parts = [p for t in RECORD_TABLES for p in stage.parts.get(t, [])]
        files = sorted(stage.directory.glob("*.arrow")) if stage.directory.exists() else []
        if memory > 1 << 20:
            # A log that fits: no stage file is ever made, its folder neither.
            assert stage.in_memory and not stage.directory.exists()
            assert all(isinstance(p, pl.DataFrame) for p in parts)
        else:
            # Past the budget what was held went to files, and every later part too.
            assert not stage.in_memory
            assert all(isinstance(p, Path) for p in parts) and len(files) == len(parts)
        done = _finish(result, stage)
        read[memory] = ({t: pl.concat(list(done.parts(t))) for t in ("spec_decode",)}, done.runs)
        stage.close()
        assert not stage.directory.exists()
    (held, runs), (spilled, runs2) = read.values()
    assert held["spec_decode"].equals(spilled["spec_decode"], null_equal=True)
    assert len(held["spec_decode"]) > 300 and runs == runs2
