"""How an ingest comes into a store on object storage, without a lock: no reader ever sees
a row of an ingest that did not commit, a reader of specscope sees an ingest whole or not
at all, and two writers that commit at once both land.

The writer writes its files locally, as on a disk (``writing``), then:

1. **Stage.** A claim ``stage/owner-<ingest>.json`` (pid, host, heartbeat) is put, then
   each file under ``stage/files-<ingest>/<its path>``: write-once keys, outside every
   table folder (outside readers glob the table folders).
2. **Commit** (the one step that decides): the manifest with the ingest appended is put
   *if it is still the one read* (If-Match its etag; If-None-Match for the first). On
   412 another writer committed first: the manifest is read again, the same-source rule
   checked again (``StoreWriter.conflicts``), the sources table made again from the one
   now committed, and the put tried again. Killed or failing before this put: nothing
   happened, and the next writer removes the stage once its claim is dead or stale.
3. **Move in.** Each staged object is copied (server-side) to its key in the table
   folders, then the stage deleted, then the claim. Killed here, the ingest stays
   committed: the next writer finishes the copies once the claim is dead or stale.
4. **Tidy.** The runs and sources files it supersedes are deleted.

Readers take an ingest only once nothing is left under ``stage/files-<ingest>/`` (they
read the manifest first, then list ``stage/``): all its copies are made by then.

The commit needs an atomic conditional put (S3 since 2024, MinIO, R2, GCS's and Azure's
own). s3s-fs, the test server, checks the condition before it writes the body, not
atomically: two puts that overlap may both pass, the later landing over the earlier. So
the writer reads the manifest back after its put and again 50 ms later, and commits again
if its ingest is not in it: a racer would have to take longer than that between its check
and its write to go unseen.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

from specscope.errors import StoreError
from specscope.store.commit import describe, with_ingest
from specscope.store.layout import (
    FILES,
    LATEST_ONLY,
    MANIFEST,
    STAGE,
    FileEntry,
    entries_of,
    files_dir,
    listed_files,
    live_files,
    relative,
)
from specscope.store.locking import OWNER, lease_seconds, pid_alive
from specscope.store.objects import Conflict, Objects
from specscope.store.writing import StoreWriter


class RemoteStore(Protocol):
    """What a commit needs of a store on object storage (``reading.RemoteStore``)."""

    objects: Objects
    url: str
    path: Path  # the local folder its writers stage in

    def read(self) -> tuple[dict[str, Any], str | None]: ...

    def moving(self) -> set[str]: ...

    def sources_rows(self, manifest: dict[str, Any]) -> list[dict[str, Any]]: ...


_ATTEMPTS = 50  # commits that lose to another writer's before this one gives up
_SETTLE_S = 0.05  # the second read back of a commit (s3s-fs: see the module)


def stage_key(ingest_id: str, rel: str) -> str:
    return f"{STAGE}/{FILES}{ingest_id}/{rel}"


def owner_key(ingest_id: str) -> str:
    return f"{STAGE}/{OWNER}{ingest_id}.json"


class Claim:
    """A writer's claim on its part of ``stage/`` on the object store, with a heartbeat."""

    def __init__(self, store: RemoteStore, ingest_id: str, lease_s: float) -> None:
        self.store = store
        self.ingest_id = ingest_id
        self.every = min(max(lease_s / 20, 0.05), 5.0)
        self.record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "token": uuid.uuid4().hex,
            "writing": ingest_id,
        }
        self.last = 0.0
        self.beat(now=True)

    def beat(self, *, now: bool = False) -> None:
        if not now and time.monotonic() - self.last < self.every:
            return
        self.record["heartbeat"] = time.time()
        data = json.dumps(self.record).encode()
        self.store.objects.put(owner_key(self.ingest_id), data)
        self.last = time.monotonic()

    def held(self) -> bool:
        """Whether the claim is still this writer's: one that went quiet for the lease may
        have had its stage deleted by another writer, and must commit nothing."""
        got = self.store.objects.get(owner_key(self.ingest_id))
        try:
            return got is not None and json.loads(got[0]).get("token") == self.record["token"]
        except (ValueError, AttributeError):
            return False

    def release(self) -> None:
        self.store.objects.delete([owner_key(self.ingest_id)])


