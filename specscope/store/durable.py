"""The few file-system steps a commit is made of, each durable when it returns: a file synced,
a directory synced after names were added to or removed from it, a rename, a small file
replaced whole. The commit (``commit``) calls them through this module, so that a test can
stop a process at any one of them.

Where a directory cannot be opened (Windows), syncing it is skipped: NTFS journals renames.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

# errno values of a full disk or quota, and how polars words the same (it sets no errno).
_FULL = {errno.ENOSPC, errno.EDQUOT}
_FULL_TEXT = ("No space left on device", "Disk quota exceeded", "os error 28", "os error 122")


def sync_file(path: Path) -> None:
    """Flush ``path``'s bytes to the disk."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def sync_dir(path: Path) -> None:
    """Flush ``path``'s entries (names added, renamed or removed) to the disk."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (IsADirectoryError, PermissionError):  # Windows opens no directory
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def move(source: Path, dest: Path) -> None:
    """Rename ``source`` to ``dest`` (one file system; atomic)."""
    os.replace(source, dest)


def replace_file(path: Path, data: bytes) -> None:
    """``path`` holds ``data``, or (on any failure) what it held before: written beside it,
    synced, renamed over it, and the directory synced."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        move(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sync_dir(path.parent)


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the quota) is full."""
    if isinstance(exc, OSError) and exc.errno in _FULL:
        return True
    text = str(exc)
    return isinstance(exc, OSError) and any(t in text for t in _FULL_TEXT)


def reason(exc: BaseException) -> str:
    """An OSError in a few words (``No space left on device``), without the path."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


__all__ = ["disk_full", "move", "reason", "replace_file", "sync_dir", "sync_file"]
