"""What the bulk reader reads (``specscope.logs.bulk``): blocks of whole lines, never too
many lines in one, with long runs of blank lines cut out (a run changes nothing the line
parser holds, and would cost polars a row per line), and the lines of a block as a
string column.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl
import pyarrow as pa

BLOCK_LINES = 1 << 17  # lines per block at most (a block of empty lines is all rows)
BLANK_RUN = 4096  # blank lines in a row that skip polars: about what one call costs
_SPACE = np.zeros(256, bool)
_SPACE[[9, 10, 13, 32]] = True


class Blank:
    """A run of blank lines cut out of a block: the parser passes over them at once."""

    __slots__ = ("lines", "size")

    def __init__(self, lines: int, size: int) -> None:
        self.lines, self.size = lines, size

    def __len__(self) -> int:
        return self.size


def pieces(block: bytes, most: int) -> Iterator[bytes | Blank]:
    """The block with runs of ``BLANK_RUN`` or more blank lines cut out (as ``Blank``), in
    parts of at most ``most`` lines (cut where a line ends). numpy only: it runs beside the
    walk of the block before."""
    data = np.frombuffer(block, np.uint8)
    ends = np.flatnonzero(data == 10)
    if len(ends) * 16 <= len(block):  # no short lines: no blank runs
        yield from _at_most(block, most, ends)
        return
    # Between two bytes that are not white space, stretches long enough to hold a run:
    # the whole lines in them are blank.
    start = 0
    filled = np.flatnonzero(~_SPACE[data])
    bounds = np.concatenate(([-1], filled, [len(block)]))
    for g in np.flatnonzero(np.diff(bounds) > BLANK_RUN).tolist():
        p, q = int(bounds[g]), int(bounds[g + 1])
        first = block.find(b"\n", p, q) if p >= 0 else -1
        last = block.rfind(b"\n", first + 1, q)
        if (p >= 0 and first < 0) or last < first + 1:
            continue
        run = int(np.searchsorted(ends, last, "right") - np.searchsorted(ends, first, "right"))
        if run >= BLANK_RUN:
            yield from _at_most(block[start : first + 1], most)
            yield Blank(run, last - first)
            start = last + 1
    yield from _at_most(block[start:] if start else block, most, None if start else ends)


def _at_most(block: bytes, most: int, ends: np.ndarray | None = None) -> Iterator[bytes]:
    if ends is None:
        ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    if len(ends) <= most:
        if block:
            yield block
        return
    start = 0
    for end in ends[most - 1 :: most].tolist():
        yield block[start : end + 1]
        start = end + 1
    if start < len(block):
        yield block[start:]


def lines_of(block: bytes) -> pl.Series:
    """The lines of a block as a string column. Only ``\\n`` ends a line, and bytes that
    are not UTF-8 read as U+FFFD, as in ``Source.lines``."""
    buf = np.frombuffer(block, np.uint8)
    ends = np.flatnonzero(buf == 10)
    last_open = not block.endswith(b"\n")
    n = len(ends) + (1 if last_open else 0)
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    offsets[1 : len(ends) + 1] = ends + 1
    if last_open:
        offsets[-1] = len(block)
    array = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(block)]
    )
    try:
        text = pl.Series("text", array).cast(pl.String)
    except pl.exceptions.ComputeError:  # not UTF-8 somewhere: rare, so decode it all
        return lines_of(block.decode("utf-8", errors="replace").encode("utf-8"))
    return text.str.strip_suffix("\n")


__all__ = ["BLANK_RUN", "BLOCK_LINES", "Blank", "lines_of", "pieces"]
