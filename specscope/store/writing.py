"""Writing a store: writers side by side, each in its own part of ``stage/`` (claimed by
``stage/owner-<ingest>.json``, a lease: ``locking``); the store's lock is held only to
commit. Every data file is written in the stage and moved into its table only once the
ingest is committed (``commit`` says in which order, and why no reader sees a row of an
ingest that did not commit). What a killed writer left is finished (committed) or removed
(not committed, and its writer gone) by the next writer that commits, and before a writer
reads the store. Two writers of one source: the second to commit commits nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from specscope.errors import StoreError
from specscope.schema import TABLES
from specscope.store import commit as committing
from specscope.store import durable
from specscope.store.days import Folders
from specscope.store.integrity import inspect
from specscope.store.layout import (
    DATED,
    LATEST_ONLY,
    LOCK,
    MANIFEST,
    STAGE,
    DataFile,
    files_dir,
    ingest_of,
    live_files,
    read_manifest,
)
from specscope.store.locking import (
    HELD,
    TAKEOVER,
    Lease,
    Watchdog,
    acquire,
    lease_seconds,
    own_stage,
)
from specscope.store.rollup import RunSums

_LOCK_WAIT_S = 30.0
ROW_GROUPS_PER_FILE = 256
# Files of one ``add_parts`` open at once; the least recently written is closed past it
# (rows coming back to its folder go to the folder's next file). An open Parquet writer
# holds about 0.2 MB, so a log over 171 days (1 GB generated) held 31 MB more at its end
# with every day's file open, and a log over years grew by the year.
OPEN_FILES = 8
# A source's newest file takes the next rows while under both (``StoreWriter.add_parts``):
# 100 pulls of one server stay one file, and rewriting a file costs at most this much.
GROW_ROWS = 100_000
GROW_BYTES = 8 << 20


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """How the store's Parquet is written: zstd, and dictionary pages for the text columns
    only (a source, run id or format repeats in every row). pyarrow's default puts every
    column through a dictionary first; the numbers of a log's records (counts, rates,
    lines) are nearly all distinct, and their dictionaries were 28% of the encoding's CPU
    and made the files larger (100 MB server log: 0.275 -> 0.199 CPU s, 3.78 -> 2.71 MB;
    bench/README, ninth pass)."""
    text = [
        f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
    ]
    return {"compression": "zstd", "use_dictionary": text}


class StoreLike(Protocol):
    """What a writer needs of a store: where it is and its manifest."""

    path: Path

    def manifest(self) -> dict[str, Any]: ...


@contextlib.contextmanager
def locked_writer(store: StoreLike) -> Iterator[StoreWriter]:
    """A writer of the store; what the block wrote is committed when it ends. Writers
    write side by side, each in its own part of ``stage/``; the store's lock is held only
    to commit (``StoreWriter.commit``). An OSError of the store in the block (a full disk,
    first of all) is a StoreError, and nothing of the block is committed."""
    made = not store.path.exists()
    try:
        store.path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the store ({exc.strerror})", path=str(store.path)) from exc
    if not store.path.is_dir():
        raise StoreError("not a directory", path=str(store.path))
    store.manifest()  # refuse a newer schema before touching anything
    _recover_first(store.path)
    seen = {str(i.get("id")) for i in store.manifest().get("ingests", [])}
    ingest_id = new_ingest_id()
    stage = store.path / STAGE
    try:
        owner = own_stage(stage, ingest_id, lease_seconds())
    except OSError as exc:
        raise _store_error(exc, store.path, "cannot write the store") from exc
    try:
        with Watchdog(owner, stage, only=ingest_id):
            w = StoreWriter(store, ingest_id=ingest_id, lease=owner, seen=seen)
            try:
                yield w
                w.commit()
            except OSError as exc:
                if not _of_store(exc, store.path):
                    raise  # not the store's (a server that went away, say): the caller's
                raise _store_error(exc, store.path, "cannot write the store") from exc
            finally:
                committing.remove_stage(store.path, ingest_id, committed=w.committed)
    finally:
        owner.release()
        with contextlib.suppress(OSError):
            os.rmdir(stage)  # only if no other writer is at work
        if made:
            _unmake_if_empty(store.path)


def _recover_first(root: Path) -> None:
    """Before this writer reads the store: move in what a committed ingest left in the
    stage (else this writer would not see those rows, and write them again), and remove
    what writers that are gone left there."""
    if not committing.left_behind(root, lease_seconds()):
        return
    try:
        lock = acquire(root, wait_s=_LOCK_WAIT_S, lease_s=lease_seconds(), what="recover")
    except OSError as exc:
        raise _store_error(exc, root, "cannot lock the store") from exc
    try:
        committing.recover(root, lease_seconds())
    except OSError as exc:
        raise _store_error(exc, root, "cannot recover the store") from exc
    finally:
        lock.release()


def _unmake_if_empty(root: Path) -> None:
    """A store this writer made and nothing was committed to (a first ingest that failed)
    is not left behind as an empty folder that looks like a store."""
    if (root / MANIFEST).exists():
        return
    with contextlib.suppress(OSError):
        if any((root / STAGE).iterdir()):
            return  # another writer is at work here: its lock files are its own
    for name in (LOCK, HELD, TAKEOVER):
        with contextlib.suppress(OSError):
            (root / name).unlink()
    with contextlib.suppress(OSError):
        os.rmdir(root / STAGE)
    with contextlib.suppress(OSError):
        os.rmdir(root)  # only if nothing else is in it


def new_ingest_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + uuid.uuid4().hex[:6]


def _disk_full_in(exc: BaseException | None) -> OSError | None:
    """The disk-full OSError that ``exc`` is or was raised from, if any."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and durable.disk_full(exc):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _of_store(exc: OSError, root: Path) -> bool:
    """Whether an OSError is the store's: a full disk, or a file inside the store."""
    if durable.disk_full(exc):
        return True
    inside = os.path.abspath(root) + os.sep
    if isinstance(exc.filename, str):
        return os.path.abspath(exc.filename).startswith(inside)
    # polars names the file in its message only, as it was given (relative or not)
    text, given = str(exc), os.fspath(root).rstrip(os.sep) + os.sep
    return inside in text or re.search(r"(^|[\s:'\"(])" + re.escape(given), text) is not None


