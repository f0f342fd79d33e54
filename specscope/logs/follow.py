"""A log being written: its new lines as they arrive, its rotation followed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


class FollowedLog:
    """The lines of a file as it grows; a file that shrinks or is replaced (rotation) is
    read again from its start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.partial = ""
        self.number = 0

    def read(self) -> Iterator[tuple[int, str]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        if self.inode is not None and (st.st_ino != self.inode or st.st_size < self.offset):
            self.offset, self.partial = 0, ""  # rotated: a new file under the old name
        self.inode = st.st_ino
        if st.st_size <= self.offset:
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        text = self.partial + data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        self.partial = lines.pop()  # the last line may still be being written
        for line in lines:
            self.number += 1
            yield self.number, line


__all__ = ["FollowedLog"]
