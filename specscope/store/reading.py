"""Reading a store: a directory of hive-partitioned Parquet tables that polars, DuckDB,
Spark and Trino read directly (``layout`` says where what is). Only committed files are
read: those of the ingests the manifest lists.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import polars as pl

from specscope.errors import StoreError
from specscope.schema import PARTITIONED, TABLES, polars_schema
from specscope.store.layout import (
    DEFAULT_STORE,
    MANIFEST,
    committed_files,
    default_store_path,
    ingest_of,
    read_manifest,
)
from specscope.store.writing import StoreWriter, locked_writer


class Store:
    """A store directory; ``table(name)`` gives a polars LazyFrame of a table."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- reading ---------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.path / MANIFEST).is_file()

    def manifest(self) -> dict[str, Any]:
        return read_manifest(self.path)

    def files(self, table: str) -> list[Path]:
        """The committed data files of ``table`` (latest only, for runs and sources)."""
        return committed_files(self.path, table)

    def table(self, name: str) -> pl.LazyFrame:
        if name not in TABLES:
            raise StoreError(f"no table {name!r}; tables: {', '.join(TABLES)}")
        schema = TABLES[name]
        files = self.files(name)
        if not files:
            empty = pl.DataFrame(schema.empty_table())
            if name in PARTITIONED:
                empty = empty.with_columns(pl.lit(None, pl.String).alias("source_id"))
            return empty.lazy()
        want = polars_schema(name)
        frames = []
        for f in files:
            lf = pl.scan_parquet(f)
            # A file written before a column was added lacks it: it reads as null.
            have = lf.collect_schema().names()
            lf = lf.with_columns(
                pl.lit(None, dtype).alias(column)
                for column, dtype in want.items()
                if column not in have
            ).select(list(want))
            if name in PARTITIONED:
                lf = lf.with_columns(pl.lit(f.parent.name.split("=", 1)[1]).alias("source_id"))
            frames.append(lf)
        return pl.concat(frames, how="vertical")

    def sums_cover_rows(self) -> bool:
        """Every spec_decode file has its ``run_sums`` beside it (``specscope.store.rollup``); not
        so in a store written before rollups were."""
        have = {(p.parent.name, ingest_of(p)) for p in self.files("run_sums")}
        return all((p.parent.name, ingest_of(p)) in have for p in self.files("spec_decode"))

    @property
    def run_sums(self) -> pl.LazyFrame:
        return self.table("run_sums")

    @property
    def spec_decode(self) -> pl.LazyFrame:
        return self.table("spec_decode")

    @property
    def engine_stats(self) -> pl.LazyFrame:
        return self.table("engine_stats")

    @property
    def runs(self) -> pl.LazyFrame:
        return self.table("runs")

    @property
    def events(self) -> pl.LazyFrame:
        return self.table("events")

    @property
    def bench(self) -> pl.LazyFrame:
        return self.table("bench")

    @property
    def sources(self) -> pl.LazyFrame:
        return self.table("sources")

    # -- writing ---------------------------------------------------------------------------

    def writer(self) -> contextlib.AbstractContextManager[StoreWriter]:
        """Lock the store for writing; what the block wrote is committed when it ends."""
        return locked_writer(self)


def open_store(path: str | os.PathLike[str] | None = None) -> Store:
    """The store at ``path`` (default ``$SPECSCOPE_STORE`` or ``./specscope-data``), for
    reading: a directory that holds no store is an error, not an empty answer (a mistyped
    ``--store`` would otherwise report "no findings")."""
    store = Store(path if path is not None else default_store_path())
    if not store.exists():
        raise StoreError(
            "no specscope store here: `specscope ingest LOG` or `specscope pull` makes one "
            "(or point --store / $SPECSCOPE_STORE at it)",
            path=str(store.path),
        )
    store.manifest()
    return store


__all__ = ["DEFAULT_STORE", "Store", "StoreWriter", "default_store_path", "open_store"]
