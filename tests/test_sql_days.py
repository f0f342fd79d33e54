"""A query of one day opens that day's files alone, in ClickHouse (chDB) and Spark as in
DuckDB (``tests/test_store_partitions``): each engine's views take the day of a day's
folder (``date=<day>/source_id=<id>``) from its path, so a filter of the day keeps the
files of that day and no other. ClickHouse counts the files it reads
(``EngineFileLikeReadFiles``), Spark's plan shows the day among its ``PartitionFilters``
and its scan the files it listed; in both, every other day's file made garbage, the day
is still answered, to the last digit as specscope and DuckDB answer it. ClickHouse also
over a real S3 server on 127.0.0.1 (``s3s-fs``).

The store has the three kinds of folders a reader meets: a fleet's days (six servers,
three days), hive's default partition (rows without a time) and a source's own folder
(a log written before partitions), whose day is read from its rows.
"""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

import specscope
from specscope.queries.engines import script
from specscope.queries.fleet import QUERIES, answer
from specscope.store import writing
from specscope.store.layout import NO_DAY
from tests import s3_server
from tests.helpers import FIXTURES, ROOT, SEEDS, spark_session

sys.path.insert(0, str(ROOT / "bench"))

from fleet_store import Fleet, write_fleet  # type: ignore[import-not-found]

FLEET = Fleet(servers=6, days=3, interval_s=600, sample=1.0, per_source=2, every_sickness=True)
UNDATED = FIXTURES / "engines" / "vllm_responses_spec_metrics.jsonl"  # no time: no day
OLD_LOG = "003_83783f5568908b19.txt"  # written as before partitions: its source's folder


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("days")
    store = work / "store"
    write_fleet(store, FLEET)
    log = work / UNDATED.name
    shutil.copy(UNDATED, log)
    specscope.ingest([str(log)], store=store, year=2026)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writing, "DATED", ())
        specscope.ingest([str(SEEDS / OLD_LOG)], store=store, year=2026)
    folders = {p.name for p in (store / "spec_decode").iterdir()}
    assert f"date={NO_DAY}" in folders and any(f.startswith("source_id=") for f in folders)
    return store


def fleet_day(store: Path) -> str:
    days = sorted(p.name for p in (store / "spec_decode").glob("date=2*"))
    assert len(days) >= 3
    return days[1].split("=", 1)[1]


def files(store: Path) -> tuple[list[Path], list[Path], list[Path]]:
    """The committed spec_decode files: of the day, of other days, of no day's folder."""
    day = fleet_day(store)
    every = specscope.open_store(store).files("spec_decode")
    of_day = [p for p in every if f"/date={day}/" in p.as_posix()]
    other = [p for p in every if "/date=" in p.as_posix() and p not in of_day]
    undated = [p for p in every if "/date=" not in p.as_posix()]
    assert of_day and other and undated
    return of_day, other, undated


