"""The fleet queries (``specscope sql``) on the engines fleets run, against specscope's own
answers, to the last digit: DuckDB, ClickHouse (chDB: Debian's clickhouse-server 18.16
reads no Parquet) and Spark in local mode, over the local store and over a real S3 server
on 127.0.0.1 (s3s-fs) where the engine can read one.

The store is real: the repository's logs and pastes (vLLM, SGLang, llama.cpp,
TensorRT-LLM; dozens of models, runs and days) ingested in four ingests, one of them a
log that grew since it was read, two by two writers at once (each its own process), two
vLLM /metrics endpoints on 127.0.0.1 scraped (their runs' instance and UTC times), and a
data file copied in by hand that a glob would read.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

import specscope
from specscope.prometheus.scrape import scrape
from specscope.queries.engines import script, table_files
from specscope.queries.fleet import QUERIES, answer
from specscope.store.layout import read_manifest
from tests import s3_server
from tests.helpers import FIXTURES, ROOT, SEEDS, spark_session
from tests.prom_servers import VllmExporter, serve_exporter

ENGINE_LOGS = [
    "llamacpp_server_mtp_two_requests.log",
    "llamacpp_server_mtp_zero.log",
    "sglang_metrics_verify.txt",
    "trtllm_metrics_dynamic_k.txt",
    "vllm_metrics_mtp_int4_zero.txt",
    "vllm_responses_spec_metrics.jsonl",
]
GROWN = "003_83783f5568908b19.txt"  # read half first, then whole
_WRITER = (
    "import sys, specscope; "
    "specscope.ingest(sys.argv[2:], store=sys.argv[1], year=2026)"  # some pastes store nothing
)


def ingest(paths: list[Path], store: Path) -> None:
    # Some excerpts hold no telemetry that counts (a paste of prose): they store nothing.
    specscope.ingest([str(p) for p in paths], store=store, year=2026)


def grow(path: Path, full: str, share: float) -> None:
    lines = full.splitlines(keepends=True)
    path.write_text("".join(lines[: int(len(lines) * share)]), encoding="utf-8")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("fleet")
    store = work / "store"
    world = sorted((FIXTURES / "world").iterdir())[::3]  # a third: 20 s less to ingest
    grown = work / GROWN
    full = (SEEDS / GROWN).read_text(encoding="utf-8")
    grow(grown, full, 0.5)
    ingest([grown, *world[: len(world) // 2]], store)
    grow(grown, full, 1.0)
    ingest([grown, *world[len(world) // 2 :]], store)
    # Two writers at once, each its own process: both commit, neither undoes the other.
    before = len(read_manifest(store)["ingests"])
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(store), *map(str, paths)],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stderr=subprocess.PIPE,
        )
        for paths in (
            [p for p in SEEDS.iterdir() if p.name != GROWN],
            [FIXTURES / "engines" / name for name in ENGINE_LOGS],
        )
    ]
    for w in writers:
        _, err = w.communicate(timeout=300)
        assert w.returncode == 0, err.decode()[-2000:]
    assert len(read_manifest(store)["ingests"]) == before + 2
    # Two vLLM servers scraped on 127.0.0.1: runs whose instance is the target's, in UTC.
    for _server in range(2):
        port, server = serve_exporter(VllmExporter())
        try:
            scrape(f"http://127.0.0.1:{port}/metrics", store=store, interval=1, count=3)
        finally:
            server.shutdown()  # type: ignore[attr-defined]
    # A committed file copied in by hand: a glob reads it twice, specscope never.
    first = sorted((store / "spec_decode").rglob("*.parquet"))[0]
    shutil.copy(first, first.with_name("part-copied-by-hand.parquet"))
    return store


def same(name: str, got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Equal to the last digit: same rows, same integers, the same doubles bit for bit."""
    q = QUERIES[name]
    keys = [*q.keys, "position"] if q.positions else list(q.keys)
    got = got.cast({c: want.schema[c] for c in want.columns}).select(want.columns)
    got = got.sort(keys, nulls_last=False)
    assert got.shape == want.shape, name
    for column in want.columns:
        a, b = got[column].to_list(), want[column].to_list()
        assert a == b, (
            f"{name}.{column}: {[(x, y) for x, y in zip(a, b, strict=True) if x != y][:3]}"
        )


