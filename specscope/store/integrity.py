"""Whether a data file is what its ingest committed: there, the bytes it had (size and
SHA-256), the rows it had, and the columns of its table. Readers check each file before
reading it (once per process: the answer is kept while the file is unchanged), ``check``
checks them all.

SHA-256 is cheap here: the Parquet is 3-4% of the log it came from (37 MB for a 1 GB log,
hashed in about 30 ms), so every process that reads a store verifies each file it reads.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from specscope.schema import TABLES
from specscope.store.layout import DataFile, Unsaid
from specscope.store.order import footer_lines

_BLOCK = 1 << 20

# Problem kinds, worst first.
MISSING = "missing"
DAMAGED = "damaged"
SWAPPED = "schema-swapped"
FOREIGN = "foreign"


@dataclass(frozen=True)
class Problem:
    """What is wrong with one file, in a line: ``damaged: <why>``."""

    kind: str
    path: Path
    detail: str

    def line(self, store: Path | None = None) -> str:
        shown = self.path
        if store is not None:
            try:
                shown = self.path.relative_to(store)
            except ValueError:
                pass
        return f"{self.kind}: {shown}: {self.detail}"


@dataclass(frozen=True)
class Inspection:
    """A file as read: its columns and rows, or the problem that stops reading it."""

    problem: Problem | None
    columns: list[str]
    rows: int
    # Read only the first rows: the file is a newer version (``DataFile.newer``) of the
    # one committed, still being moved in, that grew by rows not to be read yet.
    limit: int | None = None


_seen: dict[tuple[str, int, int, int, str, str], Inspection] = {}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def inspect(file: DataFile) -> Inspection:
    """``file`` checked against its entry (a legacy file, which has none: readable and of
    its table's columns). Kept per process while the file's size and time are unchanged."""
    try:
        st = os.stat(file.path)
    except FileNotFoundError:
        return Inspection(Problem(MISSING, file.path, "listed in the manifest, not there"), [], 0)
    committed = "" if file.entry is None else f"{file.entry.sha256}:{file.entry.rows}"
    if file.newer is not None:
        committed += f"/{file.newer.sha256}"
    key = (str(file.path), st.st_ino, st.st_size, st.st_mtime_ns, file.table, committed)
    if key not in _seen:
        _seen[key] = _inspect(file, st.st_size)
    return _seen[key]


def _inspect(file: DataFile, size: int) -> Inspection:
    entry = file.entry
    try:
        # Not ``read_metadata(...).schema``: pyarrow's ParquetSchema of a file of a hundred
        # row groups costs about 2.5 MB that the process keeps (300 files: 340 MB).
        with pq.ParquetFile(file.path) as parquet:
            schema = parquet.schema_arrow
            rows = int(parquet.metadata.num_rows)
            lines = footer_lines(parquet.metadata)
    except (OSError, ValueError, pa.ArrowException) as exc:
        why = str(exc).split("\n", 1)[0] or type(exc).__name__
        return Inspection(
            Problem(DAMAGED, file.path, f"not a readable Parquet file ({why})"), [], 0
        )
    columns = list(schema.names)
    if entry is not None and size == entry.bytes and sha256_of(file.path) == entry.sha256:
        if rows != entry.rows:  # the manifest was edited: trust neither
            detail = f"{rows} rows, the manifest says {entry.rows}"
            return Inspection(Problem(DAMAGED, file.path, detail), columns, rows)
        if not isinstance(entry.lines, Unsaid) and entry.lines != lines:
            # Readers order a source's files by the entry's lines: it must be the file's.
            detail = f"lines {_span(lines)}, the manifest says {_span(entry.lines)}"
            return Inspection(Problem(DAMAGED, file.path, detail), columns, rows)
        return Inspection(None, columns, rows)
    newer = file.newer
    if (
        entry is not None
        and newer is not None
        and (size, rows) == (newer.bytes, newer.rows)
        and sha256_of(file.path) == newer.sha256
    ):
        return Inspection(None, columns, entry.rows, limit=entry.rows)
    swapped = schema_problem(schema, file.table)
    if swapped:
        changed = "" if entry is None else " (its bytes are not those committed)"
        return Inspection(Problem(SWAPPED, file.path, swapped + changed), columns, rows)
    if entry is None:
        return Inspection(None, columns, rows)  # a legacy file: nothing to compare it with
    if rows != entry.rows:
        detail = f"{rows} rows, the manifest says {entry.rows} (changed since it was committed)"
    elif size != entry.bytes:
        detail = f"{size} bytes, the manifest says {entry.bytes} (changed since it was committed)"
    else:
        detail = "its SHA-256 is not the one committed (its bytes changed since)"
    return Inspection(Problem(DAMAGED, file.path, detail), columns, rows)


def _span(lines: tuple[int, int] | None) -> str:
    return "unbounded" if lines is None else f"{lines[0]}-{lines[1]}"


def schema_problem(schema: Any, table: str) -> str | None:
    """Why a file's columns are not ``table``'s, or None. A file may lack columns added since
    it was written and keep columns dropped since; it may not give a column another type,
    nor hold mostly columns the table does not have."""
    want = TABLES[table]
    have = {f.name: f.type for f in schema}
    for name, kind in have.items():
        if name in want.names and kind != want.field(name).type:
            return f"column {name} is {kind}, {table} has {want.field(name).type}"
    shared = [n for n in have if n in want.names]
    if have and len(shared) * 2 >= len(have):
        return None
    like = next(
        (
            t
            for t, s in TABLES.items()
            if t != table
            and have
            and all(n in s.names and s.field(n).type == k for n, k in have.items())
        ),
        None,
    )
    what = (
        f"the columns of {like}" if like else f"{len(have) - len(shared)} columns {table} has not"
    )
    return f"holds {what}, not those of {table}"


__all__ = ["DAMAGED", "FOREIGN", "MISSING", "SWAPPED", "Inspection", "Problem", "inspect"]