def same(name: str, got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Equal to the last digit: same rows, same integers, the same doubles bit for bit."""
    q = QUERIES[name]
    keys = [*q.keys, "position"] if q.positions else list(q.keys)
    got = got.cast({c: want.schema[c] for c in want.columns}).select(want.columns)
    assert got.sort(keys, nulls_last=False).rows() == want.rows(), name


def of_day(store: Path) -> pl.DataFrame:
    """specscope's answer for the day, and DuckDB's (the same)."""
    day = fleet_day(store)
    want = answer(specscope.open_store(store), "acceptance_by_day")
    want = want.filter(pl.col("day") == pl.lit(day).str.to_date())
    con = duckdb.connect()
    con.execute(script("duckdb", store))
    same(
        "acceptance_by_day",
        con.sql(f"SELECT * FROM acceptance_by_day WHERE day = '{day}'").pl(),
        want,
    )
    assert want.height == 1 and want["records"][0] > 0
    return want


def source_day(store: Path) -> str:
    """The rows of one source on the fleet's day (a file of its own)."""
    source = files(store)[0][0].parent.name.split("=", 1)[1]
    return (
        "SELECT count(*) AS n, sum(drafts) AS drafts FROM spec_runs "
        f"WHERE day = DATE '{fleet_day(store)}' AND source_id = '{source}'"
    )


def duckdb_rows(store: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.execute(script("duckdb", store))
    rows = con.sql(sql).fetchall()
    assert rows[0][0] > 0
    return rows


def spoil(paths: list[Path]) -> None:
    for path in paths:
        path.write_bytes(b"not a parquet file" * 64)


# -- ClickHouse ------------------------------------------------------------------------------


def test_clickhouse_reads_a_days_files_alone(fleet, tmp_path, monkeypatch):
    store = tmp_path / "store"
    shutil.copytree(fleet, store)
    clickhouse_reads_a_day(store, None, lambda paths: paths, tmp_path, monkeypatch)


def test_clickhouse_over_s3_reads_a_days_files_alone(fleet, tmp_path, monkeypatch):
    """The same over a real S3 server on 127.0.0.1 (``s3()``: keys, not files)."""
    if s3_server.binary() is None:
        pytest.skip("no S3 server: cargo install s3s-fs --version 0.14.1 --features binary")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.SECRET_KEY)
    root = tmp_path / "s3"
    with s3_server.S3Server(root) as server:
        server.upload(fleet, "fleet", "days")
        clickhouse_reads_a_day(
            fleet,
            f"{server.url}/fleet/days",
            lambda paths: [root / "fleet" / "days" / p.relative_to(fleet) for p in paths],
            tmp_path,
            monkeypatch,
        )


def clickhouse_reads_a_day(
    store: Path,
    location: str | None,
    served: Callable[[list[Path]], list[Path]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The views of ``store`` (read at ``location``) in chDB: every query equal to
    specscope's, and a day read from its files alone; ``served``: where a file of the
    store is read from (what is spoiled)."""
    pytest.importorskip("chdb", reason="ClickHouse (chDB) not installed: pip install '.[fleet]'")
    from chdb import session

    monkeypatch.chdir(tmp_path)  # chDB would read a config.xml of the folder it runs in
    day, want = fleet_day(store), of_day(store)
    day_files, other, undated = files(store)
    runs = specscope.open_store(store).files("runs")
    sess = session.Session()

    def read(sql: str) -> tuple[pl.DataFrame, int]:
        """The rows of ``sql`` and how many files ClickHouse read for them."""
        count = "SELECT value FROM system.events WHERE event = 'EngineFileLikeReadFiles'"
        before = int(sess.query(count, "CSV").bytes() or 0)
        got = pl.read_ipc(io.BytesIO(sess.query(sql, "Arrow").bytes()))
        return got, int(sess.query(count, "CSV").bytes() or 0) - before

    try:
        sess.query(script("clickhouse", store, location=location))  # every file whole
        s = specscope.open_store(store)
        for name in QUERIES:
            same(name, read(f"SELECT * FROM {name}")[0], answer(s, name))
        _, whole = read("SELECT count(*) FROM spec_decode")
        assert whole == len(day_files) + len(other) + len(undated)
        got, opened = read(f"SELECT * FROM acceptance_by_day WHERE day = '{day}'")
        same("acceptance_by_day", got, want)
        # The day's files, the files of no day's folder (their day is in their rows) and
        # the runs it joins: none of another day's.
        assert opened == len(day_files) + len(undated) + len(runs) < whole + len(runs)
        # A source's day: its one file of the day (and the runs).
        one, opened = read(source_day(store))
        assert one.rows() == duckdb_rows(store, source_day(store)), one
        assert opened == 1 + len(runs)
        nulls, _ = read("SELECT * FROM acceptance_by_day WHERE day IS NULL")
        same(
            "acceptance_by_day",
            nulls,
            answer(s, "acceptance_by_day").filter(pl.col("day").is_null()),
        )
        spoil(served(other))
        got, _ = read(f"SELECT * FROM acceptance_by_day WHERE day = '{day}'")
        same("acceptance_by_day", got, want)
        with pytest.raises(Exception):  # noqa: B017 (chDB's error for a file that is no Parquet)
            read("SELECT count(*) FROM spec_decode")
    finally:
        sess.close()


# -- Spark -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    # (adaptive execution off: the plan run is the plan shown)
    session = spark_session(**{"spark.sql.adaptive.enabled": "false"})
    yield session
    session.stop()


def scans(plan: Any) -> list[tuple[str, str, int]]:
    """Each Parquet scan of an executed plan: its first folder, its partition filters and
    the files it read."""
    out: list[tuple[str, str, int]] = []
    todo = [plan]
    while todo:
        node = todo.pop()
        if node.nodeName().startswith("Scan parquet"):
            folder = node.relation().location().rootPaths().head().toString()
            filters = node.partitionFilters().mkString(", ")
            out.append((folder, filters, node.metrics().apply("numFiles").value()))
        children = node.children().iterator()
        while children.hasNext():
            todo.append(children.next())
    return out


def test_spark_lists_a_days_files_alone(fleet, spark, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(fleet, store)
    day, want = fleet_day(store), of_day(store)
    day_files, other, undated = files(store)
    exec(compile(script("spark", store), "fleet.py", "exec"), {})
    s = specscope.open_store(store)
    for name in ("acceptance_by_day", "acceptance_by_model", "positions_by_model"):
        got = pl.from_arrow(spark.sql(f"SELECT * FROM {name}").toArrow())
        assert isinstance(got, pl.DataFrame)
        same(name, got, answer(s, name))
    query = spark.sql(f"SELECT * FROM acceptance_by_day WHERE day = DATE '{day}'")
    got = pl.from_arrow(query.toArrow())
    assert isinstance(got, pl.DataFrame)
    same("acceptance_by_day", got, want)
    read = [
        scan
        for scan in scans(query._jdf.queryExecution().executedPlan())
        if "/spec_decode/" in scan[0]
    ]
    # The days' files: the day among the partition filters, and that day's files read;
    # the folder without a day: read whole.
    (days,) = [scan for scan in read if "/spec_decode/date=" in scan[0]]
    assert "isnotnull(date" in days[1] and f"= {day})" in days[1], days
    assert days[2] == len(day_files) < len(day_files) + len(other)
    assert sum(n for _, _, n in read) == len(day_files) + len(undated), read
    one = spark.sql(source_day(store))
    assert [tuple(r) for r in one.collect()] == duckdb_rows(store, source_day(store))
    (days,) = [s for s in scans(one._jdf.queryExecution().executedPlan()) if "date=" in s[0]]
    assert "source_id" in days[1] and days[2] == 1, days
    spoil(other)
    again = pl.from_arrow(
        spark.sql(f"SELECT * FROM acceptance_by_day WHERE day = DATE '{day}'").toArrow()
    )
    assert isinstance(again, pl.DataFrame)
    same("acceptance_by_day", again, want)
    with pytest.raises(Exception):  # noqa: B017 (Spark's error for a file that is no Parquet)
        spark.sql("SELECT count(*) FROM spec_decode").collect()
