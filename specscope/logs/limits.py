"""How much of a log is read, and how: the limits that keep memory and time bounded by
the size of the input whatever the input holds (README → Limits and safety → Logs).

Each limit is a constant here with the environment variable that overrides it; the
readers read the variables when they start a source (``refresh``). Lines longer than the
line limit are skipped while they are read, in bounded memory (``cap_lines``): nothing
holds a whole line before knowing how long it is.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from specscope.errors import UsageError

# A line (or a record joined from wrapped lines) longer than this is skipped, not read.
MAX_LINE_BYTES = 1 << 20  # SPECSCOPE_MAX_LINE_BYTES
# A .gz may inflate to this many times its own size (and to GZIP_FLOOR_BYTES whatever its
# size: a small file of repeated lines compresses far better than a log) ...
GZIP_MAX_RATIO = 200  # SPECSCOPE_GZIP_MAX_RATIO
GZIP_FLOOR_BYTES = 64 << 20
# ... and never beyond this.
GZIP_MAX_BYTES = 20 << 30  # SPECSCOPE_GZIP_MAX_BYTES
# Per-position entries of one record: a longer list is not a draft of k tokens.
MAX_K = 64  # SPECSCOPE_MAX_K
# Counts above this are not counts (and would not survive a float).
MAX_COUNT = 2**53
# A pretty-printed JSON document (a saved benchmark result) is read whole up to this.
MAX_JSON_DOC_BYTES = 64 << 20

_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _env_int(name: str, default: int, *, sizes: bool = False) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    number, unit = text.lower().removesuffix("ib").removesuffix("b"), 1
    if sizes and number[-1:] in _UNITS:
        number, unit = number[:-1], _UNITS[number[-1]]
    try:
        value = int(float(number) * unit)
    except (ValueError, OverflowError):
        value = 0
    if value < 1:
        what = "a size such as 1M or 20G" if sizes else "a whole number above 0"
        raise UsageError(f"{name} must be {what}, not {text!r}")
    return value


_READ: dict[str, int] = {}  # the line and list limits, as last read (they are asked often)


def refresh() -> None:
    """Read the line and list limits from the environment again: each reader does when
    it starts (``LineParser``, ``parse_text``, ``bulk.parse_source``)."""
    _READ["line"] = _env_int("SPECSCOPE_MAX_LINE_BYTES", MAX_LINE_BYTES, sizes=True)
    _READ["k"] = _env_int("SPECSCOPE_MAX_K", MAX_K)


def max_line_bytes() -> int:
    if "line" not in _READ:
        refresh()
    return _READ["line"]


def gzip_max_ratio() -> int:
    return _env_int("SPECSCOPE_GZIP_MAX_RATIO", GZIP_MAX_RATIO)


def gzip_max_bytes() -> int:
    return _env_int("SPECSCOPE_GZIP_MAX_BYTES", GZIP_MAX_BYTES, sizes=True)


def max_k() -> int:
    if "k" not in _READ:
        refresh()
    return _READ["k"]


def gzip_allowance(compressed: int) -> int:
    """How many bytes a ``.gz`` of ``compressed`` bytes may inflate to."""
    return min(gzip_max_bytes(), max(gzip_max_ratio() * compressed, GZIP_FLOOR_BYTES))


def size_text(n: int) -> str:
    """``1 MiB``, ``4.0 GiB``, ``812 bytes``: a size as people read it."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            whole = n % scale == 0
            return f"{n // scale} {unit}" if whole else f"{n / scale:.1f} {unit}"
    return f"{n:,} bytes"