def _store_error(exc: OSError, root: Path, what: str) -> StoreError:
    """An OSError met while writing the store, as one line."""
    if durable.disk_full(exc):
        return StoreError(
            f"{what}: the disk is full ({durable.reason(exc)}); nothing of this ingest "
            "was committed",
            path=str(root),
        )
    where = exc.filename if isinstance(exc.filename, str) else str(root)
    return StoreError(f"{what} ({durable.reason(exc)})", path=where)


class StoreWriter:
    """Writes one ingest's files into the stage; ``commit`` brings them into the store."""

    def __init__(
        self,
        store: StoreLike,
        *,
        ingest_id: str | None = None,
        lease: Lease | None = None,
        seen: set[str] | None = None,
    ) -> None:
        """``ingest_id``: write files for that ingest (a process helping the one that
        commits it), not a new one. ``lease``: the committing writer's claim on its stage.
        ``seen``: the ingests committed when the writer began (another committed since
        that wrote a source this one writes is a conflict)."""
        self.store = store
        self.ingest_id = ingest_id or new_ingest_id()
        self.lease = lease
        self.seen = seen
        self.written: list[Path] = []  # staged files, at their store paths under the stage
        self.sources: list[str] = []
        self.committed = False
        self._stages = 0
        self._source_rows: list[dict[str, Any]] | None = None
        self.replaces: list[str] = []  # a compaction's: the paths its files replace
        self.prune: set[str] = set()  # paths replaced a lease ago, gone: their entries go

    def staged(self, *parts: str) -> Path:
        """Where a data file of this ingest waits for the commit: its path in the store,
        under ``stage/files-<ingest>/`` (out of every table folder)."""
        return files_dir(self.store.path, self.ingest_id).joinpath(*parts)

    def _beat(self) -> None:
        if self.lease is not None:
            self.lease.beat()

    @contextlib.contextmanager
    def _file(self, dest: Path) -> Iterator[Path]:
        """``dest`` (a staged path) to write; once written it is synced and listed. A
        write that fails is a StoreError and leaves nothing behind."""
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            yield dest
            durable.sync_file(dest)
        except OSError as exc:
            dest.unlink(missing_ok=True)
            full = "the disk is full: " if durable.disk_full(exc) else ""
            raise StoreError(
                f"cannot write {dest.name} ({full}{durable.reason(exc)}); "
                "nothing of this ingest was committed",
                path=str(self.store.path),
            ) from exc
        self.written.append(dest)
        self._beat()

    def _write(self, table: pa.Table, dest: Path) -> None:
        with self._file(dest) as path:
            pq.write_table(table, path, **parquet_options(table.schema))

    def add(self, name: str, source_id: str, rows: list[dict[str, Any]]) -> int:
        """Append rows of a partitioned table for one source."""
        if not rows and name != "runs":
            return 0
        table = pa.Table.from_pylist(rows, schema=TABLES[name])
        stem = "runs" if name == "runs" else "part"
        self._write(
            table, self.staged(name, f"source_id={source_id}", f"{stem}-{self.ingest_id}.parquet")
        )
        self.sources.append(source_id)
        return len(rows)

    def stage_path(self) -> Path:
        """A folder for an ingest's rows on their way to the store (``finish.Stage``); the
        next writer removes what a killed one left there."""
        self._stages += 1
        self._beat()
        return self.store.path / STAGE / f"{self.ingest_id}-{os.getpid()}-{self._stages}"

    def mark(self) -> tuple[int, int]:
        """Where the writer is, to roll back to when one source fails half way."""
        return len(self.written), len(self.sources)

    def roll_back(self, mark: tuple[int, int]) -> None:
        """Forget what was written since ``mark`` (a source that failed half way). Called
        while that failure is handled: one for lack of space is the store's, not the
        source's (every later write would meet it too), so it ends the write as a
        StoreError (exit 9), whatever the caller makes of other failures."""
        full = _disk_full_in(sys.exc_info()[1])
        for path in self.written[mark[0] :]:
            path.unlink(missing_ok=True)
        del self.written[mark[0] :]
        del self.sources[mark[1] :]
        if full is not None:
            raise _store_error(full, self.store.path, "cannot write the store") from full

    def add_parts(
        self,
        name: str,
        source_id: str,
        parts: Iterable[pl.DataFrame],
        *,
        run_sums: Callable[[], pa.Table] | None = None,
    ) -> int:
        """Append rows of a partitioned table for one source, a frame at a time (memory
        holds one part, and at most ``days.GATHER_ROWS`` rows held back). A part is a row
        group; in a dated table (``layout.DATED``) a part over several days is cut by day
        and each day's cuts gathered into a group, and rows spread thin over many days go
        to the source's folder whole (``days``). A file takes at most
        ROW_GROUPS_PER_FILE of them, then the next file of its folder begins (a Parquet
        writer holds every group's metadata until it closes); at most OPEN_FILES folders'
        files are open, and rows that come back to a folder whose file was closed go to
        its next file. Spec-decode rows get their
        ``run_sums`` beside them, in the source's folder (not a day's: a run's sums span
        its days): summed here, or ``run_sums()`` once the parts are read (a caller that
        sums the same rows already).

        The first rows of each folder go into its newest file while it is small
        (``growable``): a pull every few minutes would otherwise leave a file a pull in
        every table."""
        schema = TABLES[name]
        wide = _wide(schema)
        summed = RunSums() if name == "spec_decode" and run_sums is None else None
        files: dict[str, _Open] = {}
        recent: dict[str, _Open] = {}
        folders = Folders(name, source_id, dated=name in DATED)
        written = 0
        with contextlib.ExitStack() as stack:
            live: list[DataFile] | None = None  # the table's files, read once for all days

            def into(folder: str, frames: list[pl.DataFrame]) -> _Open:
                nonlocal live, written
                out = files.get(folder)
                if out is None:
                    if live is None:
                        live = self._live(name)
                    out = files[folder] = _Open(self._growable(name, folder, live))
                if out.writer is None or out.groups >= ROW_GROUPS_PER_FILE:
                    if out.file is not None:
                        out.file.close()
                    out.file = stack.enter_context(contextlib.ExitStack())
                    self._open(out, name, folder, schema)
                assert out.writer is not None
                group = [_arrow(f, wide) for f in frames]
                out.writer.write_table(group[0] if len(group) == 1 else pa.concat_tables(group))
                out.groups += 1
                written += sum(len(f) for f in frames)
                self._beat()
                return out

            def write(groups: list[tuple[str, list[pl.DataFrame]]]) -> None:
                for at, (folder, frames) in enumerate(groups):
                    recent.pop(folder, None)  # the folders' open files, least recent first
                    recent[folder] = into(folder, frames)
                    coming = {f for f, _ in groups[at + 1 :]}
                    # The least recent file that none of these groups is for closes, and
                    # what its folder holds back goes in first: a log whose days go by
                    # comes back to none of them.
                    last = next((f for f in recent if f not in coming), None)
                    if len(recent) > OPEN_FILES and last is not None:
                        for _, held in folders.take(last):
                            into(last, held)
                        oldest = recent.pop(last)
                        assert oldest.file is not None
                        oldest.file.close()
                        oldest.file, oldest.writer = None, None

            for part in parts:
                if summed is not None and not part.is_empty():
                    summed.add(part)
                write(folders.add(part))
            write(folders.end())
        if not files:
            return 0
        self.sources.append(source_id)
        if name == "spec_decode":
            if summed is not None:
                rollup = summed.table(TABLES["run_sums"])
            else:
                assert run_sums is not None  # spec_decode rows are summed here unless given
                rollup = run_sums()
            folder = f"source_id={source_id}"
            sums_file = self.store.path / "run_sums" / folder / f"part-{self.ingest_id}.parquet"
            grown = {ingest_of(o.grown) for o in files.values() if o.grown is not None}
            if len(grown) == 1 and all(o.grown is not None and o.made == 1 for o in files.values()):
                # Only grown files took rows, all of one ingest: its rollup takes their sums.
                sums_file = sums_file.with_name(f"part-{grown.pop()}.parquet")
                if sums_file.is_file():
                    rollup = pa.concat_tables(
                        [conform(pq.read_table(sums_file), TABLES["run_sums"]), rollup]
                    )
            self._write(rollup, self.staged(*sums_file.relative_to(self.store.path).parts))
        return written

    def _open(self, out: _Open, name: str, folder: str, schema: pa.Schema) -> None:
        """The next file of ``folder`` for ``out`` to write into: its newest file grown
        (the first, where it may be) or a new one."""
        assert out.file is not None
        stem = f"part-{self.ingest_id}" + (f".{out.made}" if out.made else "")
        dest = self.staged(name, folder, f"{stem}.parquet")
        grow = out.grown is not None and out.made == 0
        if grow:
            assert out.grown is not None
            dest = self.staged(*out.grown.relative_to(self.store.path).parts)
        path = out.file.enter_context(self._file(dest))
        # polars' columns as they come (``_wide``); the file says only Parquet's types,
        # which every reader (pyarrow too) reads as the table's.
        wide = _wide(schema)
        out.writer = out.file.enter_context(
            pq.ParquetWriter(path, wide, store_schema=False, **parquet_options(schema))
        )
        if grow:
            assert out.grown is not None
            out.writer.write_table(conform(pq.read_table(out.grown), schema).cast(wide))
        out.made += 1
        out.groups = 0

    def _live(self, name: str) -> list[DataFile]:
        """The table's files now, for ``_growable`` (none where the store cannot say)."""
        if name in LATEST_ONLY:
            return []
        try:
            return live_files(self.store.path, name)
        except StoreError:
            return []

    def _growable(self, name: str, folder: str, live: list[DataFile]) -> Path | None:
        """The newest file of ``name/folder`` (of ``live``, the table's files) if the next
        rows may go into it: it is small (under GROW_ROWS rows and GROW_BYTES), whole as
        committed, and this ingest has written nothing there yet (two versions of one file
        in one ingest: the second would lose the first's rows)."""
        if name in LATEST_ONLY:
            return None
        where = self.store.path / name / folder
        staged = self.staged(name, folder)
        if any(p.parent == staged for p in self.written):
            return None
        files = [f for f in live if f.path.parent == where]
        if not files or files[-1].entry is None:
            return None
        newest = files[-1]
        if newest.entry is None or newest.entry.rows >= GROW_ROWS:
            return None
        if newest.entry.bytes >= GROW_BYTES or inspect(newest).problem is not None:
            return None
        return newest.path

    def replace_sources(self, rows: list[dict[str, Any]]) -> None:
        """The sources table as this writer leaves it. Only the rows this ingest stamped
        (``sources_row``) are its to say: at the commit they replace those of the same
        sources in the table as it is then (another writer may have added its own since)."""
        self._source_rows = rows

    def _own_source_rows(self) -> dict[str, dict[str, Any]]:
        """The rows of sources this ingest stamped (``sources_row``), by source."""
        rows = self._source_rows or []
        return {r["source_id"]: r for r in rows if r.get("ingest_id") == self.ingest_id}

    def _write_sources(self, root: Path) -> None:
        """The sources table with this ingest's rows in place of those of their sources."""
        if not self._own_source_rows():
            return
        now = live_files(root, "sources")
        self.write_sources(pq.read_table(now[-1].path).to_pylist() if now else [])

    def write_sources(self, current: list[dict[str, Any]]) -> None:
        """The sources table as ``current`` with this ingest's rows in place of those of
        their sources (written again, should a commit on object storage be retried)."""
        mine = self._own_source_rows()
        if not mine:
            return
        kept = [r for r in current if r["source_id"] not in mine]
        table = pa.Table.from_pylist([*kept, *mine.values()], schema=TABLES["sources"])
        dest = self.staged("sources", f"sources-{self.ingest_id}.parquet")
        if dest in self.written:
            self.written.remove(dest)
        self._write(table, dest)

    def _still_holding(self, lock: Lease | None = None) -> None:
        """A StoreError unless this writer still owns its stage (and, at the commit, the
        store's lock): one that hung past its lease lost them to another writer, and must
        commit nothing."""
        for held, what in ((self.lease, "its stage"), (lock, "the store's lock")):
            if held is None:
                continue
            held.beat(now=True)
            if not held.held():
                raise StoreError(
                    f"this writer lost {what} (it sent no heartbeat for longer than the "
                    "lease, and another writer took it over); nothing of this ingest was "
                    "committed",
                    path=str(self.store.path),
                )

    def conflicts(self, manifest: dict[str, Any], root: Path | str) -> None:
        """A StoreError if an ingest committed since this writer began wrote a source this
        one writes: both read the same state, and the later would undo the earlier."""
        if self.seen is None:
            return
        mine = set(self.sources)
        mine |= set(self._own_source_rows())
        for ingest in manifest.get("ingests", []):
            if str(ingest.get("id")) in self.seen:
                continue
            both = sorted(mine & set(ingest.get("sources") or []))
            if both:
                raise StoreError(
                    f"another writer committed source {both[0]} while this one wrote it; "
                    "nothing of this ingest was committed: run it again",
                    path=str(root),
                )

    def commit(self) -> None:
        """Bring the staged files into the store (``commit``: stage, commit, move in),
        holding the store's lock for that alone."""
        if not self.written and self._source_rows is None and not self.prune:
            return
        elsewhere = getattr(self.store, "commit_remote", None)
        if elsewhere is not None:  # a store on object storage commits its own way (``remote``)
            elsewhere(self)
            return
        root = self.store.path
        self._still_holding()
        try:
            lock = acquire(
                root,
                wait_s=_LOCK_WAIT_S,
                lease_s=lease_seconds(),
                what=self.ingest_id,
                waiting=self._beat,
            )
        except OSError as exc:
            raise _store_error(exc, root, "cannot lock the store") from exc
        try:
            committing.recover(root, lease_seconds(), keep=self.ingest_id)
            self._still_holding(lock)
            self.conflicts(read_manifest(root), root)
            if self._source_rows is not None:
                self._write_sources(root)
            self._commit(root, lock)
        finally:
            lock.release()

    def _commit(self, root: Path, lock: Lease) -> None:
        entries = committing.describe(root, self.ingest_id, self.written)
        made: list[Path] = []
        try:
            made = committing.prepare(root, self.ingest_id, entries)
            self._still_holding(lock)
            committing.write_commit(
                root, self.ingest_id, self.sources, entries, self.replaces, self.prune
            )
        except OSError as exc:
            committing.unmake(made)
            raise StoreError(
                f"cannot commit ({durable.reason(exc)}); nothing of this ingest was committed",
                path=str(root),
            ) from exc
        except BaseException:
            committing.unmake(made)
            raise
        self.committed = True
        try:
            committing.move_in(root, self.ingest_id, entries)
            committing.remove_superseded(root)
        except OSError as exc:
            raise StoreError(
                f"committed, but its files could not all be moved into the tables "
                f"({durable.reason(exc)}); the next write moves them in",
                path=str(root),
            ) from exc


