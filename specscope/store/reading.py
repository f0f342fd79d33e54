"""Reading a store: a directory of hive-partitioned Parquet tables that polars, DuckDB,
Spark and Trino read directly (``layout`` says where what is). Only committed files are
read: those the manifest lists, of ingests moved in whole; each is checked against its
entry (``integrity``) before it is read, and one that is not what was committed stops the
read with a StoreError naming it. A file the manifest does not list is not read.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import polars as pl

from specscope.errors import StoreError
from specscope.schema import PARTITIONED, TABLES, empty_table, polars_schema
from specscope.store import DEFAULT_STORE
from specscope.store.integrity import MISSING, Inspection, inspect
from specscope.store.layout import (
    MANIFEST,
    DataFile,
    default_store_path,
    ingest_of,
    live_files,
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
        return [f.path for f in self._files(table)]

    def _files(self, table: str) -> list[DataFile]:
        found = live_files(self.path, table)
        if table == "run_sums":  # derived: rows whose sums are lost are summed from the rows
            found = [f for f in found if f.path.exists()]
        return found

    def _checked(self, name: str) -> list[tuple[DataFile, Inspection]]:
        """The files of a table, each as committed; else a StoreError naming the first that
        is not. A file gone (the runs a writer just superseded) is looked for once more."""
        for attempt in range(2):
            checked = [(f, inspect(f)) for f in self._files(name)]
            problem = next((i.problem for _, i in checked if i.problem is not None), None)
            if problem is None:
                return checked
            if problem.kind != MISSING or attempt:
                raise StoreError(
                    f"{problem.kind} data file of {name}: {problem.detail} "
                    "(`specscope check` lists every such file)",
                    path=str(problem.path),
                )
        raise AssertionError("unreachable")

    def table(self, name: str) -> pl.LazyFrame:
        if name not in TABLES:
            raise StoreError(f"no table {name!r}; tables: {', '.join(TABLES)}")
        schema = TABLES[name]
        checked = self._checked(name)
        if not checked:
            empty = pl.DataFrame(empty_table(schema))
            if name in PARTITIONED:
                empty = empty.with_columns(pl.lit(None, pl.String).alias("source_id"))
            return empty.lazy()
        want = polars_schema(name)
        frames = []
        for f, seen in checked:
            lf = pl.scan_parquet(f.path)
            if seen.limit is not None:
                lf = lf.head(seen.limit)
            # A file written before a column was added lacks it: it reads as null.
            lf = lf.with_columns(
                pl.lit(None, dtype).alias(column)
                for column, dtype in want.items()
                if column not in seen.columns
            ).select(list(want))
            if name in PARTITIONED:
                source = f.path.parent.name.split("=", 1)[1]
                lf = lf.with_columns(pl.lit(source).alias("source_id"))
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
