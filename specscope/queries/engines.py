"""The fleet queries as text an engine runs: DuckDB SQL, ClickHouse SQL (clickhouse-local,
chDB, or a server that may read the files), a PySpark script.

Each table is a view over the files the manifest commits, listed one by one, and of each
file only the rows committed: a file is listed with its row count and the view keeps the
rows numbered below it (DuckDB ``file_row_number``, ClickHouse ``_row_number``, Spark
``_metadata.row_index``). A glob would read a file copied in by hand, and the newest file
of a folder grows when a later ingest adds rows to it (``store.layout``): a listed file
with its rows is the store as it was when the views were printed, whatever is committed
after, until a compaction removes a listed file (the view then fails; print it again).

A query of a day opens that day's files alone, in every engine: each dated table's view
has the ``date`` of its files' folders (``store.layout``: ``date=<day>/source_id=<id>``),
and the ``day`` of ``spec_runs`` is it. DuckDB reads the days' files with hive
partitioning (the columns bound from the first file listed); ClickHouse computes the date
from the file's ``_path`` alone, a filter it applies to the list of files before it opens
one (its own hive reading stays off: it would parse hive's default partition as a date);
Spark reads them under the table's folder as ``basePath``, the date a partition column
(``PartitionFilters``). Files in a source's own folder (a store written before
partitions) are read as before, their day taken from the rows.

A file is opened where ``location`` says: the store's folder as given, or a prefix the
store was copied to (``s3://bucket/prefix``, ``http://host:port/bucket/prefix``); the
manifest and the row counts are read from the local store either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from specscope.errors import StoreError, UsageError
from specscope.queries.fleet import QUERIES, RUN_COLUMNS, SPEC_COLUMNS, Query, has_utc, query
from specscope.schema import PARTITIONED, TABLES
from specscope.store.layout import DATED, DAY, live_files, read_manifest, relative

ENGINES = ("duckdb", "clickhouse", "spark")
VIEWED = ("spec_decode", "runs")  # the tables the queries read
# Characters a path may not hold: each engine's quoting stays plain, ClickHouse's path
# list ({a,b}) stays a list.
_UNSAFE = re.compile(r"[',{}*?\\\"\n\r]")


@dataclass(frozen=True)
class Listed:
    """A committed file of a table: where the engine opens it, its path inside the table
    (what the view matches the engine's file name on) and its committed rows."""

    where: str
    key: str
    rows: int


@dataclass(frozen=True)
class TableFiles:
    table: str
    files: tuple[Listed, ...]
    present: frozenset[str]  # the table's columns some file has (the others read as null)


def table_files(store: Path, table: str, location: str | None = None) -> TableFiles:
    """The committed files of ``table`` and their rows, from the store's manifest."""
    manifest = read_manifest(store)
    files: list[Listed] = []
    present: set[str] = set()
    for f in live_files(store, table, manifest):
        rel = relative(f.path, store)
        try:
            meta = pq.read_metadata(f.path)
        except (OSError, pa.ArrowInvalid) as exc:
            raise StoreError(
                f"committed data file of {table} unreadable ({exc}): `specscope check`",
                path=str(f.path),
            ) from exc
        present.update(meta.schema.to_arrow_schema().names)
        rows = meta.num_rows if f.entry is None else f.entry.rows
        where = str(f.path) if location is None else f"{location.rstrip('/')}/{rel}"
        if _UNSAFE.search(where):
            raise UsageError(f"a path the printed views cannot quote: {where!r}")
        files.append(Listed(where, rel.split("/", 1)[1], rows))
    return TableFiles(table, tuple(files), frozenset(present))


def script(engine: str, store: Path, name: str | None = None, location: str | None = None) -> str:
    """The views of the store's tables and of every query for ``engine``; with ``name``,
    then that query's rows, sorted by its keys."""
    if engine not in ENGINES:
        raise UsageError(f"no engine {engine!r}; engines: {', '.join(ENGINES)}")
    q = query(name) if name is not None else None
    if not (store / "specscope.json").is_file():
        raise StoreError("no specscope store here", path=str(store))
    tables = [table_files(store, t, location) for t in VIEWED]
    return {"duckdb": _duckdb, "clickhouse": _clickhouse, "spark": _spark}[engine](tables, q)


# -- the queries, in each engine's words --------------------------------------------------


@dataclass(frozen=True)
class Dialect:
    create: str  # how a view is made
    instance: str  # a pulled run's Prometheus instance from the runs' pids JSON
    explode: Callable[[str], str]  # FROM clause: spec_runs, one row per listed position


DIALECTS = {
    "duckdb": Dialect(
        "CREATE OR REPLACE VIEW",
        "json_extract_string(r.pids, '$.instance')",
        lambda cols: (
            f"(SELECT {cols}, UNNEST(accepted_per_pos) AS accepted, "
            "generate_subscripts(accepted_per_pos, 1) - 1 AS position FROM spec_runs "
            "WHERE accepted_per_pos IS NOT NULL AND drafts IS NOT NULL) AS p"
        ),
    ),
    "clickhouse": Dialect(
        "CREATE OR REPLACE VIEW",
        "nullIf(JSON_VALUE(r.pids, '$.instance'), '')",
        lambda cols: (
            f"(SELECT {cols}, accepted, toInt64(i) - 1 AS position FROM spec_runs "
            "ARRAY JOIN accepted_per_pos AS accepted, arrayEnumerate(accepted_per_pos) AS i "
            "WHERE accepted_per_pos IS NOT NULL AND drafts IS NOT NULL) AS p"
        ),
    ),
    "spark": Dialect(
        "CREATE OR REPLACE TEMPORARY VIEW",
        "get_json_object(r.pids, '$.instance')",
        lambda cols: (
            f"(SELECT {cols}, CAST(pos AS BIGINT) AS position, accepted FROM spec_runs "
            "LATERAL VIEW posexplode(accepted_per_pos) e AS pos, accepted "
            "WHERE accepted_per_pos IS NOT NULL AND drafts IS NOT NULL) AS p"
        ),
    ),
}


def _ratio(num: str, den: str) -> str:
    return f"CASE WHEN {den} > 0 THEN CAST({num} AS DOUBLE) / CAST({den} AS DOUBLE) END"


def query_sql(engine: str, q: Query) -> str:
    """The SELECT of one query over ``spec_runs`` (no ORDER BY: a view's body). The sums
    are named apart from the columns they sum: in ClickHouse an alias is seen by the
    whole SELECT, so ``SUM(drafts) AS drafts`` would make a later ``drafts`` a sum."""
    keys = ", ".join(q.keys)
    if q.positions:
        source = DIALECTS[engine].explode(f"{keys}, drafts")
        return (
            f"SELECT {keys}, position, n_accepted AS accepted, n_drafts AS drafts, "
            f"{_ratio('n_accepted', 'n_drafts')} AS rate FROM (SELECT {keys}, position, "
            "COALESCE(SUM(accepted), 0) AS n_accepted, SUM(drafts) AS n_drafts "
            f"FROM {source} GROUP BY {keys}, position) AS g"
        )
    return (
        f"SELECT {keys}, n_records AS records, n_draft_tokens AS draft_tokens, "
        "n_accepted_tokens AS accepted_tokens, n_drafts AS drafts, "
        f"{_ratio('n_accepted_tokens', 'n_draft_tokens')} AS acceptance_rate, "
        f"1 + {_ratio('n_with_drafts', 'n_drafts')} AS mean_acceptance_length "
        f"FROM (SELECT {keys}, COUNT(*) AS n_records, SUM(draft_tokens) AS n_draft_tokens, "
        "SUM(accepted_tokens) AS n_accepted_tokens, SUM(drafts) AS n_drafts, "
        "COALESCE(SUM(CASE WHEN drafts IS NOT NULL THEN accepted_tokens END), 0) "
        f"AS n_with_drafts FROM spec_runs GROUP BY {keys}) AS g"
    )


def spec_runs_sql(engine: str) -> str:
    # Every engine's spec_decode has its partition's day (the date of the rows, taken
    # from the folder) and source: a query of a day, or of a source, opens their files
    # alone.
    spec = ", ".join(f"s.{c}" for c in SPEC_COLUMNS)
    runs = ", ".join(f"r.{c}" for c in RUN_COLUMNS)
    return (
        f"SELECT s.{DAY} AS day, s.source_id, {spec}, {runs}, "
        f"COALESCE({DIALECTS[engine].instance}, r.source) AS instance "
        "FROM spec_decode AS s LEFT JOIN runs AS r ON s.run_id = r.run_id"
    )


def statements(engine: str, q: Query | None) -> list[str]:
    """The views of spec_runs and of every query, then ``q``'s rows sorted by its keys."""
    create = DIALECTS[engine].create
    out = [f"{create} spec_runs AS\n{spec_runs_sql(engine)}"]
    out += [f"{create} {n} AS\n{query_sql(engine, each)}" for n, each in QUERIES.items()]
    if q is not None:
        order = [*q.keys, "position"] if q.positions else list(q.keys)
        nulls = ", ".join(f"{k} NULLS FIRST" for k in order)
        out.append(f"SELECT * FROM {q.name} ORDER BY {nulls}")
    return out


# -- the tables: committed files, committed rows --------------------------------------------


def _key_pattern(table: str) -> str:
    # The path inside the table: after the last "<table>/" of the engine's file name (a
    # local path, an s3 key, a file: URI alike).
    return f"^(?:.*/)?{table}/(.*)$"


def _rows(tf: TableFiles) -> str:
    return ", ".join(f"('{f.key}', {f.rows})" for f in tf.files)


def _duckdb_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"{_duckdb_type(t.value_type)}[]"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    return {
        pa.string(): "VARCHAR",
        pa.int64(): "BIGINT",
        pa.int32(): "INTEGER",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
    }[t]


def _clickhouse_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"Array({_clickhouse_type(t.value_type)})"
    if pa.types.is_timestamp(t):
        return "Nullable(DateTime64(3, 'UTC'))" if t.tz else "Nullable(DateTime64(3))"
    base = {
        pa.string(): "String",
        pa.int64(): "Int64",
        pa.int32(): "Int32",
        pa.float64(): "Float64",
        pa.bool_(): "Bool",
    }[t]
    return f"Nullable({base})"


def _spark_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"ARRAY<{_spark_type(t.value_type)}>"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz else "TIMESTAMP_NTZ"
    return {
        pa.string(): "STRING",
        pa.int64(): "BIGINT",
        pa.int32(): "INT",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
    }[t]


def _header(comment: str, tables: list[TableFiles]) -> str:
    counts = ", ".join(f"{t.table}: {len(t.files)} files" for t in tables)
    return (
        f"{comment} specscope fleet views ({counts}): each table is the files its manifest\n"
        f"{comment} commits and their committed rows, as the store was when printed.\n"
        f"{comment} Queries: {', '.join(QUERIES)}."
    )


def _duckdb(tables: list[TableFiles], q: Query | None) -> str:
    # Days in UTC, whatever this machine's zone (a ts_utc is cast to a date in it).
    out = [_header("--", tables), "SET TimeZone = 'UTC'"]
    for tf in tables:
        schema = TABLES[tf.table]
        partitioned = tf.table in PARTITIONED
        dated = tf.table in DATED
        if not tf.files:
            cols = [f"CAST(NULL AS {_duckdb_type(x.type)}) AS {x.name}" for x in schema]
            cols += ["CAST(NULL AS VARCHAR) AS source_id"] if partitioned else []
            cols += [f"CAST(NULL AS DATE) AS {DAY}"] if dated else []
            body = f"SELECT {', '.join(cols)} WHERE false"
        else:
            cols = [
                f"f.{x.name}"
                if x.name in tf.present
                else f"CAST(NULL AS {_duckdb_type(x.type)}) AS {x.name}"
                for x in schema
            ]
            by_day = tuple(f for f in tf.files if f.key.startswith(f"{DAY}="))
            rest = tuple(f for f in tf.files if not f.key.startswith(f"{DAY}="))
            parts = []
            if by_day:
                # The day and the source from the folders (hive): a query of a day opens
                # that day's files alone. Not by name: that would open every file to bind.
                hive = f"{{'{DAY}': 'DATE', 'source_id': 'VARCHAR'}}"
                parts.append(
                    _duckdb_read(
                        TableFiles(tf.table, by_day, tf.present),
                        cols + (["f.source_id", f"f.{DAY}"] if dated else ["f.source_id"]),
                        f"union_by_name = false, hive_partitioning = true, hive_types = {hive}",
                    )
                )
            if rest:
                source = ["regexp_extract(f.filename, 'source_id=([^/]+)', 1) AS source_id"]
                utc = "f.ts_utc" if "ts_utc" in tf.present else "NULL"
                day = [f"CAST(COALESCE({utc}, f.ts) AS DATE) AS {DAY}"] if dated else []
                parts.append(
                    _duckdb_read(
                        TableFiles(tf.table, rest, tf.present),
                        cols + (source if partitioned else []) + day,
                        "union_by_name = true, hive_partitioning = false",
                    )
                )
            body = "\nUNION ALL\n".join(parts)
        out.append(f"CREATE OR REPLACE VIEW {tf.table} AS\n{body}")
    return out[0] + "\n" + ";\n\n".join(out[1:] + statements("duckdb", q)) + ";\n"


def _duckdb_read(tf: TableFiles, cols: list[str], options: str) -> str:
    """The committed rows of ``tf``'s files, read with ``options``."""
    paths = ", ".join(f"'{f.where}'" for f in tf.files)
    return (
        f"SELECT {', '.join(cols)}\n"
        f"FROM read_parquet([{paths}], filename = true, file_row_number = true, {options}) AS f\n"
        f"JOIN (VALUES {_rows(tf)}) AS c(committed_file, committed_rows)\n"
        f"ON regexp_extract(f.filename, '{_key_pattern(tf.table)}', 1) = c.committed_file\n"
        "AND f.file_row_number < c.committed_rows"
    )


def _clickhouse(tables: list[TableFiles], q: Query | None) -> str:
    # Dates in UTC whatever the server's zone; a run not found has nulls, not defaults;
    # a null cast to a date or a double stays null (it would be an error).
    out = [
        _header("--", tables),
        "SET session_timezone = 'UTC'",
        "SET join_use_nulls = 1",
        "SET cast_keep_nullable = 1",
        # The source and the day are taken from the path here: ClickHouse's own reading of
        # key=value folders would parse the day of rows without one (hive's default
        # partition) as a date, and fail.
        "SET use_hive_partitioning = 0",
    ]
    for tf in tables:
        schema = TABLES[tf.table]
        partitioned = tf.table in PARTITIONED
        dated = tf.table in DATED
        if not tf.files:
            # An Array is never null in ClickHouse: a list no file holds is empty.
            cols = [
                f"CAST({'[]' if pa.types.is_list(x.type) else 'NULL'} AS "
                f"{_clickhouse_type(x.type)}) AS {x.name}"
                for x in schema
            ]
            cols += ["CAST(NULL AS Nullable(String)) AS source_id"] if partitioned else []
            cols += [f"CAST(NULL AS Nullable(Date)) AS {DAY}"] if dated else []
            body = f"SELECT {', '.join(cols)} WHERE 0"
        else:
            cols = [f"f.{x.name} AS {x.name}" for x in schema]
            cols += ["extract(f._path, 'source_id=([^/]+)') AS source_id"] if partitioned else []
            by_day = tuple(f for f in tf.files if f.key.startswith(f"{DAY}="))
            rest = tuple(f for f in tf.files if not f.key.startswith(f"{DAY}="))
            parts = []
            if by_day:
                # The day of the folder, from the file's path alone: ClickHouse keeps the
                # files whose path passes a query's filter of it, and opens no other
                # (hive's default partition is no date: null).
                day = f"toDateOrNull(extract(f._path, '/{DAY}=([^/]+)/[^/]+/[^/]+$')) AS {DAY}"
                parts.append(_clickhouse_read(tf.table, by_day, [*cols, day]))
            if rest:
                when = "COALESCE(f.ts_utc, f.ts)" if has_utc() else "f.ts"
                day = f"CAST({when} AS Nullable(Date)) AS {DAY}"
                parts.append(_clickhouse_read(tf.table, rest, cols + ([day] if dated else [])))
            body = "\nUNION ALL\n".join(parts)
        out.append(f"CREATE OR REPLACE VIEW {tf.table} AS\n{body}")
    return out[0] + "\n" + ";\n\n".join(out[1:] + statements("clickhouse", q)) + ";\n"


def _clickhouse_read(table: str, files: tuple[Listed, ...], cols: list[str]) -> str:
    """The committed rows of ``files``, read in one call: their common folder, then
    {a,b,...} of the rest."""
    structure = ", ".join(f"{x.name} {_clickhouse_type(x.type)}" for x in TABLES[table])
    structure = structure.replace("'", "\\'")  # the zone of a UTC time, quoted
    where = [f.where for f in files]
    reader = "s3" if "://" in where[0] else "file"
    first = files[0]
    root = first.where[: len(first.where) - len(f"{table}/{first.key}")]
    rest = ",".join(w[len(root) :] for w in where)
    rows = _rows(TableFiles(table, files, frozenset()))
    return (
        f"SELECT {', '.join(cols)}\n"
        f"FROM {reader}('{root}{{{rest}}}', 'Parquet', '{structure}') AS f\n"
        "INNER JOIN (SELECT * FROM VALUES('committed_file String, committed_rows UInt64', "
        f"{rows})) AS c\n"
        f"ON extract(f._path, '{_key_pattern(table)}') = c.committed_file\n"
        "WHERE f._row_number < c.committed_rows"
    )


_SPARK_PRELUDE = """\
# Run it with python (pyspark installed) or spark-submit, or paste it into pyspark.
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

spark = SparkSession.builder.getOrCreate()
spark.conf.set("spark.sql.session.timeZone", "UTC")


def committed(table, schema, files, pattern, partitioned, dated):
    \"\"\"A view of the table: its files, and of each the rows committed. The files of days'
    folders are read as partitions (date, source_id): a query of a day lists that day's
    files alone (the plan's PartitionFilters); the others' day is their rows'.\"\"\"
    names = [c.split(" ")[0] for c in schema.split(", ")]
    names += ["source_id"] if partitioned else []
    names += ["date"] if dated else []
    if not files:
        empty = spark.createDataFrame([], schema)
        if partitioned:
            empty = empty.withColumn("source_id", F.lit(None).cast("string"))
        if dated:
            empty = empty.withColumn("date", F.lit(None).cast("date"))
        empty.createOrReplaceTempView(table)
        return
    rows = spark.createDataFrame([(k, n) for _, k, n in files], "file STRING, rows BIGINT")
    by_day = [(w, k) for w, k, _ in files if dated and k.startswith("date=")]
    rest = [(w, k) for w, k, _ in files if not (dated and k.startswith("date="))]
    parts = []
    if by_day:
        w, k = by_day[0]
        base = w[: len(w) - len(k)].rstrip("/")
        df = (
            spark.read.schema(schema + ", date DATE, source_id STRING")
            .option("basePath", base)
            .parquet(*[w for w, _ in by_day])
        )
        parts.append(df)
    if rest:
        df = spark.read.schema(schema).parquet(*[w for w, _ in rest])
        if partitioned:
            path = F.col("_metadata.file_path")
            df = df.withColumn("source_id", F.regexp_extract(path, r"source_id=([^/]+)", 1))
        if dated:
            when = F.coalesce("ts_utc", "ts") if "ts_utc" in names else F.col("ts")
            df = df.withColumn("date", when.cast("date"))
        parts.append(df)
    for n, df in enumerate(parts):
        df = df.select(
            *names,
            F.regexp_extract(F.col("_metadata.file_path"), pattern, 1).alias("_file"),
            F.col("_metadata.row_index").alias("_row"),
        )
        parts[n] = df.join(rows, df["_file"] == rows["file"]).where(F.col("_row") < F.col("rows"))
    df = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    df.select(*names).createOrReplaceTempView(table)

"""


# Spark names a file by a URI, where other characters would be %-escaped: a key it spelt
# otherwise would match no listed file and its rows would silently drop out.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9=._/-]+")


def _spark(tables: list[TableFiles], q: Query | None) -> str:
    lines = [_header("#", tables), _SPARK_PRELUDE]
    for tf in tables:
        odd = next((f.key for f in tf.files if not _PLAIN_KEY.fullmatch(f.key)), None)
        if odd is not None:
            raise UsageError(
                f"a file name Spark would escape, so the view could not match it: {odd!r}"
            )
        schema = ", ".join(f"{x.name} {_spark_type(x.type)}" for x in TABLES[tf.table])
        files = ",\n".join(f"    ({f.where!r}, {f.key!r}, {f.rows})" for f in tf.files)
        lines += [
            f"committed(\n    {tf.table!r},\n    {schema!r},\n    [\n{files}\n    ],",
            f"    {_key_pattern(tf.table)!r},\n    {tf.table in PARTITIONED},\n"
            f"    {tf.table in DATED},\n)",
        ]
    *views, last = statements("spark", q) if q is not None else [*statements("spark", q), ""]
    lines += [f'spark.sql("""\n{v}\n""")' for v in views]
    if q is not None:
        lines.append(f'spark.sql("""\n{last}\n""").show(n=100000, truncate=False)')
    return "\n".join(lines) + "\n"


__all__ = [
    "DIALECTS",
    "ENGINES",
    "VIEWED",
    "Listed",
    "TableFiles",
    "query_sql",
    "script",
    "spec_runs_sql",
    "statements",
    "table_files",
]
