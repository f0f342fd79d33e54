"""Writing a store: one writer at a time (a file lock), every file written under a temporary
name and renamed into place, the ingest committed in the manifest last. Files of an
ingest that never committed are removed by the next writer, so a killed ingest leaves no
trace.
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
from typing import Any, Protocol

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from specscope.errors import StoreError
from specscope.schema import SCHEMA_VERSION, TABLES
from specscope.store.layout import (
    LOCK,
    MANIFEST,
    STAGE,
    committed_files,
    ingest_of,
    read_manifest,
)
from specscope.store.rollup import RunSums

_LOCK_WAIT_S = 30.0
ROW_GROUPS_PER_FILE = 256


class StoreLike(Protocol):
    """What a writer needs of a store: where it is and its manifest."""

    path: Path

    def manifest(self) -> dict[str, Any]: ...


@contextlib.contextmanager
def locked_writer(store: StoreLike) -> Iterator[StoreWriter]:
    """Lock the store for writing; what the block wrote is committed when it ends."""
    try:
        store.path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the store ({exc.strerror})", path=str(store.path)) from exc
    if not store.path.is_dir():
        raise StoreError("not a directory", path=str(store.path))
    store.manifest()  # refuse a newer schema before touching anything
    lock_path = store.path / LOCK
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
                        path=str(store.path),
                    ) from exc
                time.sleep(0.1)
        _remove_uncommitted(store.path)
        w = StoreWriter(store)
        try:
            yield w
            w.commit()
            _remove_superseded(store.path)
        finally:
            shutil.rmtree(store.path / STAGE, ignore_errors=True)
    finally:
        os.close(fd)


def _remove_uncommitted(path: Path) -> None:
    # Stage files of an ingest that was killed before it could remove them.
    shutil.rmtree(path / STAGE, ignore_errors=True)
    committed = {i["id"] for i in read_manifest(path).get("ingests", [])}
    for table in TABLES:
        root = path / table
        if not root.is_dir():
            continue
        for p in root.rglob("*"):
            if p.is_file() and (
                p.suffix == ".tmp" or (p.suffix == ".parquet" and ingest_of(p) not in committed)
            ):
                p.unlink(missing_ok=True)


def _remove_superseded(path: Path) -> None:
    for table in ("runs", "sources"):
        keep = set(committed_files(path, table))
        root = path / table
        if root.is_dir():
            for p in root.rglob("*.parquet"):
                if p not in keep:
                    p.unlink(missing_ok=True)


class StoreWriter:
    """Writes one ingest's files; ``commit`` makes them visible."""

    def __init__(self, store: StoreLike, *, ingest_id: str | None = None) -> None:
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
            if summed is not None:
                rollup = summed.table(TABLES["run_sums"])
            else:
                assert run_sums is not None  # spec_decode rows are summed here unless given
                rollup = run_sums()
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


__all__ = ["ROW_GROUPS_PER_FILE", "StoreWriter", "locked_writer"]
