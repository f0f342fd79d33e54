"""Where a store keeps what: the manifest that commits ingests, the data files of each
table and how their names order them.

    STORE/specscope.json                               schema version, committed ingests
    STORE/<table>/date=<day>/source_id=<id>/part-<ingest>.parquet
                                                       spec_decode, engine_stats, events
    STORE/<table>/source_id=<id>/part-<ingest>.parquet  bench, run_sums; the three above
                                                       as writers before partitions wrote them
    STORE/runs/source_id=<id>/runs-<ingest>.parquet     the runs of a source (latest wins)
    STORE/sources/sources-<ingest>.parquet              one row per ingested source
    STORE/stage/                                        what is on its way in (no table's)
    STORE/.lock                                         the writers' lock and lease

Rows with a time are partitioned by their day (``DATED``: the UTC date of ``ts_utc``, else
the date ``ts`` prints; ``date=__HIVE_DEFAULT_PARTITION__`` for rows with neither, which
hive readers read as null) and then by source, hive-style, so that an engine given a day
opens that day's files alone (a file holds one day, however few its rows: ``days``). The
folder above ``source_id=`` is the partition's, so the source of a file is its folder's
name in either layout, and a store written before partitions reads as it did: the
manifest lists paths, whatever their depth.

The manifest lists each ingest with the files it committed (path, rows, bytes, sha256 and
the range of lines the file holds, which orders a source's files with no footer read):
only those files are the store's. A later ingest may list a path again: it grew that file
(``writing``: the newest file of a folder takes the next rows of its source, by rename
over it, until it is full), and its entry is the file's now. A grown file holds the rows
it held first, then the new ones, so the entry before still describes its first rows.

A compaction (``compaction``) is an ingest whose files take the place of others: its
``replaces`` lists their paths, which readers leave out once it is moved in (they are
deleted a lease later, and their entries dropped from the manifest).

An ingest committed before files were listed ("legacy") owns the files named after it.
An ingest whose files are still in ``stage/files-<id>/`` is committed but not yet moved
in (``commit``): readers leave it out until it is (of a file it grew and moved in
already, they read the rows the entry before describes).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specscope.errors import StoreError
from specscope.schema import SCHEMA_VERSION, TABLES
from specscope.store import DEFAULT_STORE

MANIFEST = "specscope.json"
STAGE = "stage"  # rows and files on their way in, during an ingest
FILES = "files-"  # stage/files-<ingest>/<table>/...: an ingest's data files before its commit
LOCK = ".lock"
LATEST_ONLY = ("runs", "sources")  # tables of which each folder's newest file is the table
DATED = ("spec_decode", "engine_stats", "events")  # tables partitioned by day, then source
DAY = "date"  # the day's partition key
NO_DAY = "__HIVE_DEFAULT_PARTITION__"  # the day of rows without a time (null to hive readers)
REPLACES = "replaces"  # a compaction's ingest: the paths its files take the place of

# How this package names data files: part-, runs- or sources-<ingest id>[.<n>].parquet,
# where an ingest id is a UTC time and six hex digits.
OWN_NAME = re.compile(r"(part|runs|sources)-\d{8}T\d{6}[0-9a-f]{6}(\.\d+)?\.parquet")
INGEST_ID = re.compile(r"\d{8}T\d{6}[0-9a-f]{6}")


class Unsaid:
    """What an entry written before entries kept a file's lines says of them."""

    def __repr__(self) -> str:
        return "UNSAID"


UNSAID = Unsaid()
LINES = "lines"  # an entry's key: [first, last] line of the file's rows, or null


@dataclass(frozen=True)
class FileEntry:
    """A committed data file as the manifest lists it. ``lines``: the least and greatest
    ``line`` of its rows (``order`` puts a source's files in line order by them, with no
    footer read), None where the file does not bound them (pulled rows have no line);
    ``UNSAID`` in an entry written before entries kept them (its footer says)."""

    path: str  # relative to the store, with /
    rows: int
    bytes: int
    sha256: str
    lines: tuple[int, int] | Unsaid | None = UNSAID

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "rows": self.rows,
            "bytes": self.bytes,
            "sha256": self.sha256,
        }
        if not isinstance(self.lines, Unsaid):
            out[LINES] = None if self.lines is None else list(self.lines)
        return out