def commit_remote(w: StoreWriter) -> None:
    """Steps 1-4 for the writer ``w`` of a store on object storage."""
    store: RemoteStore = w.store  # type: ignore[assignment]  # commit_remote's caller
    objs = store.objects
    w._still_holding()
    claim = Claim(store, w.ingest_id, lease_seconds())
    uploaded: dict[str, str] = {}
    entries: list[FileEntry] = []
    try:
        for attempt in range(_ATTEMPTS):
            manifest, etag = store.read()
            recover(store, manifest, keep=w.ingest_id)
            w.conflicts(manifest, store.url)
            if w._source_rows is not None:
                w.write_sources(store.sources_rows(manifest))
            entries = describe(store.path, w.ingest_id, dict.fromkeys(w.written))
            for e in entries:
                if uploaded.get(e.path) != e.sha256:
                    local = files_dir(store.path, w.ingest_id) / e.path
                    try:
                        objs.put(stage_key(w.ingest_id, e.path), local)
                    except FileNotFoundError as exc:
                        w._still_holding()  # its local stage taken over: says so
                        raise StoreError(
                            f"cannot upload {e.path}: its staged copy is gone; nothing of "
                            "this ingest was committed",
                            path=store.url,
                        ) from exc
                    uploaded[e.path] = e.sha256
                    claim.beat()
            w._still_holding()
            if not claim.held():
                raise StoreError(
                    "this writer lost its stage (it sent no heartbeat for longer than the "
                    "lease, and another writer removed it); nothing of this ingest was "
                    "committed",
                    path=store.url,
                )
            claim.beat(now=True)
            data = json.dumps(
                with_ingest(manifest, w.ingest_id, w.sources, entries, w.replaces, w.prune),
                indent=1,
            )
            try:
                objs.put(MANIFEST, data.encode(), create=etag is None, etag=etag)
            except Conflict:
                time.sleep(random.uniform(0.01, 0.05) * min(attempt + 1, 10))
                continue
            except StoreError:
                if not _listed(store, w.ingest_id):  # a put that timed out may have landed
                    raise
            # Read back, now and a moment later: on a server whose conditional put is not
            # atomic, a racer that passed the same condition may put over it unseen.
            if _listed(store, w.ingest_id):
                time.sleep(_SETTLE_S)
                if _listed(store, w.ingest_id):
                    break
        else:
            raise StoreError(
                f"other writers committed before this one {_ATTEMPTS} times; nothing of this "
                "ingest was committed: run it again",
                path=store.url,
            )
        w.committed = True
        # Its files are on the object store now: the local copies go (unlike a folder's
        # stage, where they wait to be moved in).
        shutil.rmtree(files_dir(store.path, w.ingest_id), ignore_errors=True)
    finally:
        if not w.committed:
            objs.delete([stage_key(w.ingest_id, rel) for rel in uploaded])
            claim.release()
    try:
        move_in(store, w.ingest_id, entries)
        remove_superseded(store)
    except StoreError as exc:
        raise StoreError(
            f"committed, but its files could not all be copied into the tables ({exc}); "
            "the next write copies them",
            path=store.url,
        ) from exc
    claim.release()


def _listed(store: RemoteStore, ingest_id: str) -> bool:
    return ingest_id in {str(i.get("id")) for i in store.read()[0].get("ingests", [])}


def move_in(store: RemoteStore, ingest_id: str, entries: list[FileEntry]) -> None:
    """Step 3: each staged object copied to its table's key, then the stage deleted. Done
    again after a kill (or by two writers at once), it copies the same bytes again."""
    objs = store.objects
    for e in entries:
        try:
            objs.copy(stage_key(ingest_id, e.path), e.path)
        except FileNotFoundError:
            pass  # copied, and the stage deleted, by a writer that finished it
    left = objs.listing(f"{STAGE}/{FILES}{ingest_id}/")
    objs.delete([m.rel for m in left])


def recover(store: RemoteStore, manifest: dict[str, Any], keep: str | None = None) -> None:
    """Finish the copies of committed ingests whose writers are gone; delete the stage of
    uncommitted ones whose writers are gone (dead on this host, or no heartbeat for the
    lease, ``SPECSCOPE_LOCK_LEASE_S``). A writer still at work keeps its stage."""
    objs = store.objects
    lease = lease_seconds()
    found = objs.listing(f"{STAGE}/")
    if not found:
        return
    by_ingest: dict[str, list[str]] = defaultdict(list)
    newest: dict[str, float] = defaultdict(float)
    for m in found:
        name = m.rel.split("/", 2)[1] if m.rel.count("/") >= 1 else ""
        ingest = name[len(FILES) :] if name.startswith(FILES) else None
        if name.startswith(OWNER):
            ingest = name[len(OWNER) :].removesuffix(".json")
        if ingest is None:
            continue
        by_ingest[ingest].append(m.rel)
        newest[ingest] = max(newest[ingest], m.modified)
    committed = {str(i.get("id")): i for i in manifest.get("ingests", [])}
    for ingest, keys in by_ingest.items():
        if ingest == keep or _alive_writer(store, ingest, newest[ingest], lease):
            continue
        if ingest in committed:
            entries = entries_of(committed[ingest], store.path / MANIFEST) or []
            move_in(store, ingest, entries)
        else:
            objs.delete([k for k in keys if k != owner_key(ingest)])
        objs.delete([owner_key(ingest)])


def _alive_writer(store: RemoteStore, ingest: str, newest: float, lease: float) -> bool:
    got = store.objects.get(owner_key(ingest))
    record: Any = None
    if got is not None:
        try:
            record = json.loads(got[0])
        except ValueError:
            record = None
    if not isinstance(record, dict):
        return time.time() - newest <= lease
    pid, host, beat = record.get("pid"), record.get("host"), record.get("heartbeat")
    if isinstance(pid, int) and host == socket.gethostname() and pid != os.getpid():
        if not pid_alive(pid):
            return False
    return isinstance(beat, int | float) and time.time() - beat <= lease


def remove_superseded(store: RemoteStore) -> None:
    """Step 4: the runs and sources files a newer, moved-in file of the same folder
    replaces (those still there: one listing of each table)."""
    manifest, _ = store.read()
    skip = store.moving()
    there = {m.rel for t in LATEST_ONLY for m in store.objects.listing(f"{t}/")}
    newest = {
        f.path.parent: f.order
        for t in LATEST_ONLY
        for f in live_files(store.path, t, manifest, skip=skip)
    }
    gone = [
        rel
        for f in listed_files(store.path, manifest)
        if f.table in LATEST_ONLY
        and f.ingest not in skip
        and f.order < newest.get(f.path.parent, -1)
        and (rel := relative(f.path, store.path)) in there
    ]
    store.objects.delete(gone)


def left_behind(store: RemoteStore) -> bool:
    """Whether ``stage/`` on the object store holds anything (a writer's, at work or gone)."""
    return bool(store.objects.listing(f"{STAGE}/"))


__all__ = ["Claim", "commit_remote", "left_behind", "move_in", "recover", "remove_superseded"]
