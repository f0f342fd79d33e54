"""One day of a fleet's store on each engine (``specscope sql``): the files each engine
reads for ``acceptance_by_day`` of one day, its CPU seconds and wall time (the best of
``--repeat``), the answer checked equal to specscope's to the last digit.

    python bench/fleet_store.py --servers 1000 --days 30 --sample 0.005 \\
        --per-source 100 --out /tmp/month
    python bench/sql_day.py /tmp/month [--day 2026-10-15] [--engines duckdb,clickhouse,spark]

Files read: DuckDB's ``EXPLAIN ANALYZE`` (``Scanning Files: n/N``, summed over its
scans), ClickHouse's ``EngineFileLikeReadFiles`` event (chDB), Spark's scans' ``numFiles``
(local mode, one core; its CPU is the JVM's). CPU seconds are the process's own (user +
system), so a loaded machine slows the wall time more than them. Prints one JSON line per
engine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specscope.queries.engines import script  # noqa: E402
from specscope.queries.fleet import answer  # noqa: E402
from specscope.store.reading import open_store  # noqa: E402

Measured = tuple[pl.DataFrame, int]  # the day's rows, the files read for them


def own_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def best(run: Callable[[], Measured], cpu: Callable[[], float], repeat: int) -> dict[str, Any]:
    """The best wall and CPU seconds of ``repeat`` runs (the files read: the last run's)."""
    walls, cpus = [], []
    for _ in range(repeat):
        c, t = cpu(), time.perf_counter()
        got, files = run()
        walls.append(time.perf_counter() - t)
        cpus.append(cpu() - c)
    return {"got": got, "files": files, "wall_s": min(walls), "cpu_s": min(cpus)}


def duckdb_day(text: str, sql: str, repeat: int) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect()
    con.execute(text)

    def run() -> Measured:
        got = con.sql(sql).pl()
        plan = con.sql(f"EXPLAIN ANALYZE {sql}").fetchall()[0][1]
        files = sum(int(n) for n in re.findall(r"Scanning Files: (\d+)/\d+", plan))
        return got, files

    return best(run, own_cpu, repeat)


def clickhouse_day(text: str, sql: str, repeat: int) -> dict[str, Any]:
    from chdb import session

    os.chdir(tempfile.mkdtemp())  # chDB reads a config.xml of the folder it runs in
    sess = session.Session()
    sess.query(text)
    count = "SELECT value FROM system.events WHERE event = 'EngineFileLikeReadFiles'"

    def run() -> Measured:
        before = int(sess.query(count, "CSV").bytes() or 0)
        got = pl.read_ipc(io.BytesIO(sess.query(sql, "Arrow").bytes()))
        return got, int(sess.query(count, "CSV").bytes() or 0) - before

    return best(run, own_cpu, repeat)


def spark_day(text: str, sql: str, repeat: int) -> dict[str, Any]:
    from sql_engines import local_spark

    # (adaptive execution off: the plan run is the plan read)
    spark = local_spark(**{"spark.sql.adaptive.enabled": "false"})
    jvm = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        fields = Path(f"/proc/{jvm}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick + own_cpu()

    exec(compile(text, "fleet.py", "exec"), {})

    def run() -> Measured:
        frame = spark.sql(sql)
        got = pl.from_arrow(frame.toArrow())
        assert isinstance(got, pl.DataFrame)
        files, todo = 0, [frame._jdf.queryExecution().executedPlan()]
        while todo:
            node = todo.pop()
            if node.nodeName().startswith("Scan parquet"):
                files += int(node.metrics().apply("numFiles").value())
            children = node.children().iterator()
            while children.hasNext():
                todo.append(children.next())
        return got, files

    try:
        return best(run, cpu, repeat)
    finally:
        spark.stop()


RUNNERS = {"duckdb": duckdb_day, "clickhouse": clickhouse_day, "spark": spark_day}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--day", help="YYYY-MM-DD (default: the middle day of the store)")
    parser.add_argument("--engines", default="duckdb,clickhouse,spark")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    store_path = args.store.resolve()
    store = open_store(store_path)
    days = sorted(p.name.split("=", 1)[1] for p in (store_path / "spec_decode").glob("date=2*"))
    day = args.day or days[len(days) // 2]
    want = answer(store, "acceptance_by_day").filter(pl.col("day") == pl.lit(day).str.to_date())
    listed = {t: len(store.files(t)) for t in ("spec_decode", "runs")}
    print(json.dumps({"store": str(store_path), "day": day, "days": len(days), "files": listed}))
    sql = f"SELECT * FROM acceptance_by_day WHERE day = DATE '{day}'"
    for engine in args.engines.split(","):
        m = RUNNERS[engine](script(engine, store_path), sql, args.repeat)
        got = m.pop("got")
        got = got.cast({c: want.schema[c] for c in want.columns}).select(want.columns)
        row = {"engine": engine, **{k: round(v, 3) for k, v in m.items()}}
        print(json.dumps({**row, "rows": want["records"].sum(), "equal": got.equals(want)}))


if __name__ == "__main__":
    main()