@dataclass(frozen=True)
class DataFile:
    """A data file of the store: where it is, the ingest that committed it (and where that
    ingest comes in the commit order) and its entry (None for a legacy ingest's file).

    ``first``: where the ingest that made the file comes (a grown file keeps its place
    among its folder's files). ``newer``: the entry of an ingest that grew the file and is
    still being moved in; the file may already be that version, whose first
    ``entry.rows`` rows are the file as ``entry`` committed it."""

    path: Path
    table: str
    ingest: str
    order: int
    entry: FileEntry | None
    first: int = -1
    newer: FileEntry | None = None


def default_store_path(env: dict[str, str] | None = None) -> Path | str:
    """``$SPECSCOPE_STORE`` (a folder, or a URL kept as written: a Path would fold its
    ``//``), else ``./specscope-data``."""
    env = dict(os.environ) if env is None else env
    where = env.get("SPECSCOPE_STORE") or DEFAULT_STORE
    return where if "://" in where else Path(where)


def read_manifest(path: Path) -> dict[str, Any]:
    """The store's manifest (an empty one where there is none yet); a newer schema is refused."""
    file = path / MANIFEST
    if not file.is_file():
        return {"schema_version": SCHEMA_VERSION, "ingests": []}
    try:
        text = file.read_bytes()
    except OSError as exc:
        raise StoreError(f"unreadable manifest ({exc})", path=str(file)) from exc
    return parse_manifest(text, str(file), str(path))


def parse_manifest(text: bytes, file: str, store: str) -> dict[str, Any]:
    """A manifest's bytes as read from ``file`` (of the store at ``store``), checked."""
    try:
        data = json.loads(text.decode("utf-8"))
    except ValueError as exc:
        raise StoreError(f"unreadable manifest ({exc})", path=str(file)) from exc
    if not isinstance(data, dict):
        raise StoreError("manifest is not a JSON object", path=str(file))
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise StoreError("manifest has no schema_version", path=str(file))
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"written by a newer specscope (schema {version}; this one reads up to "
            f"{SCHEMA_VERSION}): upgrade specscope",
            path=store,
        )
    if not isinstance(data.get("ingests", []), list):
        raise StoreError("manifest's ingests is not a list", path=str(file))
    return data


def entries_of(ingest: dict[str, Any], manifest_path: Path) -> list[FileEntry] | None:
    """The files an ingest committed; None for a legacy ingest (it listed none)."""
    files = ingest.get("files")
    if files is None:
        return None
    try:
        return [
            FileEntry(
                str(f["path"]),
                int(f["rows"]),
                int(f["bytes"]),
                str(f["sha256"]),
                _lines(f[LINES]) if LINES in f else UNSAID,
            )
            for f in files
        ]
    except (TypeError, KeyError, ValueError) as exc:
        raise StoreError(
            f"manifest lists a file it cannot describe for ingest {ingest.get('id')!r} ({exc})",
            path=str(manifest_path),
        ) from exc


def _lines(said: Any) -> tuple[int, int] | None:
    if said is None:
        return None
    low, high = said  # a pair, else the entry is one the manifest cannot describe
    if isinstance(low, bool) or isinstance(high, bool) or int(low) > int(high):
        raise ValueError(f"lines {said!r}")
    return int(low), int(high)


def files_dir(path: Path, ingest_id: str) -> Path:
    """Where an ingest's data files wait for its commit (then to be moved into the tables)."""
    return path / STAGE / f"{FILES}{ingest_id}"


def moving(path: Path) -> set[str]:
    """Ingests whose files wait in ``stage/`` (committed ones among them are being moved in)."""
    try:
        names = os.listdir(path / STAGE)
    except OSError:
        return set()
    return {n[len(FILES) :] for n in names if n.startswith(FILES)}


def listed_files(
    path: Path, manifest: dict[str, Any] | None = None, table: str | None = None
) -> list[DataFile]:
    """Every data file the manifest's ingests own, of every table (or of ``table``), in
    commit order: those it lists, and the files named after its legacy ingests."""
    manifest = read_manifest(path) if manifest is None else manifest
    out: list[DataFile] = []
    legacy: dict[str, int] = {}
    # A fleet's manifest lists thousands of files: only the table's are made DataFiles.
    prefix = None if table is None else f"{table}/"
    for n, ingest in enumerate(manifest.get("ingests", [])):
        files = ingest.get("files")
        if prefix is not None and isinstance(files, list):
            mine = [
                f
                for f in files
                if not isinstance(f, dict) or str(f.get("path", "")).startswith(prefix)
            ]
            ingest = {**ingest, "files": mine}
        entries = entries_of(ingest, path / MANIFEST)
        if entries is None:
            legacy[str(ingest.get("id"))] = n
            continue
        for e in entries:
            of = e.path.split("/", 1)[0]
            if of in TABLES and ".." not in e.path.split("/"):
                out.append(DataFile(path / e.path, of, str(ingest["id"]), n, e))
    if legacy:
        for name in TABLES if table is None else (table,):
            root = path / name
            if root.is_dir():
                for p in root.rglob("*.parquet"):
                    if ingest_of(p) in legacy:
                        out.append(DataFile(p, name, ingest_of(p), legacy[ingest_of(p)], None))
    return out


