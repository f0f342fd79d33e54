"""A log being written: its new lines as they arrive, its rotation followed."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from pathlib import Path

from specscope.logs.limits import max_line_bytes

_CHUNK = 1 << 20


class FollowedLog:
    """The lines of a file as it grows; a file that shrinks or is replaced (rotation) is
    read again from its start. It is read a block at a time, and a line over the line
    limit comes as ``""`` (as from ``Source.lines``): memory holds one block and one line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.partial = ""
        self.dropping = False  # the partial line is over the limit: its rest is skipped
        self.number = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read(self) -> Iterator[tuple[int, str]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        if self.inode is not None and (st.st_ino != self.inode or st.st_size < self.offset):
            self.offset, self.partial, self.dropping = 0, "", False  # rotated: a new file
            self._decoder.reset()
        self.inode = st.st_ino
        if st.st_size <= self.offset:
            return
        limit = max_line_bytes()
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            while data := f.read(_CHUNK):
                self.offset += len(data)
                lines = self._decoder.decode(data).split("\n")
                for i, line in enumerate(lines[:-1]):
                    if i == 0:
                        line = "" if self.dropping else self.partial + line
                        self.partial, self.dropping = "", False
                    self.number += 1
                    yield self.number, line if len(line) <= limit else ""
                rest = lines[-1]
                if len(lines) == 1:  # no line ended in this block
                    rest = self.partial + rest
                self.partial = "" if self.dropping or len(rest) > limit else rest
                self.dropping = self.dropping or len(rest) > limit


__all__ = ["FollowedLog"]
