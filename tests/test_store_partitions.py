"""Partitions by day (``store.layout``: ``<table>/date=<day>/source_id=<id>/``): a store
written with them reads as one written before them, by specscope, polars and DuckDB; a
query of one day opens that day's files alone (the others are made unreadable, and the
query still answers); a store written before partitions reads as it did, takes new rows
into partitions beside its old folders, and compacts each partition on its own."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import specscope
from specscope.queries.engines import script
from specscope.queries.fleet import QUERIES, answer
from specscope.store import writing
from specscope.store.check import check_store
from specscope.store.compaction import compact
from specscope.store.layout import NO_DAY
from tests.helpers import ROOT, SEEDS

sys.path.insert(0, str(ROOT / "bench"))

from fleet_store import Fleet, write_fleet

FLEET = Fleet(servers=6, days=3, interval_s=600, sample=1.0, per_source=2, every_sickness=True)
# Each table's rows in an order that does not depend on which file holds them.
ORDER = {
    "spec_decode": ["source_id", "run_id", "ts", "line"],
    "engine_stats": ["source_id", "run_id", "ts", "line"],
    "runs": ["run_id"],
    "run_sums": ["run_id", "first_ts", "records"],
}
GROWN = "003_83783f5568908b19.txt"


def _days(store: Path, table: str = "spec_decode") -> set[str]:
    return {p.name for p in (store / table).glob("date=*")}


def tables(store: Path) -> dict[str, pl.DataFrame]:
    s = specscope.open_store(store)
    return {t: s.table(t).collect().sort(keys, nulls_last=False) for t, keys in ORDER.items()}


def same_tables(got: dict[str, pl.DataFrame], want: dict[str, pl.DataFrame]) -> None:
    for table, frame in want.items():
        assert got[table].height == frame.height > 0, table
        assert_frame_equal(got[table], frame, check_exact=True)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same fleet written by this writer (by day) and as one before partitions."""
    work = tmp_path_factory.mktemp("partitions")
    write_fleet(work / "new", FLEET)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writing, "DATED", ())
        write_fleet(work / "old", FLEET)
    return work / "new", work / "old"


def test_a_partitioned_store_reads_as_one_written_before(stores):
    new, old = stores
    assert len(_days(new)) >= 3  # three days of a fleet, a folder each
    assert _days(new, "engine_stats") == _days(new) and not _days(old)
    assert not _days(new, "run_sums")  # a run's sums are its source's, whatever its days
    want = tables(old)
    same_tables(tables(new), want)
    assert specscope.open_store(new).sums_cover_rows()
    assert check_store(new).ok, check_store(new).lines()
    # polars and DuckDB read the folders as hive partitions: the day and the source.
    glob = f"{new}/spec_decode/**/*.parquet"
    by_polars = pl.scan_parquet(glob, hive_partitioning=True).collect()
    assert by_polars.schema["date"] == pl.Date and by_polars.schema["source_id"] == pl.String
    day = pl.coalesce(pl.col("ts_utc").dt.date(), pl.col("ts").dt.date())
    assert (by_polars["date"] == by_polars.select(day).to_series()).all()
    assert_frame_equal(
        by_polars.drop("date").sort(ORDER["spec_decode"]),
        want["spec_decode"].select(by_polars.drop("date").columns),
        check_exact=True,
    )
    con = duckdb.connect()
    con.execute(script("duckdb", new))
    (viewed,) = con.sql("SELECT count(*) FROM spec_decode").fetchall()[0]
    globbed = duckdb.sql(f"SELECT count(*) FROM read_parquet('{glob}', hive_partitioning=true)")
    assert viewed == globbed.fetchall()[0][0] == want["spec_decode"].height
    old_store = specscope.open_store(old)
    for name in QUERIES:
        mine = answer(old_store, name)
        assert_frame_equal(answer(specscope.open_store(new), name), mine, check_exact=True)
        got = con.sql(f"SELECT * FROM {name}").pl()
        got = got.cast({c: mine.schema[c] for c in mine.columns}).select(mine.columns)
        keys = [*QUERIES[name].keys, *(["position"] if QUERIES[name].positions else [])]
        assert_frame_equal(got.sort(keys, nulls_last=False), mine, check_exact=True)


