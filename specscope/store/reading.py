"""The Parquet store: a directory of hive-partitioned tables that polars, DuckDB, Spark and
Trino read directly.

    STORE/specscope.json                               schema version, committed ingests
    STORE/<table>/source_id=<id>/part-<ingest>.parquet  spec_decode, engine_stats, events
    STORE/runs/source_id=<id>/runs-<ingest>.parquet     the runs of a source (latest wins)
    STORE/sources/sources-<ingest>.parquet              one row per ingested source

Writers hold ``STORE/.lock``, write every file under a temporary name and rename it into
place, and commit the ingest in ``specscope.json`` last. Files of an ingest that never
committed are removed by the next writer, so a killed ingest leaves no trace.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from specscope.errors import StoreError
from specscope.schema import PARTITIONED, SCHEMA_VERSION, TABLES, polars_schema
from specscope.store.rollup import RunSums

MANIFEST = "specscope.json"
STAGE = "stage"  # rows on their way in, during an ingest
LOCK = ".lock"
DEFAULT_STORE = "specscope-data"
_LOCK_WAIT_S = 30.0


def default_store_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    return Path(env.get("SPECSCOPE_STORE") or DEFAULT_STORE)


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
        file = self.path / MANIFEST
        if not file.is_file():
            return {"schema_version": SCHEMA_VERSION, "ingests": []}
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreError(f"unreadable manifest ({exc})", path=str(file)) from exc
        version = data.get("schema_version")
        if not isinstance(version, int):
            raise StoreError("manifest has no schema_version", path=str(file))
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"written by a newer specscope (schema {version}; this one reads up to "
                f"{SCHEMA_VERSION}): upgrade specscope",
                path=str(self.path),
            )
        return data

    def _committed(self) -> set[str]:
        return {i["id"] for i in self.manifest().get("ingests", [])}

    def files(self, table: str) -> list[Path]:
        """The committed data files of ``table`` (latest only, for runs and sources)."""
        root = self.path / table
        if not root.is_dir():
            return []
        # The committed ingests, in the order they were committed.
        order = {i["id"]: n for n, i in enumerate(self.manifest().get("ingests", []))}
        found = [p for p in root.rglob("*.parquet") if _ingest_of(p) in order]
        if table in ("runs", "sources"):
            latest: dict[Path, Path] = {}
            for p in found:
                best = latest.get(p.parent)
                if best is None or order[_ingest_of(p)] > order[_ingest_of(best)]:
                    latest[p.parent] = p
            found = list(latest.values())
        # As written: by folder, by ingest (in the order they were committed: two ingests
        # in one second have ids in random order), then by number within an ingest.
        return sorted(found, key=lambda p: (str(p.parent), order[_ingest_of(p)], _number(p)))

    def table(self, name: str) -> pl.LazyFrame:
        if name not in TABLES:
            raise StoreError(f"no table {name!r}; tables: {', '.join(TABLES)}")
        schema = TABLES[name]
        files = self.files(name)
        if not files:
            empty = pl.from_arrow(schema.empty_table())
            assert isinstance(empty, pl.DataFrame)
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
        have = {(p.parent.name, _ingest_of(p)) for p in self.files("run_sums")}
        return all((p.parent.name, _ingest_of(p)) in have for p in self.files("spec_decode"))

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

    @contextlib.contextmanager
    def writer(self) -> Iterator[StoreWriter]:
        """Lock the store for writing; what the block wrote is committed when it ends."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the store ({exc.strerror})", path=str(self.path)
            ) from exc
        if not self.path.is_dir():
            raise StoreError("not a directory", path=str(self.path))
        self.manifest()  # refuse a newer schema before touching anything
        lock_path = self.path / LOCK
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(
                f"cannot open the lock file ({exc.strerror})", path=str(lock_path)
            ) from exc
        try:
            deadline = time.monotonic() + _LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError as exc:
                    if time.monotonic() > deadline:
                        raise StoreError(
                            f"another specscope process is writing (it holds {lock_path}); "
                            "try again when it has finished",
                            path=str(self.path),
                        ) from exc
                    time.sleep(0.1)
            self._remove_uncommitted()
            w = StoreWriter(self)
            try:
                yield w
                w.commit()
                self._remove_superseded()
            finally:
                shutil.rmtree(self.path / STAGE, ignore_errors=True)
        finally:
            os.close(fd)

    def _remove_uncommitted(self) -> None:
        # Stage files of an ingest that was killed before it could remove them.
        shutil.rmtree(self.path / STAGE, ignore_errors=True)
        committed = self._committed()
        for table in TABLES:
            root = self.path / table
            if not root.is_dir():
                continue
            for p in root.rglob("*"):
                if p.is_file() and (
                    p.suffix == ".tmp"
                    or (p.suffix == ".parquet" and _ingest_of(p) not in committed)
                ):
                    p.unlink(missing_ok=True)

    def _remove_superseded(self) -> None:
        for table in ("runs", "sources"):
            keep = set(self.files(table))
            root = self.path / table
            if root.is_dir():
                for p in root.rglob("*.parquet"):
                    if p not in keep:
                        p.unlink(missing_ok=True)


def _ingest_of(path: Path) -> str:
    """The ingest id in a data file's name (``part-<id>.parquet``, ``part-<id>.<n>.parquet``
    for the next files of one write)."""
    return path.name.split("-", 1)[-1].split(".", 1)[0]


