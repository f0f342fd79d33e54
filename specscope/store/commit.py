"""How an ingest's files come into the store, so that no reader ever sees a row of an ingest
that did not commit, and a reader of specscope sees an ingest whole or not at all.

Outside readers glob the table folders (``spec_decode/**/*.parquet``): a file there is read,
manifest or not. So a data file is written in ``stage/files-<ingest>/`` (outside every
table folder, at the path it will have in the store) and comes into its table only after
the ingest is committed:

1. **Stage.** Each data file is written and synced in ``stage/files-<ingest>/``; then the
   table folders it goes to are made and the stage's folders synced. Anything that needs
   new space on the disk happens here.
2. **Commit** (the one step that decides). The manifest, with the ingest and each of its
   files (path, rows, bytes, SHA-256), is written beside the old one, synced, renamed over
   it and the store's folder synced. Killed or failing before this rename: the ingest did
   not happen (the next writer removes its stage), and no table folder holds a file of it.
3. **Move in.** Each file is renamed into its table folder, the folders synced, then
   ``stage/files-<ingest>/`` removed and ``stage/`` synced. A glob sees the ingest's files
   arrive one by one, all of a committed ingest. Killed here, the ingest stays committed:
   the next writer finishes moving it in before anything else (``recover``), never undoes it.
4. **Tidy.** The runs and sources files it supersedes are removed.

Readers of specscope take an ingest only once ``stage/files-<ingest>/`` is gone (they read
the manifest first, then look at ``stage/``): all of its files are in by then. A failure in
step 3 (a disk that fills between two renames) is a StoreError that says the ingest is
committed and the next write moves the rest in.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from specscope.errors import StoreError
from specscope.schema import SCHEMA_VERSION, TABLES
from specscope.store import durable
from specscope.store.integrity import sha256_of
from specscope.store.layout import (
    FILES,
    INGEST_ID,
    LATEST_ONLY,
    MANIFEST,
    OWN_NAME,
    REPLACES,
    STAGE,
    FileEntry,
    entries_of,
    files_dir,
    ingest_of,
    listed_files,
    live_files,
    moving,
    read_manifest,
    relative,
)
from specscope.store.locking import OWNER, owner_alive
from specscope.store.order import footer_lines


def describe(root: Path, ingest_id: str, staged: Iterable[Path]) -> list[FileEntry]:
    """The manifest's entries of the staged files: where each goes, its rows and the range
    of its lines (from its footer: a file that is not readable Parquet is not committed),
    bytes and SHA-256."""
    base = files_dir(root, ingest_id)
    out = []
    for path in staged:
        try:
            meta = pq.read_metadata(path)
            rows, lines = int(meta.num_rows), footer_lines(meta)
            size = path.stat().st_size
            digest = sha256_of(path)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise StoreError(
                f"cannot read back {path.name} ({durable.reason(exc)}); "
                "nothing of this ingest was committed",
                path=str(root),
            ) from exc
        out.append(FileEntry(relative(path, base), rows, size, digest, lines))
    return out


def prepare(root: Path, ingest_id: str, entries: list[FileEntry]) -> list[Path]:
    """Make the table folders the files go to and sync the stage (step 1's end); returns the
    folders made (to remove should the commit not happen)."""
    made: list[Path] = []
    try:
        for folder in sorted({(root / e.path).parent for e in entries}):
            missing = [p for p in (folder, *folder.parents) if p != root and root in p.parents]
            for p in reversed(missing):
                if not p.is_dir():
                    p.mkdir()
                    made.append(p)
                    durable.sync_dir(p.parent)
    except BaseException:
        # A day's folder made and its source's not (a full disk): none is left behind.
        unmake(made)
        raise
    base = files_dir(root, ingest_id)
    folders = {(base / e.path).parent for e in entries}
    for folder in sorted(folders | {p for f in folders for p in f.parents if base in p.parents}):
        durable.sync_dir(folder)
    for folder in (base, base.parent, root):
        if entries or folder != base:  # a commit of no file (a compaction's pruning) has none
            durable.sync_dir(folder)
    return made


def unmake(made: list[Path]) -> None:
    """Remove the folders ``prepare`` made, where they are still empty."""
    for p in reversed(made):
        with contextlib.suppress(OSError):
            p.rmdir()


def write_commit(
    root: Path,
    ingest_id: str,
    sources: list[str],
    entries: list[FileEntry],
    replaces: Collection[str] = (),
    prune: Collection[str] = (),
) -> None:
    """Step 2: the manifest with this ingest in it replaces the old one."""
    manifest = with_ingest(read_manifest(root), ingest_id, sources, entries, replaces, prune)
    write_manifest(root, manifest)


def with_ingest(
    manifest: dict[str, Any],
    ingest_id: str,
    sources: list[str],
    entries: list[FileEntry],
    replaces: Collection[str] = (),
    prune: Collection[str] = (),
) -> dict[str, Any]:
    """``manifest`` with the ingest appended (a copy). ``replaces``: the paths a
    compaction's files take the place of. ``prune``: paths replaced long enough ago to be
    gone, whose entries go (an ingest left with no file goes too), so that the manifest a
    commit rewrites grows with the files there are, not with every file there was."""
    out = dict(manifest)
    out["schema_version"] = SCHEMA_VERSION
    ingest: dict[str, Any] = {
        "id": ingest_id,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "sources": sorted(set(sources)),
        "files": [e.to_json() for e in entries],
    }
    if replaces:
        ingest[REPLACES] = sorted(replaces)
    out["ingests"] = [*_pruned(manifest.get("ingests", []), set(prune)), ingest]
    return out


def _pruned(ingests: list[dict[str, Any]], prune: set[str]) -> list[dict[str, Any]]:
    if not prune:
        return list(ingests)
    out = []
    for ingest in ingests:
        files, gone = ingest.get("files"), ingest.get(REPLACES) or []
        if files is None:  # a legacy ingest: its files are named after it, not listed
            out.append(ingest)
            continue
        kept = [f for f in files if not (isinstance(f, dict) and f.get("path") in prune)]
        still = [p for p in gone if p not in prune]
        if len(kept) == len(files) and len(still) == len(gone):
            out.append(ingest)
        elif kept or still:
            changed = {k: v for k, v in ingest.items() if k != REPLACES}
            out.append({**changed, "files": kept, **({REPLACES: still} if still else {})})
    return out


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    durable.replace_file(root / MANIFEST, json.dumps(manifest, indent=1).encode("utf-8"))


def move_in(root: Path, ingest_id: str, entries: list[FileEntry]) -> None:
    """Step 3: the staged files into their tables, then the stage folder of the ingest gone.
    Done again after a kill, it moves what was not moved yet."""
    base = files_dir(root, ingest_id)
    into: set[Path] = set()
    for e in entries:
        source, dest = base / e.path, root / e.path
        try:
            durable.move(source, dest)
        except FileNotFoundError:
            if source.exists() and not dest.parent.is_dir():
                dest.parent.mkdir(parents=True, exist_ok=True)  # made by an older writer
                durable.move(source, dest)
            # else moved before a kill (or lost: ``check`` says "missing")
        into.add(dest.parent)
    # The tables' folders, synced, hold the renames; the stage's side needs no sync: a file
    # found in both places after a crash is moved again (the same file), and only once they
    # are synced does the ingest's stage folder go.
    for folder in sorted(into):
        durable.sync_dir(folder)
    shutil.rmtree(base, ignore_errors=True)
    durable.sync_dir(base.parent)


def recover(root: Path, lease_s: float, keep: str | None = None) -> None:
    """What a writer does first when it commits, holding the lock: finish moving in the
    ingests that were committed and not moved in (step 3); remove the stage of those that
    never committed and whose writers are gone (dead, or no heartbeat for ``lease_s``: a
    writer still at work keeps its stage); the files that runs and sources superseded,
    and the files a writer older than the file list left in the tables without committing
    them. ``keep``: the recovering writer's own ingest, whose stage it keeps."""
    manifest = read_manifest(root)
    ingests = {str(i.get("id")): i for i in manifest.get("ingests", [])}
    stage = root / STAGE
    finish_moves(root, manifest)
    if stage.is_dir():
        for p in stage.iterdir():
            owner = stage_ingest(p.name)
            if owner is not None and owner not in ingests:
                if owner == keep or owner_alive(stage, owner, lease_s):
                    continue  # the recovering writer's own, or another's at work
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
    remove_superseded(root, manifest)
    for table in TABLES:
        folder = root / table
        if not folder.is_dir():
            continue
        for p in folder.rglob("*"):
            leftover = p.suffix == ".tmp" or (
                OWN_NAME.fullmatch(p.name) is not None and ingest_of(p) not in ingests
            )
            if leftover and p.is_file():
                p.unlink(missing_ok=True)


def unfinished(root: Path, manifest: dict[str, Any] | None = None) -> set[str]:
    """The ingests committed and not all moved in (a writer killed, or a disk that filled,
    between the commit and the end of its moves)."""
    manifest = read_manifest(root) if manifest is None else manifest
    return moving(root) & {str(i.get("id")) for i in manifest.get("ingests", [])}


def left_behind(root: Path, lease_s: float) -> bool:
    """Whether ``stage/`` holds what a writer left: an ingest committed and not moved in,
    or the stage of a writer that is gone."""
    try:
        names = os.listdir(root / STAGE)
    except OSError:
        return False
    if not names:
        return False
    manifest = read_manifest(root)
    if unfinished(root, manifest):
        return True
    committed = {str(i.get("id")) for i in manifest.get("ingests", [])}
    owners = {stage_ingest(n) for n in names}
    return any(
        o is None or o in committed or not owner_alive(root / STAGE, o, lease_s) for o in owners
    )


def finish_moves(root: Path, manifest: dict[str, Any] | None = None) -> None:
    """Step 3 for the ingests that were committed and not moved in (holding the lock)."""
    manifest = read_manifest(root) if manifest is None else manifest
    ingests = {str(i.get("id")): i for i in manifest.get("ingests", [])}
    for ingest_id in sorted(unfinished(root, manifest)):
        entries = entries_of(ingests[ingest_id], root / MANIFEST)
        if entries is not None:
            move_in(root, ingest_id, entries)


def stage_ingest(name: str) -> str | None:
    """The ingest an entry of ``stage/`` is of: ``files-<id>``, ``<id>-<pid>-<n>`` (rows on
    their way) or ``owner-<id>.json``; None for anything else."""
    for head in (FILES, OWNER):
        if name.startswith(head):
            return name[len(head) :].removesuffix(".json")
    first = name.split("-", 1)[0]
    return first if INGEST_ID.fullmatch(first) else None


def remove_superseded(root: Path, manifest: dict[str, Any] | None = None) -> None:
    """Step 4: the runs and sources files that a newer, moved-in file of the same folder
    replaces."""
    manifest = read_manifest(root) if manifest is None else manifest
    on_way = moving(root)
    newest = {f.path.parent: f.order for t in LATEST_ONLY for f in live_files(root, t, manifest)}
    folders = set()
    for f in listed_files(root, manifest):
        if f.table not in LATEST_ONLY or f.ingest in on_way:
            continue
        if f.order < newest.get(f.path.parent, -1) and f.path.exists():
            f.path.unlink(missing_ok=True)
            folders.add(f.path.parent)
    for folder in folders:
        with contextlib.suppress(OSError):
            durable.sync_dir(folder)


def remove_stage(root: Path, ingest_id: str, *, committed: bool) -> None:
    """A writer's stage, when it ends: its rows on their way, and its files unless they
    are committed (then the next writer moves them in); ``stage/`` itself once empty."""
    stage = root / STAGE
    if not stage.is_dir():
        return
    for p in stage.iterdir():
        ours = p.name.startswith(f"{ingest_id}-")
        if ours or (p.name == f"{FILES}{ingest_id}" and not committed):
            shutil.rmtree(p, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(stage)


__all__ = [
    "describe",
    "finish_moves",
    "left_behind",
    "move_in",
    "prepare",
    "recover",
    "remove_stage",
    "remove_superseded",
    "unfinished",
    "unmake",
    "with_ingest",
    "write_commit",
]
