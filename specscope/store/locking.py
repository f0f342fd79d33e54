"""The store's commit lock, and each writer's claim on its stage: leases, so that a writer
that hangs holds neither for ever. Writers write side by side; one commits at a time.

The lock is ``STORE/.lock`` held with ``fcntl.flock``, which the kernel releases when its
holder dies. Where there is no ``fcntl`` (Windows), it is ``STORE/.lock.held``, created with
O_EXCL and removed on release (the two kinds do not exclude each other: write a store from
one kind of system at a time). Either way the lock file says who holds it: pid, host, a
token, and a heartbeat time the holder moves on as it makes progress: each file it writes,
and (from a thread) whatever grows in ``stage/`` while a log is read.

A writer that has waited the lock wait takes the lock over from a holder that is dead (its
pid is gone, on this host) or whose heartbeat is older than the lease (10 minutes,
``SPECSCOPE_LOCK_LEASE_S``): it writes a lock file of its own and renames it over the old
one, under ``.lock.takeover`` so that two waiters cannot both take it. The holder that lost
the lock finds out before it commits (the store's lock file is no longer the one it holds)
and commits nothing.

A writer's claim on its stage (``StageOwner``, ``stage/owner-<ingest>.json``) is the same
record, without a flock: a writer that commits removes the stage of a writer whose claim
says it is dead or whose heartbeat is older than the lease; that writer, should it wake,
finds its claim gone and commits nothing.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specscope.errors import StoreError, UsageError
from specscope.store import durable
from specscope.store.layout import LOCK

LEASE_ENV = "SPECSCOPE_LOCK_LEASE_S"
DEFAULT_LEASE_S = 600.0
HELD = ".lock.held"  # the lock where there is no flock
TAKEOVER = ".lock.takeover"
OWNER = "owner-"  # stage/owner-<ingest>.json: a writer's claim on its stage
_TAKEOVER_STALE_S = 60.0  # a taker takes milliseconds; its mutex older than this was left
_RECORD_BYTES = 512  # the lock file's record, padded: rewritten in place, it needs no new space


def _flock() -> Callable[[int], bool] | None:
    """A non-blocking exclusive flock where there is fcntl; None where there is not."""
    try:
        import fcntl
    except ImportError:
        return None

    def try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    return try_lock


FLOCK = _flock()


def lease_seconds(env: dict[str, str] | None = None) -> float:
    """How long a holder may go without a heartbeat before a waiter may take the lock."""
    text = (os.environ if env is None else env).get(LEASE_ENV, "").strip()
    if not text:
        return DEFAULT_LEASE_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{LEASE_ENV}={text!r}: expected a number of seconds above 0")
    return value


@dataclass(frozen=True)
class Holder:
    """Who holds the lock, as its lock file says."""

    pid: int | None
    host: str | None
    token: str | None
    heartbeat: float | None  # seconds since the epoch
    inode: tuple[int, int]
    mtime: float

    def age(self, now: float) -> float:
        return now - (self.heartbeat if self.heartbeat is not None else self.mtime)

    def dead(self) -> bool:
        return (
            self.pid is not None
            and self.pid != os.getpid()
            and self.host == socket.gethostname()
            and not _alive(self.pid)
        )

    def describe(self, now: float) -> str:
        who = f"pid {self.pid} on {self.host}" if self.pid is not None else "a writer"
        return f"{who}, last heartbeat {self.age(now):.0f} s ago"


def pid_alive(pid: int) -> bool:
    """Whether a process of this host is still there."""
    return _alive(pid)


def _alive(pid: int) -> bool:
    if sys.platform == "win32":
        return True  # os.kill would end it there: the heartbeat alone tells
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


def read_holder(path: Path) -> Holder | None:
    """The holder a lock file names (None when there is no lock file). A record caught half
    written names nobody; its heartbeat is then the file's time."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        data = os.read(fd, 4 * _RECORD_BYTES)
    finally:
        os.close(fd)
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        record = None
    if not isinstance(record, dict):
        record = {}

    def typed(key: str, kind: type) -> Any:
        value = record.get(key)
        return value if isinstance(value, kind) and not isinstance(value, bool) else None

    beat = typed("heartbeat", float)
    return Holder(
        typed("pid", int),
        typed("host", str),
        typed("token", str),
        float(beat) if beat is not None else None,
        (st.st_dev, st.st_ino),
        st.st_mtime,
    )