def _number(path: Path) -> int:
    """A data file's place among the files of one write (``part-<id>.<n>.parquet``)."""
    pieces = path.name.split(".")
    return int(pieces[1]) if len(pieces) == 3 and pieces[1].isdigit() else 0


class StoreWriter:
    """Writes one ingest's files; ``commit`` makes them visible."""

    def __init__(self, store: Store, *, ingest_id: str | None = None) -> None:
        """``ingest_id``: write files for that ingest (a process helping the one that
        commits it), not a new one."""
        self.store = store
        self.ingest_id = ingest_id or (
            datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + uuid.uuid4().hex[:6]
        )
        self.written: list[Path] = []
        self.sources: list[str] = []
        self._stages = 0

    @contextlib.contextmanager
    def _atomic(self, dest: Path) -> Iterator[Path]:
        """A temporary name to write ``dest`` under; once written it is synced and renamed.
        A write that fails is a StoreError and leaves nothing behind."""
        tmp = dest.with_name(dest.name + ".tmp")
        try:
            yield tmp
            if tmp.exists():
                with open(tmp, "rb") as f:
                    os.fsync(f.fileno())
                os.replace(tmp, dest)
                self.written.append(dest)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StoreError(
                f"cannot write {dest.name} ({exc.strerror or exc}); "
                "nothing of this ingest was committed",
                path=str(self.store.path),
            ) from exc

    def _write(self, table: pa.Table, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with self._atomic(dest) as tmp:
            pq.write_table(table, tmp, compression="zstd")

    def add(self, name: str, source_id: str, rows: list[dict[str, Any]]) -> int:
        """Append rows of a partitioned table for one source."""
        if not rows and name != "runs":
            return 0
        table = pa.Table.from_pylist(rows, schema=TABLES[name])
        stem = "runs" if name == "runs" else "part"
        dest = (
            self.store.path / name / f"source_id={source_id}" / f"{stem}-{self.ingest_id}.parquet"
        )
        self._write(table, dest)
        self.sources.append(source_id)
        return len(rows)

    def stage_path(self) -> Path:
        """A folder for an ingest's rows on their way to the store (``finish.Stage``); the
        next writer removes what a killed one left there."""
        self._stages += 1
        return self.store.path / STAGE / f"{self.ingest_id}-{os.getpid()}-{self._stages}"

    def mark(self) -> tuple[int, int]:
        """Where the writer is, to roll back to when one source fails half way."""
        return len(self.written), len(self.sources)

    def roll_back(self, mark: tuple[int, int]) -> None:
        for path in self.written[mark[0] :]:
            path.unlink(missing_ok=True)
        del self.written[mark[0] :]
        del self.sources[mark[1] :]

    def add_parts(
        self,
        name: str,
        source_id: str,
        parts: Iterable[pl.DataFrame],
        *,
        run_sums: Callable[[], pa.Table] | None = None,
    ) -> int:
        """Append rows of a partitioned table for one source, a frame at a time (memory
        holds one part, however many rows there are). A part is a row group; a file takes
        at most ROW_GROUPS_PER_FILE of them, then the next file begins (a Parquet writer
        holds every group's metadata until it closes). Spec-decode rows get their
        ``run_sums`` beside them: summed here, or ``run_sums()`` once the parts are read
        (a caller that sums the same rows already)."""
        folder = self.store.path / name / f"source_id={source_id}"
        schema = TABLES[name]
        written = 0
        summed = RunSums() if name == "spec_decode" and run_sums is None else None
        pending = iter(p for p in parts if not p.is_empty())
        part = next(pending, None)
        sequence = 0
        while part is not None:
            stem = f"part-{self.ingest_id}" + (f".{sequence}" if sequence else "")
            with self._atomic(folder / f"{stem}.parquet") as tmp:
                folder.mkdir(parents=True, exist_ok=True)
                with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
                    for _ in range(ROW_GROUPS_PER_FILE):
                        if part is None:
                            break
                        writer.write_table(part.to_arrow().cast(schema))
                        if summed is not None:
                            summed.add(part)
                        written += len(part)
                        part = next(pending, None)
            sequence += 1
        if written:
            self.sources.append(source_id)
        if name == "spec_decode" and written:
            rollup = run_sums() if summed is None else summed.table(TABLES["run_sums"])
            dest = self.store.path / "run_sums" / f"source_id={source_id}"
            self._write(rollup, dest / f"part-{self.ingest_id}.parquet")
        return written

    def replace_sources(self, rows: list[dict[str, Any]]) -> None:
        table = pa.Table.from_pylist(rows, schema=TABLES["sources"])
        self._write(table, self.store.path / "sources" / f"sources-{self.ingest_id}.parquet")

    def commit(self) -> None:
        if not self.written:
            return
        manifest = self.store.manifest()
        manifest["schema_version"] = SCHEMA_VERSION
        manifest.setdefault("ingests", []).append(
            {
                "id": self.ingest_id,
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                "sources": sorted(set(self.sources)),
            }
        )
        file = self.store.path / MANIFEST
        tmp = file.with_name(MANIFEST + ".tmp")
        try:
            tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, file)
        except OSError as exc:
            raise StoreError(
                f"cannot commit ({exc.strerror or exc}); nothing of this ingest was committed",
                path=str(file),
            ) from exc


ROW_GROUPS_PER_FILE = 256


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