def test_a_query_of_a_day_opens_that_days_files_alone(stores, tmp_path):
    new, _ = stores
    store = tmp_path / "s"
    shutil.copytree(new, store)
    con = duckdb.connect()
    con.execute(script("duckdb", store))  # printed while every file is whole
    days = sorted(_days(store))
    pick = days[-1].split("=", 1)[1]
    query = f"SELECT * FROM acceptance_by_day WHERE day = DATE '{pick}'"
    want = con.sql(query).pl()
    assert want.height == 1 and want["records"][0] > 0
    files = specscope.open_store(store).files("spec_decode")
    of_day = [p for p in files if f"date={pick}/" in p.as_posix()]
    assert 0 < len(of_day) < len(files)
    # DuckDB's plan says so: the day's files of the table's, pruned by the folder's day.
    plan = con.sql(f"EXPLAIN ANALYZE {query}").fetchall()[0][1]
    assert f"Scanning Files: {len(of_day)}/{len(files)}" in plan, plan
    # And so do the files: every other day's is garbage now but the first listed (each
    # engine reads the columns from its footer when the query is planned), and the day
    # is still read, while a read of the whole table fails.
    for path in files[1:]:
        if path not in of_day:
            path.write_bytes(b"not a parquet file" * 64)
    with pytest.raises(duckdb.Error):
        con.sql("SELECT count(*) FROM spec_decode").fetchall()
    assert_frame_equal(con.sql(query).pl(), want, check_exact=True)
    lf = pl.scan_parquet(files, hive_partitioning=True)
    with pytest.raises(Exception):  # noqa: B017 (polars' error for a file that is no Parquet)
        lf.collect()
    one = lf.filter(pl.col("date") == pl.lit(pick).str.to_date()).collect()
    assert one.height == want["records"][0]


def test_an_old_store_reads_as_before_and_takes_new_rows_by_day(tmp_path):
    """A log ingested half, then whole (it grew): by writers before partitions both times
    (``before``), before then after (``both``), after both times (``after``)."""
    full = (SEEDS / GROWN).read_text(encoding="utf-8")
    lines = full.splitlines(keepends=True)
    log = tmp_path / GROWN
    both, before, after = tmp_path / "both", tmp_path / "before", tmp_path / "after"

    def half_then_whole(store: Path, old_first: bool, old_then: bool) -> None:
        for text, old in (("".join(lines[: len(lines) // 2]), old_first), (full, old_then)):
            log.write_text(text, encoding="utf-8")
            with pytest.MonkeyPatch.context() as mp:
                if old:
                    mp.setattr(writing, "DATED", ())
                specscope.ingest([str(log)], store=store, year=2026)

    half_then_whole(before, True, True)
    half_then_whole(both, True, False)
    half_then_whole(after, False, False)
    assert _days(both) and any((both / "spec_decode").glob("source_id=*"))
    assert not _days(before) and _days(after)
    old = specscope.open_store(before)
    for store in (both, after):
        s = specscope.open_store(store)
        for t in ("spec_decode", "engine_stats", "runs"):
            assert_frame_equal(s.table(t).collect(), old.table(t).collect(), check_exact=True)
        assert s.sums_cover_rows()
        con = duckdb.connect()
        con.execute(script("duckdb", store))
        for name in QUERIES:
            mine = answer(old, name)
            got = con.sql(f"SELECT * FROM {name}").pl()
            got = got.cast({c: mine.schema[c] for c in mine.columns}).select(mine.columns)
            keys = [*QUERIES[name].keys, *(["position"] if QUERIES[name].positions else [])]
            assert_frame_equal(got.sort(keys, nulls_last=False), mine, check_exact=True)


def test_compaction_merges_within_a_partition(tmp_path, monkeypatch):
    store = tmp_path / "s"
    monkeypatch.setattr(writing, "GROW_ROWS", 0)  # a file a pull, as on object storage
    write_fleet(store, Fleet(**{**FLEET.__dict__, "commits": 4}))
    before = tables(store)
    live = specscope.open_store(store).files("spec_decode")
    folders = {p.parent for p in live}
    assert len(live) > len(folders)  # some day of a source has a file a pull
    rows = {
        f: pl.scan_parquet(list(f.glob("*.parquet"))).select(pl.len()).collect().item()
        for f in folders
    }
    done = compact(store)
    assert done.ingest is not None
    same_tables(tables(store), before)
    after = specscope.open_store(store).files("spec_decode")
    # One file a day and source, where that day's rows were: none crossed a day.
    assert sorted(p.parent for p in after) == sorted(folders)
    for f in folders:
        (kept,) = [p for p in after if p.parent == f]
        assert pl.scan_parquet(kept).select(pl.len()).collect().item() == rows[f]
    assert specscope.open_store(store).sums_cover_rows()
    assert check_store(store).ok, check_store(store).lines()


def test_rows_without_a_time_have_a_partition_hive_reads_as_null(tmp_path):
    log = tmp_path / "no_time.jsonl"
    shutil.copy(ROOT / "fixtures" / "engines" / "vllm_responses_spec_metrics.jsonl", log)
    specscope.ingest([str(log)], store=tmp_path / "s", year=2026)
    assert _days(tmp_path / "s") == {f"date={NO_DAY}"}
    read = pl.scan_parquet(
        f"{tmp_path}/s/spec_decode/**/*.parquet", hive_partitioning=True
    ).collect()
    assert read.height > 0 and read["date"].null_count() == read.height
    con = duckdb.connect()
    con.execute(script("duckdb", tmp_path / "s"))
    assert con.sql("SELECT count(*) FROM spec_decode WHERE date IS NULL").fetchall()[0][0] == (
        read.height
    )
