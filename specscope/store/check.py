"""``specscope check``: every data file of a store against its manifest.

Each file an ingest committed must be there (else **missing**), hold the bytes, rows and
columns it was committed with (else **damaged**: unreadable Parquet, another SHA-256, size
or row count; or **schema-swapped**: the columns of another table). A Parquet file in a
table folder that no ingest lists is **foreign**: specscope never reads it, but a glob
over the folder does (a copy doubles rows). Files of ingests committed before the manifest
listed files are checked for being readable and of their table, by name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specscope.errors import StoreError
from specscope.schema import TABLES
from specscope.store.integrity import FOREIGN, Problem, inspect, sha256_of
from specscope.store.layout import (
    MANIFEST,
    listed_files,
    live_files,
    moving,
    read_manifest,
    relative,
)
from specscope.store.objects import is_url


@dataclass
class CheckReport:
    """What ``check_store`` found: the files and rows checked, one problem per bad file,
    and the ingests committed whose files are still being moved in."""

    store: Path
    files: int = 0
    where: str | None = None  # the store as named, where it is not ``store`` (a URL)
    rows: int = 0
    unlisted: int = 0  # files of ingests committed before files were listed
    problems: list[Problem] = field(default_factory=list)
    moving: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        """One line per problem, then what was checked (and what is on its way in)."""
        out = [p.line(self.store) for p in self.problems]
        for ingest in self.moving:
            out.append(
                f"note: ingest {ingest} is committed and its files are still being moved "
                "into the tables (a writer stopped); the next write finishes it"
            )
        if self.unlisted:
            out.append(
                f"note: {self.unlisted} files of ingests committed before the manifest "
                "listed files: checked readable and of their table, without a checksum"
            )
        verdict = f"{len(self.problems)} bad" if self.problems else "all as committed"
        out.append(f"{self.files} files, {self.rows:,} rows checked: {verdict}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.where or str(self.store),
            "ok": self.ok,
            "files": self.files,
            "rows": self.rows,
            "unlisted": self.unlisted,
            "problems": [
                {"kind": p.kind, "path": _shown(p.path, self.store), "detail": p.detail}
                for p in self.problems
            ],
            "moving": self.moving,
        }


def _shown(path: Path, store: Path) -> str:
    try:
        return path.relative_to(store).as_posix()
    except ValueError:
        return str(path)


def check_store(path: str | os.PathLike[str]) -> CheckReport:
    """Check every data file of the store at ``path`` (see the module)."""
    if is_url(path):
        return _check_remote(str(path))
    root = Path(path)
    if not (root / MANIFEST).is_file():
        raise StoreError("no specscope store here (no specscope.json)", path=str(root))
    manifest = read_manifest(root)
    report = CheckReport(root)
    ids = {str(i.get("id")) for i in manifest.get("ingests", [])}
    report.moving = sorted(moving(root) & ids)
    every = listed_files(root, manifest)
    known = {f.path for f in every}
    digests: dict[str, Path] = {}
    for table in TABLES:
        for f in live_files(root, table, manifest):
            seen = inspect(f)
            report.files += 1
            report.rows += seen.rows
            report.unlisted += f.entry is None
            if seen.problem is not None:
                report.problems.append(seen.problem)
            elif f.entry is not None:
                digests[f.entry.sha256] = f.path
    unlisted = [
        p
        for table in TABLES
        if (root / table).is_dir()
        for p in sorted((root / table).rglob("*.parquet"))
        if p not in known and p.is_file()
    ]
    if unlisted:  # a writer may have committed meanwhile: its files are not foreign
        known |= {f.path for f in listed_files(root)}
    for p in unlisted:
        if p not in known:
            try:
                twin = digests.get(sha256_of(p))
            except OSError:
                twin = None
            detail = f"a copy of {_shown(twin, root)}" if twin else "a file of no ingest"
            report.problems.append(
                Problem(
                    FOREIGN,
                    p,
                    f"{detail}, in no ingest of the manifest: specscope does not read it, "
                    "a glob over the folder does",
                )
            )
    report.problems.sort(key=lambda p: str(p.path))
    return report


def _check_remote(url: str) -> CheckReport:
    """``check_store`` of a store on object storage: each committed file fetched (once,
    into the cache) and checked like a folder's; an object in a table folder that no
    ingest lists is foreign."""
    from specscope.store.reading import RemoteStore

    store = RemoteStore(url)
    if not store.exists():
        raise StoreError("no specscope store here (no specscope.json)", path=url)
    manifest = store.manifest()
    skip = store.moving()
    report = CheckReport(store.path, where=url)
    report.moving = sorted(skip & {str(i.get("id")) for i in manifest.get("ingests", [])})
    for table in TABLES:
        for f in live_files(store.path, table, manifest, skip=skip):
            store.fetch(f)
            seen = inspect(f)
            report.files += 1
            report.rows += seen.rows
            if seen.problem is not None:
                report.problems.append(seen.problem)
    there = [m.rel for t in TABLES for m in store.objects.listing(f"{t}/")]
    known = {relative(f.path, store.path) for f in listed_files(store.path, manifest)}
    if any(rel not in known for rel in there):  # a writer may have committed meanwhile
        known |= {relative(f.path, store.path) for f in listed_files(store.path, store.manifest())}
    for rel in there:
        if rel not in known and rel.endswith(".parquet"):
            detail = (
                "a file of no ingest, in no ingest of the manifest: specscope does not read "
                "it, a glob over the folder does"
            )
            report.problems.append(Problem(FOREIGN, store.path / rel, detail))
    report.problems.sort(key=lambda p: str(p.path))
    return report


__all__ = ["CheckReport", "check_store"]