def live_files(
    path: Path,
    table: str,
    manifest: dict[str, Any] | None = None,
    skip: set[str] | None = None,
) -> list[DataFile]:
    """The files that make ``table`` now: those of the ingests committed and moved in (the
    newest of each folder, for runs and sources), in the order they were written. A file
    that several ingests listed (it grew) is there once, as the newest of them left it.
    ``skip``: the ingests on their way in, where ``stage/`` is not a folder here (an
    object store's), listed after the manifest was read."""
    manifest = read_manifest(path) if manifest is None else manifest
    if skip is None:
        skip = moving(path)  # read after the manifest: an ingest listed and not moving is in
    mine = listed_files(path, manifest, table)
    pending = newest_of_each_path(f for f in mine if f.ingest in skip)
    gone = replaced_paths(path, manifest, skip)
    found = [
        replace(f, newer=pending[f.path].entry) if f.path in pending else f
        for f in newest_of_each_path(f for f in mine if f.ingest not in skip).values()
        if gone.get(f.path, -1) < f.order
    ]
    if table in LATEST_ONLY:
        latest: dict[Path, DataFile] = {}
        for f in found:
            best = latest.get(f.path.parent)
            if best is None or f.order > best.order:
                latest[f.path.parent] = f
        found = list(latest.values())
    # As written: by source, by ingest (in the order they were committed: two ingests
    # in one second have ids in random order), by day within an ingest (days sort as
    # written, and the rows of a day without one after the rest), then by number.
    return sorted(
        found, key=lambda f: (f.path.parent.name, f.first, str(f.path.parent), file_number(f.path))
    )


def replaced_paths(
    path: Path, manifest: dict[str, Any], skip: set[str] | frozenset[str] = frozenset()
) -> dict[Path, int]:
    """Each path a moved-in compaction replaced, with where the last such compaction comes
    (a file listed again after it would be live again)."""
    out: dict[Path, int] = {}
    for n, ingest in enumerate(manifest.get("ingests", [])):
        if str(ingest.get("id")) in skip:
            continue
        for rel in ingest.get(REPLACES) or []:
            if isinstance(rel, str) and ".." not in rel.split("/"):
                out[path / rel] = n
    return out


def newest_of_each_path(files: Iterable[DataFile]) -> dict[Path, DataFile]:
    """Each path's newest listing, that keeps the place of its first (``DataFile.first``)."""
    out: dict[Path, DataFile] = {}
    for f in sorted(files, key=lambda f: f.order):
        before = out.get(f.path)
        out[f.path] = replace(f, first=f.order if before is None else before.first)
    return out


def source_folder(path: Path) -> str:
    """The ``source_id=<id>`` folder a data file is in (its parent, in either layout)."""
    return path.parent.name


def partition(table: str, source_id: str, day: str | None = None) -> str:
    """A table's folder for ``source_id``'s rows (of ``day`` where the table is dated),
    relative to the table's: ``date=<day>/source_id=<id>`` or ``source_id=<id>``."""
    folder = f"source_id={source_id}"
    return folder if table not in DATED or day is None else f"{DAY}={day}/{folder}"


def committed_files(path: Path, table: str) -> list[Path]:
    """The committed data files of ``table`` (latest only, for runs and sources)."""
    return [f.path for f in live_files(path, table)]


def ingest_of(path: Path) -> str:
    """The ingest id in a data file's name (``part-<id>.parquet``, ``part-<id>.<n>.parquet``
    for the next files of one write)."""
    return path.name.split("-", 1)[-1].split(".", 1)[0]


def file_number(path: Path) -> int:
    """A data file's place among the files of one write (``part-<id>.<n>.parquet``)."""
    pieces = path.name.split(".")
    return int(pieces[1]) if len(pieces) == 3 and pieces[1].isdigit() else 0


def relative(path: Path, store: Path) -> str:
    """A path inside the store as the manifest writes it."""
    return path.relative_to(store).as_posix()