def test_the_store_is_a_fleet(fleet):
    store = specscope.open_store(fleet)
    runs = store.runs.collect()
    assert runs["server"].n_unique() >= 4  # vllm, sglang, llama.cpp, tensorrt-llm
    assert runs["model"].n_unique() >= 5
    servers = answer(store, "acceptance_by_server")
    scraped = servers.filter(pl.col("instance").str.starts_with("127.0.0.1:"))
    assert scraped.height == 2 and scraped["drafts"].min() > 0  # the targets, not the URL
    days = answer(store, "acceptance_by_day")
    assert days.height >= 10
    curves = answer(store, "positions_by_model")
    assert curves["position"].max() >= 4
    # Sums divided, never ratios averaged: the fleet's rate is not the mean of run rates.
    by_run = answer(store, "acceptance_by_run").drop_nulls("acceptance_rate")
    total = by_run["accepted_tokens"].sum() / by_run["draft_tokens"].sum()
    assert abs(total - by_run["acceptance_rate"].mean()) > 0.01


def test_duckdb_local_equals_specscope_and_ignores_a_copied_file(fleet):
    store = specscope.open_store(fleet)
    con = duckdb.connect()
    con.execute(script("duckdb", fleet))
    for name in QUERIES:
        same(name, con.sql(f"SELECT * FROM {name}").pl(), answer(store, name))
    (viewed,) = con.sql("SELECT count(*) FROM spec_decode").fetchall()[0]
    glob = f"{fleet}/spec_decode/**/*.parquet"
    (globbed,) = duckdb.sql(f"SELECT count(*) FROM read_parquet('{glob}')").fetchall()[0]
    assert viewed == store.spec_decode.collect().height
    assert globbed > viewed  # the copied file, read by the glob alone


def test_printed_views_are_the_store_as_it_was(fleet, tmp_path):
    """Views printed before an ingest read the rows committed then, though the ingest grew
    a file they list (a log read again after it grew); a runs file it superseded is gone,
    and a view that needs it fails rather than answer otherwise. Printed again: as now."""
    store_dir = tmp_path / "store"
    shutil.copytree(fleet, store_dir)
    log = tmp_path / "fresh.log"
    full = "a log of its own\n" + (SEEDS / GROWN).read_text(encoding="utf-8")
    grow(log, full, 0.4)
    ingest([log], store_dir)
    old, new = duckdb.connect(), duckdb.connect()
    old.execute(script("duckdb", store_dir))  # DuckDB looks for each file as a view is made
    listed = {f.key: f.rows for f in table_files(store_dir, "spec_decode").files}
    want = {n: answer(specscope.open_store(store_dir), n) for n in QUERIES}
    grow(log, full, 1.0)
    ingest([log], store_dir)
    now = {n: answer(specscope.open_store(store_dir), n) for n in QUERIES}
    assert not now["acceptance_by_run"].equals(want["acceptance_by_run"])
    grown = [
        f for f in table_files(store_dir, "spec_decode").files if listed.get(f.key, f.rows) < f.rows
    ]
    assert grown  # a file the old views list holds more rows now: they read the first ones
    counts = ["records", "draft_tokens", "accepted_tokens", "drafts"]
    rows = old.sql(
        "SELECT run_id, COUNT(*) AS records, SUM(draft_tokens) AS draft_tokens, "
        "SUM(accepted_tokens) AS accepted_tokens, SUM(drafts) AS drafts "
        "FROM spec_decode GROUP BY run_id"
    ).pl()
    assert (
        rows.sort("run_id")
        .cast({c: pl.Int64 for c in counts})
        .equals(want["acceptance_by_run"].select("run_id", *counts))
    )
    for name in QUERIES:
        try:
            got = old.sql(f"SELECT * FROM {name}").pl()
        except duckdb.IOException as exc:
            assert "runs-" in str(exc), exc  # the superseded runs file, named
        else:
            same(name, got, want[name])
    new.execute(script("duckdb", store_dir))
    for name in QUERIES:
        same(name, new.sql(f"SELECT * FROM {name}").pl(), now[name])


