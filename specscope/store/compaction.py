"""Compaction: each table folder's many small files merged into few, as one commit.

A store on object storage gets a file per table per commit (an object never grows), and a
fleet pulled a server a source gets a folder per server: a month of five-minute pulls
leaves thousands of files a table, each read, checked and opened on its own. ``compact``
rewrites the files of each folder that fewer files would hold (``COMPACT_ROWS`` rows
each) into new files of one ingest, in the order readers read them, and commits that
ingest like any other (a folder's lock for the commit alone; on object storage the
conditional put of the manifest), listing under ``replaces`` the paths its files take
the place of:

- **A reader** reads the manifest before the commit (the old files, still there) or
  after it (the new ones, once moved in): each row once either way. The replaced files
  stay a lease (``SPECSCOPE_LOCK_LEASE_S``, 10 minutes) after the compaction, so a reader
  that read the manifest just before has that long to read them; the next compaction
  deletes them and drops their entries from the manifest (``prune``), so the manifest
  grows with the files there are, not with every file there was.
- **A compactor killed** before its commit leaves a stage the next writer removes; after
  it, the ingest is committed and the next writer moves it in. Readers take neither half.
- **A writer of a source being compacted** (a pull that grows the newest file): whichever
  commits second commits nothing and says so, as two writers of one source do.

The rollups (``run_sums``) of a folder are compacted with its spec-decode rows, so that
every spec-decode file keeps its rollup beside it (``Store.sums_cover_rows``).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from specscope.errors import StoreError
from specscope.schema import TABLES
from specscope.store.integrity import Inspection
from specscope.store.layout import (
    LATEST_ONLY,
    REPLACES,
    DataFile,
    ingest_of,
    listed_files,
    live_files,
    moving,
    relative,
)
from specscope.store.locking import lease_seconds
from specscope.store.reading import RemoteStore, Store
from specscope.store.writing import StoreWriter, conform, parquet_options

COMPACT_ROWS = 1_000_000  # rows a compacted file holds at most
GROUP_ROWS = 65_536  # rows a row group of a compacted file holds at least (its last aside)
COMPACTED = tuple(t for t in TABLES if t not in LATEST_ONLY)


@dataclass
class Compacted:
    """What a compaction did: files read and written, by table; paths deleted."""

    ingest: str | None = None
    read: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    deleted: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ingest": self.ingest,
            "tables": {
                t: {"files_read": n, "files_written": self.written[t], "rows": self.rows[t]}
                for t, n in self.read.items()
            },
            "deleted": self.deleted,
        }

    def lines(self) -> list[str]:
        if not self.read:
            out = ["nothing to compact: every folder holds as few files as it can"]
        else:
            out = [
                f"{t}: {n} files into {self.written[t]} ({self.rows[t]} rows)"
                for t, n in self.read.items()
            ]
        if self.deleted:
            out.append(f"deleted {self.deleted} files replaced a lease ago")
        return out


def compact(where: str | Path, *, rows: int = COMPACT_ROWS) -> Compacted:
    """Compact the store at ``where`` (a folder or ``s3://bucket/prefix``)."""
    store = Store(where)
    if not store.exists():
        raise StoreError("no specscope store here (no specscope.json)", path=str(store))
    done = Compacted()
    due = _due(store)
    done.deleted = _delete(store, due)
    with store.writer() as w:
        w.prune = due
        folders = _folders(store)
        for (table, folder), files in sorted(folders.items()):
            if not _worth(files, rows):
                continue
            if table == "run_sums" or (
                table == "spec_decode" and not _covered(files, folders.get(("run_sums", folder)))
            ):
                continue  # rollups go with their rows, below
            _rewrite(w, table, folder, files, rows, done)
            if table == "spec_decode":
                _rewrite(w, "run_sums", folder, folders[("run_sums", folder)], rows, done)
        done.ingest = w.ingest_id if w.written else None
    return done


Checked = list[tuple[DataFile, Inspection]]


def _folders(store: Store) -> dict[tuple[str, str], Checked]:
    """The live files of each compacted table, by source folder (the days of a dated
    table's source together: their rollups are the source's), as readers read them."""
    out: dict[tuple[str, str], Checked] = defaultdict(list)
    for table in COMPACTED:
        for f, seen in store._checked(table):
            out[(table, f.path.parent.name)].append((f, seen))
    return out


def _worth(files: Checked, rows: int) -> bool:
    """Whether fewer files would hold the source's folder: one of its partitions (a day's
    folder, or the source's own) has more files than its rows need, each committed whole
    (none is a newer version on its way in) and listed (not legacy)."""
    if any(f.entry is None or seen.limit is not None for f, seen in files):
        return False
    held: dict[Path, list[int]] = defaultdict(list)
    for f, seen in files:
        held[f.path.parent].append(seen.rows)
    return any(len(n) > max(1, -(-sum(n) // rows)) for n in held.values())


def _covered(spec: Checked, sums: Checked | None) -> bool:
    """Every spec-decode file has its rollup beside it (else the rows are summed when read,
    and a compacted rollup would cover rows it did not sum)."""
    have = {ingest_of(f.path) for f, _ in sums or []}
    if any(f.entry is None for f, _ in sums or []):
        return False
    return all(ingest_of(f.path) in have for f, _ in spec)


def _rewrite(
    w: StoreWriter, table: str, folder: str, files: Checked, rows: int, done: Compacted
) -> None:
    """The source's files, in order, into files of ``rows`` rows at most, each in the
    partition (a day's folder) its rows came from: rows never move across partitions."""
    schema = TABLES[table]
    root = w.store.path / table
    sequence, held, in_file = 0, 0, 0
    into: Path | None = None  # the partition being written
    writer: pq.ParquetWriter | None = None
    buffered: list[pa.Table] = []
    written = 0
    opened: contextlib.ExitStack | None = None

    def flush() -> None:
        nonlocal held
        if buffered and writer is not None:
            writer.write_table(pa.concat_tables(buffered))
        buffered.clear()
        held = 0

    try:
        for f, seen in files:
            # polars, not pq.read_table: a pulled file holds a row group a run (a hundred
            # of a few dozen rows), which pyarrow reads at 120 ms of CPU a file, polars 45.
            data = conform(pl.read_parquet(f.path).to_arrow(), schema)
            if seen.limit is not None:
                data = data.slice(0, seen.limit)
            offset = 0
            while offset < len(data):
                if writer is None or in_file >= rows or into != f.path.parent:
                    flush()
                    if opened is not None:
                        opened.close()
                    into = f.path.parent
                    stem = f"part-{w.ingest_id}" + (f".{sequence}" if sequence else "")
                    opened = contextlib.ExitStack()
                    dest = w.staged(table, *into.relative_to(root).parts, f"{stem}.parquet")
                    path = opened.enter_context(w._file(dest))
                    writer = opened.enter_context(
                        pq.ParquetWriter(path, schema, **parquet_options(schema))
                    )
                    sequence, in_file = sequence + 1, 0
                take = data.slice(offset, rows - in_file)
                buffered.append(take)
                offset += len(take)
                in_file += len(take)
                held += len(take)
                written += len(take)
                if held >= GROUP_ROWS:
                    flush()
            w.replaces.append(relative(f.path, w.store.path))
        flush()
    finally:
        if opened is not None:
            opened.close()
    w.sources.append(folder.split("=", 1)[1])
    done.read[table] = done.read.get(table, 0) + len(files)
    done.written[table] = done.written.get(table, 0) + sequence
    done.rows[table] = done.rows.get(table, 0) + written


def _due(store: Store) -> set[str]:
    """Paths replaced by a compaction moved in longer than a lease ago: no reader of a
    manifest since reads them."""
    manifest = store.manifest()
    skip = store.moving() if isinstance(store, RemoteStore) else moving(store.path)
    lease = lease_seconds()
    now = datetime.now(UTC)
    out: set[str] = set()
    for ingest in manifest.get("ingests", []):
        if str(ingest.get("id")) in skip or not ingest.get(REPLACES):
            continue
        try:
            at = datetime.fromisoformat(str(ingest.get("at")))
        except ValueError:
            continue
        if (now - at).total_seconds() > lease:
            out |= {p for p in ingest[REPLACES] if isinstance(p, str)}
    # The runs and sources files a newer one superseded (deleted when it came in).
    for table in LATEST_ONLY:
        live = {f.path for f in live_files(store.path, table, manifest, skip=skip)}
        newest = {p.parent: p for p in live}
        out |= {
            relative(f.path, store.path)
            for f in listed_files(store.path, manifest)
            if f.table == table
            and f.ingest not in skip
            and f.path not in live
            and f.path.parent in newest
        }
    return out


def _delete(store: Store, due: set[str]) -> int:
    """Delete the files ``due`` names (those still there); how many were."""
    if not due:
        return 0
    if isinstance(store, RemoteStore):
        there = {m.rel for t in COMPACTED for m in store.objects.listing(f"{t}/")}
        gone = sorted(due & there)
        store.objects.delete(gone)
        return len(gone)
    n = 0
    for rel in sorted(due):
        path = store.path / rel
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            n += 1
    return n


__all__ = ["COMPACTED", "COMPACT_ROWS", "Compacted", "compact"]