class Lease:
    """The lock, held: ``beat`` moves its heartbeat on, ``held`` says whether it is still the
    store's lock (not taken over), ``release`` gives it up."""

    def __init__(self, path: Path, fd: int, lease_s: float, what: str) -> None:
        self.path = path
        self.fd: int | None = fd
        self.lease_s = lease_s
        self.record: dict[str, Any] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "token": uuid.uuid4().hex,
            "writing": what,
            "since": time.time(),
            "heartbeat": time.time(),
            "lease_s": lease_s,
        }
        self._every = min(max(lease_s / 20, 0.05), 5.0)  # heartbeats at most this often
        self._last = 0.0
        self._mutex = threading.Lock()

    def _write(self, fd: int) -> None:
        data = json.dumps(self.record).encode("utf-8")
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data.ljust(_RECORD_BYTES - 1) + b"\n")

    def claim(self) -> None:
        """Write who holds the lock (an OSError, such as a full disk, is the caller's)."""
        with self._mutex:
            assert self.fd is not None
            self._write(self.fd)
            self._last = time.monotonic()

    def beat(self, *, now: bool = False) -> None:
        """Move the heartbeat on (at most every few seconds unless ``now``). Best effort: a
        heartbeat that cannot be written is tried again at the next."""
        if self.fd is None or (not now and time.monotonic() - self._last < self._every):
            return
        with self._mutex:
            if self.fd is None:
                return
            self.record["heartbeat"] = time.time()
            try:
                self._write(self.fd)
            except OSError:
                return
            self._last = time.monotonic()

    def held(self) -> bool:
        """Whether this is still the store's lock (nobody took it over)."""
        return self.fd is not None and _same(self.fd, self.path)

    def _removed_on_release(self) -> bool:
        """Released, the file goes; with a flock it stays, saying who held it last."""
        return FLOCK is None

    def release(self) -> None:
        with self._mutex:
            if self.fd is None:
                return
            fd, self.fd = self.fd, None
            try:
                if self._removed_on_release():
                    if _same(fd, self.path):
                        self.path.unlink(missing_ok=True)
                else:
                    self.record.update(heartbeat=time.time(), released=True)
                    self.record.pop("pid")
                    try:
                        self._write(fd)
                    except OSError:
                        pass
            finally:
                os.close(fd)  # and with it the flock


def lock_path(root: Path) -> Path:
    return root / (LOCK if FLOCK is not None else HELD)


def acquire(
    root: Path,
    *,
    wait_s: float,
    lease_s: float,
    what: str,
    waiting: Callable[[], None] | None = None,
) -> Lease:
    """Hold the store's lock: wait up to ``wait_s`` for it, then take it over from a holder
    that is dead or has sent no heartbeat for ``lease_s``; else a StoreError. ``waiting``
    is called while it waits (a writer's heartbeat: waiting is not hanging)."""
    path = lock_path(root)
    deadline = time.monotonic() + wait_s
    while True:
        lease = _try(path, lease_s, what)
        if lease is not None:
            return lease
        if waiting is not None:
            waiting()
        if time.monotonic() >= deadline:
            holder = read_holder(path)
            if holder is None:
                continue  # released meanwhile
            if holder.dead() or holder.age(time.time()) > lease_s:
                lease = _take_over(root, path, holder, lease_s, what)
                if lease is not None:
                    return lease
            else:
                raise StoreError(
                    f"another specscope process is writing ({holder.describe(time.time())}; "
                    f"it holds {path}); try again when it has finished. A writer that sends "
                    f"no heartbeat for {lease_s:.0f} s ({LEASE_ENV}) loses the lock",
                    path=str(root),
                )
        time.sleep(0.1)


def _try(path: Path, lease_s: float, what: str) -> Lease | None:
    if FLOCK is not None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not FLOCK(fd) or not _same(fd, path):  # busy, or taken over since it was opened
            os.close(fd)
            return None
    else:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return None
    lease = Lease(path, fd, lease_s, what)
    try:
        lease.claim()
    except BaseException:
        lease.release()
        raise
    return lease


def _same(fd: int, path: Path) -> bool:
    try:
        mine, now = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


