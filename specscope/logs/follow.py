"""A log being written: its new lines as they arrive, from a file (its rotation followed)
or from a pipe (``docker logs -f vllm | specscope watch -``)."""

from __future__ import annotations

import codecs
import os
import select
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from specscope.logs.limits import max_line_bytes

_CHUNK = 1 << 20


class _Lines:
    """Bytes as they come, cut into numbered lines. A line over the line limit comes as
    ``""`` (as from ``Source.lines``): memory holds one block and one line."""

    def __init__(self) -> None:
        self.partial = ""
        self.dropping = False  # the partial line is over the limit: its rest is skipped
        self.number = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def reset(self) -> None:
        self.partial, self.dropping = "", False
        self._decoder.reset()

    def cut(self, data: bytes) -> Iterator[tuple[int, str]]:
        limit = max_line_bytes()
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

    def last(self) -> Iterator[tuple[int, str]]:
        """The line the stream ended in without a newline, if any."""
        if self.partial and not self.dropping:
            self.number += 1
            yield self.number, self.partial
        self.partial = ""


class FollowedLog:
    """The lines of a file as it grows; a file that shrinks or is replaced (rotation) is
    read again from its start, a block at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self._lines = _Lines()

    @property
    def number(self) -> int:
        return self._lines.number

    def read(self) -> Iterator[tuple[int, str]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        if self.inode is not None and (st.st_ino != self.inode or st.st_size < self.offset):
            self.offset = 0  # rotated: a new file
            self._lines.reset()
        self.inode = st.st_ino
        if st.st_size <= self.offset:
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            while data := f.read(_CHUNK):
                self.offset += len(data)
                yield from self._lines.cut(data)


class FollowedStream:
    """The lines of a pipe as they come: what has arrived is read without waiting for more
    (select with no timeout, so a quiet pipe never holds the view), and each block is also
    written to ``spool`` (to ingest it when the watch ends). ``ended`` once the writer
    closed the pipe. POSIX only: select does not take pipes on Windows."""

    def __init__(self, stream: BinaryIO, spool: BinaryIO | None = None) -> None:
        self.fd = stream.fileno()
        self.spool = spool
        self.ended = False
        self._lines = _Lines()

    @property
    def number(self) -> int:
        return self._lines.number

    def read(self) -> Iterator[tuple[int, str]]:
        while not self.ended and select.select([self.fd], [], [], 0)[0]:
            data = os.read(self.fd, _CHUNK)
            if not data:
                self.ended = True
                yield from self._lines.last()
                break
            if self.spool is not None:
                self.spool.write(data)
            yield from self._lines.cut(data)


__all__ = ["FollowedLog", "FollowedStream"]