@dataclass
class LongLines:
    """The lines ``cap_lines`` left out: (line number, length in bytes). A reader that
    counts lines itself (the bulk reader, by blocks) has them noted by where they are in
    the output, ``unplaced``, and numbers them with ``place`` as its blocks pass."""

    limit: int
    lines: list[tuple[int, int]] = field(default_factory=list)
    unplaced: list[tuple[int, int]] = field(default_factory=list)  # (offset of its \\n, length)

    @property
    def reason(self) -> str:
        return (
            f"a line over the {size_text(self.limit)} line limit, not read "
            "(SPECSCOPE_MAX_LINE_BYTES)"
        )

    def place(self, block: bytes | None, offset: int, lines: int) -> None:
        """Number the lines left out inside ``block``, which starts ``offset`` bytes into
        the output after ``lines`` lines (``None``: the end of it, after ``lines``)."""
        end = offset + len(block) if block is not None else None
        while self.unplaced and (end is None or self.unplaced[0][0] < end):
            at, size = self.unplaced.pop(0)
            before = block.count(b"\n", 0, at - offset) if block is not None else 0
            self.lines.append((lines + before + 1, size))

    def notes(self, shown: int = 5) -> list[str]:
        out = [f"line {n} is {size:,} bytes long: skipped" for n, size in self.lines[:shown]]
        if len(self.lines) > shown:
            out.append(f"{len(self.lines) - shown} more lines over the line limit skipped")
        return out


def cap_lines(
    chunks: Iterator[bytes], long: LongLines | None, limit: int, numbered: bool = True
) -> Iterator[bytes | memoryview]:
    """The bytes of ``chunks`` with every line longer than ``limit`` bytes emptied (its
    ``\\n`` kept, so lines keep their numbers), each noted in ``long``: by number, or with
    ``numbered=False`` by where it is in the output (``LongLines.place``; counting the
    lines here would be a pass more over the log). Memory holds at most ``limit`` bytes
    of a line: a line is passed on once its end is seen, or dropped as soon as it is too
    long. ``\\n`` ends a line (ASCII-compatible encodings only). What it passes on are
    views of the chunks (no copy): bytes-like, for ``b"".join`` or a decoder."""
    held: list[bytes | memoryview] = []  # the start of the current line, when it may still be kept
    held_len = 0  # its length so far (also once it is being dropped)
    dropping = False
    count = long is not None and numbered
    number = 1  # the current line's number (when counted)
    out = 0  # bytes passed on so far
    for chunk in chunks:
        whole = memoryview(chunk)
        # Pieces no longer than the limit: a line inside one cannot be too long.
        for at in range(0, len(chunk), limit) if len(chunk) > limit else (0,):
            piece = chunk[at : at + limit] if len(chunk) > limit else chunk
            view = whole[at : at + len(piece)]
            first = piece.find(b"\n")
            if first < 0:
                held_len += len(piece)
                if not dropping and held_len > limit:
                    dropping, held = True, []
                elif not dropping:
                    held.append(view)
                continue
            if dropping or held_len + first > limit:
                if long is not None:
                    if count:
                        long.lines.append((number, held_len + first))
                    else:
                        long.unplaced.append((out, held_len + first))
                out += 1
                yield b"\n"
            else:
                for part in (*held, view[: first + 1]):
                    out += len(part)
                    yield part
            last = piece.rfind(b"\n")
            if last > first:
                out += last - first
                yield view[first + 1 : last + 1]
            if count:
                number += piece.count(b"\n", first)
            rest = view[last + 1 :]
            held, held_len, dropping = ([rest] if rest else []), len(rest), False
    if dropping:
        if long is not None:
            if count:
                long.lines.append((number, held_len))
            else:
                long.unplaced.append((out, held_len))
    else:
        yield from held


def cap_text_lines(
    lines: Iterator[tuple[int, str]], long: LongLines | None, limit: int
) -> Iterator[tuple[int, str]]:
    """Numbered lines with those over ``limit`` bytes (in UTF-8) emptied and noted."""
    for number, text in lines:
        if len(text) * 4 > limit and len(text.encode("utf-8", "surrogatepass")) > limit:
            if long is not None:
                long.lines.append((number, len(text.encode("utf-8", "surrogatepass"))))
            text = ""
        yield number, text


__all__ = [
    "GZIP_FLOOR_BYTES",
    "GZIP_MAX_BYTES",
    "GZIP_MAX_RATIO",
    "MAX_COUNT",
    "MAX_JSON_DOC_BYTES",
    "MAX_K",
    "MAX_LINE_BYTES",
    "LongLines",
    "cap_lines",
    "cap_text_lines",
    "gzip_allowance",
    "gzip_max_bytes",
    "gzip_max_ratio",
    "max_k",
    "max_line_bytes",
    "refresh",
    "size_text",
]