def _take_over(root: Path, path: Path, seen: Holder, lease_s: float, what: str) -> Lease | None:
    """Replace the lock file of the holder ``seen`` by one of ours, if it is still that one;
    None when another waiter is at it or the holder moved on."""
    mutex = root / TAKEOVER
    try:
        guard = os.open(mutex, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        try:
            if time.time() - os.stat(mutex).st_mtime > _TAKEOVER_STALE_S:
                mutex.unlink(missing_ok=True)
        except OSError:
            pass
        return None
    try:
        now = read_holder(path)  # again, under the mutex: the holder may have moved on
        if now is None or (now.inode, now.token) != (seen.inode, seen.token):
            return None
        if not (now.dead() or now.age(time.time()) > lease_s):
            return None  # it sent a heartbeat meanwhile
        fresh = root / f"{LOCK}.{uuid.uuid4().hex[:12]}"
        fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        lease = Lease(path, fd, lease_s, what)
        lease.record["took_over_from"] = {"pid": seen.pid, "host": seen.host}
        try:
            if FLOCK is not None and not FLOCK(fd):
                raise StoreError("cannot lock a new lock file", path=str(fresh))
            lease.claim()
            durable.move(fresh, path)
            durable.sync_dir(root)
        except BaseException:
            lease.release()
            fresh.unlink(missing_ok=True)
            raise
        return lease
    finally:
        os.close(guard)
        mutex.unlink(missing_ok=True)


class StageOwner(Lease):
    """A writer's claim on its part of ``stage/`` (``stage/owner-<ingest>.json``), with
    the lock's record and heartbeat: while it is alive, no other writer removes that
    part. Released, the file is gone."""

    def _removed_on_release(self) -> bool:
        return True


_STAGE_TRIES = 50  # each lost only to a writer that ended meanwhile


def own_stage(stage: Path, ingest_id: str, lease_s: float) -> StageOwner:
    """Claim the stage of ``ingest_id`` (an OSError, such as a full disk, is the caller's)."""
    path = stage / f"{OWNER}{ingest_id}.json"
    # Another writer that ends removes ``stage/`` when it finds it empty (and the store's
    # folder, if that writer made it and nothing was committed: a store on object storage
    # has no manifest in it), which it may do between this mkdir and this open: make them
    # again. Once the claim is in, the folder is not empty and stays.
    for attempt in range(_STAGE_TRIES):
        stage.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileNotFoundError:
            if attempt == _STAGE_TRIES - 1:
                raise
    owner = StageOwner(path, fd, lease_s, ingest_id)
    try:
        owner.claim()
    except BaseException:
        owner.release()
        raise
    return owner


def owner_alive(stage: Path, ingest_id: str, lease_s: float) -> bool:
    """Whether the writer of ``ingest_id`` still works on its stage: its claim is there,
    its process not gone (on this host) and its heartbeat within the lease."""
    holder = read_holder(stage / f"{OWNER}{ingest_id}.json")
    return holder is not None and not holder.dead() and holder.age(time.time()) <= lease_s


class Watchdog:
    """Moves a lease's heartbeat on, from a thread, while ``folder`` changes (files added,
    grown or removed): a log being read into ``stage/`` is progress; a writer stuck on a
    server that answers nothing makes none. ``only``: what in ``folder`` counts (the
    entries whose names hold it: one writer's part of the stage)."""

    def __init__(self, lease: Lease, folder: Path, only: str | None = None) -> None:
        self.lease = lease
        self.folder = folder
        self.only = only
        self.every = min(max(lease.lease_s / 6, 0.1), 30.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="specscope-lease", daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last: tuple[int, int, int] | None = None
        while not self._stop.wait(self.every):
            now = _signature(self.folder, self.only)
            if now != last:
                self.lease.beat(now=True)
                last = now


def _signature(folder: Path, only: str | None = None) -> tuple[int, int, int]:
    """Files, bytes and the newest time in ``folder`` (in its entries whose names hold
    ``only``): what changes as work goes on."""
    files = size = newest = 0
    for top, dirs, names in os.walk(folder):
        if only is not None and top == str(folder):
            dirs[:] = [d for d in dirs if only in d]
            # not the claim itself, whose heartbeat would otherwise keep itself going
            names = [n for n in names if only in n and not n.startswith(OWNER)]
        for name in names:
            try:
                st = os.stat(os.path.join(top, name))
            except OSError:
                continue
            files += 1
            size += st.st_size
            newest = max(newest, st.st_mtime_ns)
    return files, size, newest


__all__ = [
    "DEFAULT_LEASE_S",
    "FLOCK",
    "LEASE_ENV",
    "OWNER",
    "Holder",
    "Lease",
    "StageOwner",
    "Watchdog",
    "acquire",
    "lease_seconds",
    "lock_path",
    "own_stage",
    "owner_alive",
    "pid_alive",
    "read_holder",
]
