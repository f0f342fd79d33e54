"""A source's newest file takes its next rows (``StoreWriter.add_parts``): scheduled pulls
leave a bounded number of files per table, every reader (specscope, a glob, DuckDB) reads
each row once, and a grown file still being moved in is read as committed before."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import specscope
from specscope.schema import TABLES as SCHEMA_TABLES
from specscope.store import durable, writing
from specscope.store.check import check_store
from specscope.store.layout import read_manifest
from tests.prom_servers import Misbehaving

TABLES = ("spec_decode", "run_sums", "runs", "sources")  # what a pull of this server writes


def _pulls(server: Misbehaving, store: Path, count: int, *, first: int = 0) -> list[int]:
    """``count`` pulls of one server, a minute of its time apart (as cron would run them),
    from the ``first``-th minute; the spec-decode rows each one added."""
    start = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    added = []
    for i in range(first, first + count):
        at = start + timedelta(minutes=i)
        report = specscope.pull(
            server.url, store=store, since="1m", retries=0, now=lambda at=at: at
        )
        added.append(report.added.get("spec_decode", 0))
    return added


@pytest.fixture
def server() -> Iterator[Misbehaving]:
    prometheus = Misbehaving("matrix")
    yield prometheus
    prometheus.stop()


def _files(store: Path, table: str) -> list[Path]:
    return sorted((store / table).rglob("*.parquet")) if (store / table).is_dir() else []


@pytest.fixture(scope="module")
def pulled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[int]]]:
    store = tmp_path_factory.mktemp("growth") / "s"
    prometheus = Misbehaving("matrix")
    try:
        yield store, _pulls(prometheus, store, 100)
    finally:
        prometheus.stop()


def test_a_hundred_scheduled_pulls_leave_one_file_per_table(pulled):
    store, added = pulled
    assert sum(1 for n in added if n) >= 90  # nearly every pull stored something new
    for table in SCHEMA_TABLES:  # runs and sources keep their newest file only
        assert len(_files(store, table)) <= 1, table
    for table in TABLES:
        assert len(_files(store, table)) == 1, table
    # ...and a hundred commits, each naming the file it grew.
    ingests = read_manifest(store)["ingests"]
    assert len(ingests) >= 90
    assert not check_store(store).problems


def test_every_reader_reads_each_pulled_row_once(pulled):
    store, added = pulled
    rows = specscope.open_store(store).spec_decode.collect()
    assert rows.height == sum(added)
    assert rows.select("run_id", "engine", "ts").is_unique().all()
    glob = str(store / "spec_decode" / "**" / "*.parquet")
    assert pl.scan_parquet(glob, hive_partitioning=True).collect().height == sum(added)
    ((n, accepted),) = duckdb.sql(
        f"select count(*), sum(accepted_tokens) from read_parquet('{glob}', hive_partitioning=1)"
    ).fetchall()
    assert (n, accepted) == (rows.height, rows["accepted_tokens"].sum())


def test_the_rollups_of_a_grown_file_sum_what_its_rows_sum(pulled):
    store, _ = pulled
    s = specscope.open_store(store)
    assert s.sums_cover_rows()
    rows = s.spec_decode.collect()
    sums = s.run_sums.collect()
    assert sums["drafts"].sum() == rows["drafts"].sum()
    assert sums["accepted_tokens"].sum() == rows["accepted_tokens"].sum()


def test_a_full_file_is_left_and_the_next_rows_start_another(tmp_path, monkeypatch, server):
    monkeypatch.setattr(writing, "GROW_ROWS", 25)
    added = _pulls(server, tmp_path / "s", 12)
    spec = _files(tmp_path / "s", "spec_decode")
    # Each pull adds about ten rows: a file takes pulls until it holds 25 or more.
    per_file = [pl.read_parquet(p).height for p in spec]
    assert sum(per_file) == sum(added)
    assert 3 <= len(spec) <= 6
    assert all(n >= 25 for n in per_file[:-1])
    assert len(_files(tmp_path / "s", "run_sums")) == len(spec)
    assert specscope.open_store(tmp_path / "s").sums_cover_rows()


def test_a_grown_file_moved_in_before_its_ingest_is_whole_reads_as_committed_before(
    tmp_path, monkeypatch, server
):
    store = tmp_path / "s"
    _pulls(server, store, 2)
    before = specscope.open_store(store).spec_decode.collect()
    # The third pull's disk fills after its first rename (the spec-decode file it grew):
    # it is committed, and the rest of its files wait in the stage for the next writer.
    moves = []

    def move(source: Path, dest: Path) -> None:
        if dest.suffix == ".parquet":
            moves.append(dest)
        if len(moves) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(dest))
        os.replace(source, dest)

    monkeypatch.setattr(durable, "move", move)
    with pytest.raises(specscope.StoreError, match="committed, but"):
        _pulls(server, store, 1, first=2)
    monkeypatch.undo()
    assert moves[0].relative_to(store).parts[0] == "spec_decode"
    assert len(check_store(store).moving) == 1
    s = specscope.open_store(store)
    assert_frame_equal(s.spec_decode.collect(), before)
    assert s.run_sums.collect()["drafts"].sum() == before["drafts"].sum()
    assert not check_store(store).problems
    # The next writer finishes the move: every row of the three pulls is read.
    (more,) = _pulls(server, store, 1, first=3)
    after = specscope.open_store(store).spec_decode.collect()
    assert after.height == before.height + 2 * more  # the third pull's rows, and the fourth's
    assert after.select("ts").is_unique().all()
    assert after.head(before.height).equals(before)
    assert not check_store(store).moving and not check_store(store).problems


def test_a_grown_file_whose_bytes_changed_is_not_read(tmp_path, server):
    store = tmp_path / "s"
    _pulls(server, store, 2)
    (spec,) = _files(store, "spec_decode")
    shutil.copy(spec, tmp_path / "kept")
    pl.read_parquet(spec).head(3).write_parquet(spec)
    with pytest.raises(specscope.StoreError, match="data file of spec_decode"):
        specscope.open_store(store).spec_decode.collect()
