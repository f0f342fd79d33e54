"""The fleet queries (``specscope sql``) on each engine over one store: the time to print
the views, to run every query, and specscope's own time for the same answers; each
engine's answers checked equal to specscope's (the tests do so on a small store).

    python bench/fleet_store.py --servers 200 --days 7 --sample 0.05 --out /tmp/fleet
    python bench/sql_engines.py /tmp/fleet [--engines duckdb,clickhouse,spark]

Prints one JSON line per engine. Spark runs in local mode on one core (its start is
timed apart); ClickHouse is chDB.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specscope.queries.engines import script  # noqa: E402
from specscope.queries.fleet import QUERIES, answer  # noqa: E402
from specscope.store.reading import open_store  # noqa: E402


def equal(name: str, got: pl.DataFrame, want: pl.DataFrame) -> bool:
    q = QUERIES[name]
    keys = [*q.keys, "position"] if q.positions else list(q.keys)
    got = got.cast({c: want.schema[c] for c in want.columns}).select(want.columns)
    return got.sort(keys, nulls_last=False).equals(want)


def duckdb_run(text: str) -> tuple[dict[str, pl.DataFrame], float]:
    import duckdb

    con = duckdb.connect()
    con.execute(text)
    t = time.perf_counter()
    out = {n: con.sql(f"SELECT * FROM {n}").pl() for n in QUERIES}
    return out, time.perf_counter() - t


def clickhouse_run(text: str) -> tuple[dict[str, pl.DataFrame], float]:
    from chdb import session

    os.chdir(tempfile.mkdtemp())  # chDB reads a config.xml of the folder it runs in
    sess = session.Session()
    sess.query(text)
    t = time.perf_counter()
    out = {
        n: pl.read_ipc(io.BytesIO(sess.query(f"SELECT * FROM {n}", "Arrow").bytes()))
        for n in QUERIES
    }
    return out, time.perf_counter() - t


def local_spark(**conf: str) -> Any:
    """A Spark on one core and 127.0.0.1, quiet; ``conf``: more settings."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_run(text: str) -> tuple[dict[str, pl.DataFrame], float]:
    t = time.perf_counter()
    spark = local_spark()
    print(json.dumps({"spark_start_s": round(time.perf_counter() - t, 1)}), file=sys.stderr)
    exec(compile(text, "fleet.py", "exec"), {})
    t = time.perf_counter()
    out = {}
    for n in QUERIES:
        frame = pl.from_arrow(spark.sql(f"SELECT * FROM {n}").toArrow())
        assert isinstance(frame, pl.DataFrame)
        out[n] = frame
    return out, time.perf_counter() - t


RUNNERS = {"duckdb": duckdb_run, "clickhouse": clickhouse_run, "spark": spark_run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--engines", default="duckdb,clickhouse,spark")
    args = parser.parse_args()
    store_path = args.store.resolve()
    store = open_store(store_path)
    t = time.perf_counter()
    want = {n: answer(store, n) for n in QUERIES}
    mine = time.perf_counter() - t
    files = len(store.files("spec_decode")) + len(store.files("runs"))
    rows = store.spec_decode.select(pl.len()).collect().item()
    print(
        json.dumps(
            {"engine": "specscope", "files": files, "rows": rows, "queries_s": round(mine, 2)}
        )
    )
    for engine in args.engines.split(","):
        t = time.perf_counter()
        text = script(engine, store_path)
        printed = time.perf_counter() - t
        got, ran = RUNNERS[engine](text)
        same = all(equal(n, got[n], want[n]) for n in QUERIES)
        print(
            json.dumps(
                {
                    "engine": engine,
                    "print_s": round(printed, 2),
                    "script_kb": len(text) // 1024,
                    "queries_s": round(ran, 2),
                    "equal": same,
                }
            )
        )


if __name__ == "__main__":
    main()