def _wide(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the large text and list types polars' ``to_arrow`` gives: Parquet
    stores them as it stores the small ones, and casting every part to those cost 0.06-0.09
    CPU s per 100 MB of server log (bench/README, ninth pass)."""
    return pa.schema([f.with_type(_large(f.type)) for f in schema])


def _large(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_string(kind):
        return pa.large_string()
    if pa.types.is_list(kind):
        return pa.large_list(kind.value_field.with_type(_large(kind.value_type)))
    return kind


def _arrow(frame: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    """``frame`` as an Arrow table of ``schema`` (``_wide``), cast only where it is not."""
    table = frame.to_arrow()
    return table if table.schema.equals(schema) else table.cast(schema)


class _Open:
    """A folder's file being written by ``add_parts``: the file's ExitStack (closing it
    closes the Parquet writer, then syncs and lists the file), row groups in it, files
    made so far, and the folder's newest file if the first of them grows it."""

    def __init__(self, grown: Path | None) -> None:
        self.grown = grown
        self.file: contextlib.ExitStack | None = None
        self.writer: pq.ParquetWriter | None = None
        self.groups = 0
        self.made = 0


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns: one written before a column was added has it
    as nulls."""
    columns = [
        table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


__all__ = [
    "GROW_BYTES",
    "GROW_ROWS",
    "ROW_GROUPS_PER_FILE",
    "StoreWriter",
    "conform",
    "locked_writer",
    "new_ingest_id",
    "parquet_options",
]