def test_cli_prints_views_a_duckdb_process_runs(fleet, cli):
    shown = cli("sql", "--store", fleet, "acceptance_by_model")
    assert shown.status == 0, shown.err
    con = duckdb.connect()
    *views, last = [s for s in shown.out.split(";\n") if s.strip()]
    con.execute(";\n".join(views) + ";")
    assert last.strip().startswith("SELECT * FROM acceptance_by_model ORDER BY")
    same(
        "acceptance_by_model",
        con.sql(last).pl(),
        answer(specscope.open_store(fleet), "acceptance_by_model"),
    )
    bad = cli("sql", "--store", fleet, "--engine", "trino")
    assert bad.status == 2 and "no engine 'trino'" in bad.err and "Traceback" not in bad.err
    none = cli("sql", "--store", fleet.parent / "nowhere")
    assert none.status == 9 and "nowhere" in none.err


# -- ClickHouse ------------------------------------------------------------------------------


def clickhouse_answers(sql: str) -> dict[str, pl.DataFrame]:
    from chdb import session

    sess = session.Session()
    try:
        sess.query(sql)
        return {
            n: pl.read_ipc(io.BytesIO(sess.query(f"SELECT * FROM {n}", "Arrow").bytes()))
            for n in QUERIES
        }
    finally:
        sess.close()


def test_clickhouse_local_equals_specscope(fleet, tmp_path, monkeypatch):
    pytest.importorskip("chdb", reason="ClickHouse (chDB) not installed: pip install '.[fleet]'")
    monkeypatch.chdir(tmp_path)  # chDB would read a config.xml of the folder it runs in
    store = specscope.open_store(fleet)
    got = clickhouse_answers(script("clickhouse", fleet))
    for name in QUERIES:
        same(name, got[name], answer(store, name))


@pytest.fixture(scope="module")
def s3(fleet, tmp_path_factory):
    if s3_server.binary() is None:
        pytest.skip("no S3 server: cargo install s3s-fs --version 0.14.1 --features binary")
    with s3_server.S3Server(tmp_path_factory.mktemp("s3")) as server:
        server.upload(fleet, "fleet", "stores/one")
        yield server


def test_s3_holds_every_committed_file_as_committed(fleet, s3):
    """pyarrow's S3 filesystem reads each file the views list, its committed rows in it."""
    import pyarrow.parquet as pq

    fs = s3.filesystem()
    for table in ("spec_decode", "runs"):
        listed = table_files(fleet, table, "fleet/stores/one").files
        assert listed
        for f in listed:
            assert pq.ParquetFile(fs.open_input_file(f.where)).metadata.num_rows >= f.rows


def test_clickhouse_over_s3_equals_specscope(fleet, s3, tmp_path, monkeypatch):
    pytest.importorskip("chdb", reason="ClickHouse (chDB) not installed: pip install '.[fleet]'")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.SECRET_KEY)
    store = specscope.open_store(fleet)
    got = clickhouse_answers(script("clickhouse", fleet, location=f"{s3.url}/fleet/stores/one"))
    for name in QUERIES:
        same(name, got[name], answer(store, name))


def test_duckdb_over_s3_where_it_can(fleet, s3):
    con = duckdb.connect()
    try:
        con.execute("LOAD httpfs")
    except duckdb.Error as exc:
        pytest.skip(
            f"DuckDB {duckdb.__version__} cannot read S3 here: its httpfs extension downloads "
            f"from the internet, and PyPI's duckdb-extension-httpfs is built for 1.5 ({exc})"
        )
    host = s3.url.removeprefix("http://")
    con.execute(
        f"CREATE SECRET (TYPE s3, KEY_ID '{s3_server.ACCESS_KEY}', SECRET "
        f"'{s3_server.SECRET_KEY}', ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
    )
    con.execute(script("duckdb", fleet, location="s3://fleet/stores/one"))
    store = specscope.open_store(fleet)
    for name in QUERIES:
        same(name, con.sql(f"SELECT * FROM {name}").pl(), answer(store, name))


# -- Spark -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    session = spark_session()
    yield session
    session.stop()


def test_spark_local_equals_specscope(fleet, spark):
    store = specscope.open_store(fleet)
    exec(compile(script("spark", fleet), "fleet.py", "exec"), {})
    for table in ("spec_decode", "runs"):  # read the files once, not once a query
        spark.sql(f"CACHE TABLE {table}")
    for name in QUERIES:
        got = pl.from_arrow(spark.sql(f"SELECT * FROM {name}").toArrow())
        assert isinstance(got, pl.DataFrame)
        same(name, got, answer(store, name))
    # Tables without a committed file: empty views of their columns (replacing the above).
    from specscope.queries import engines

    empty = [engines.TableFiles(t, (), frozenset()) for t in engines.VIEWED]
    exec(compile(engines._spark(empty, None), "empty.py", "exec"), {})
    nothing = spark.sql("SELECT * FROM positions_by_model")
    assert nothing.columns == list(QUERIES["positions_by_model"].columns)
    assert nothing.count() == 0


def test_spark_over_s3_where_it_can(fleet, s3, spark):
    try:
        spark._jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem")
    except Exception:
        pytest.skip(
            "Spark cannot read S3 here: pyspark ships no hadoop-aws (S3A) jars and they "
            "come from Maven, which this machine cannot reach"
        )
    pytest.fail("S3A is on Spark's classpath: configure it and check the answers")


def test_spark_views_refuse_a_file_name_spark_would_escape():
    """Spark names files by URI (a ':' or a space %-escaped): such a key would match no
    listed file, and its rows would drop out silently. Refused at print time instead."""
    from specscope.errors import UsageError
    from specscope.queries import engines

    odd = engines.TableFiles(
        "spec_decode",
        (
            engines.Listed(
                "/s/spec_decode/host=a:8000/part-1.parquet", "host=a:8000/part-1.parquet", 3
            ),
        ),
        frozenset({"run_id"}),
    )
    runs = engines.TableFiles("runs", (), frozenset())
    with pytest.raises(UsageError, match="Spark would escape"):
        engines._spark([odd, runs], None)
    assert "host=a:8000" in engines._duckdb([odd, runs], None)  # DuckDB takes it as given


def test_views_of_empty_tables_answer_nothing(tmp_path, monkeypatch):
    """A table without a committed file is an empty view of its columns, in every engine."""
    from specscope.queries import engines

    empty = [engines.TableFiles(t, (), frozenset()) for t in engines.VIEWED]
    con = duckdb.connect()
    con.execute(engines._duckdb(empty, None))
    for name in QUERIES:
        assert con.sql(f"SELECT * FROM {name}").pl().columns == list(QUERIES[name].columns)
        assert con.sql(f"SELECT count(*) FROM {name}").fetchall() == [(0,)]
    pytest.importorskip("chdb", reason="ClickHouse (chDB) not installed: pip install '.[fleet]'")
    monkeypatch.chdir(tmp_path)
    for name, got in clickhouse_answers(engines._clickhouse(empty, None)).items():
        assert got.height == 0 and got.columns == list(QUERIES[name].columns)
