"""Opening what people hand us: a file, a ``.gz``, standard input; refusing what is not text.

Every failure is a domain error naming the file, so the CLI can print one line.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import itertools
import os
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from specscope.errors import (
    InputBinaryError,
    InputEmptyError,
    InputMissingError,
    InputNotAFileError,
    InputUnreadableError,
)
from specscope.logs.limits import (
    LongLines,
    cap_lines,
    gzip_allowance,
    max_line_bytes,
    size_text,
)

STDIN = "-"
HEAD_BYTES = 65536
_CHUNK = 1 << 20
_SNIFF = 8192


@dataclass
class Source:
    """A log to read, with what identifies its content."""

    path: str  # as the user gave it ("-" for standard input)
    display: str  # what messages call it
    size: int
    sha256: str
    mtime: datetime
    # What identifies the text whatever its file: a rotated log may come back renamed or
    # gzipped. For a plain file the content is the file.
    content_sha256: str = ""
    content_size: int = 0
    head_sha256: str = ""  # of the first HEAD_BYTES of the content
    _data: bytes | None = field(default=None, repr=False)  # standard input, read once
    notes: list[str] = field(default_factory=list)  # partial input: what was not read

    def prefix_sha256(self, size: int) -> str:
        """The digest of the first ``size`` bytes of the content (to tell that a log grew)."""
        h = hashlib.sha256()
        left = size
        for chunk in self._chunks():
            if left <= 0:
                break
            h.update(chunk[:left])
            left -= len(chunk)
        return h.hexdigest()

    def identify(self) -> None:
        """Hash the content (decompressed for gzip) once, to recognise it under any name."""
        whole, head = hashlib.sha256(), hashlib.sha256()
        size = 0
        notes = list(self.notes)  # a cut-off stream is reported when the lines are read
        for chunk in self._chunks():
            whole.update(chunk)
            if size < HEAD_BYTES:
                head.update(chunk[: HEAD_BYTES - size])
            size += len(chunk)
        self.content_sha256, self.content_size = whole.hexdigest(), size
        self.head_sha256 = head.hexdigest()
        self.notes[:] = notes

    def identify_head(self) -> None:
        """Hash the first HEAD_BYTES of the content only: a ``.gz``'s whole content is
        hashed by whoever inflates it to read it (``learn``), not inflated twice."""
        head = hashlib.sha256()
        size = 0
        notes = list(self.notes)
        for chunk in self._chunks():
            head.update(chunk[: HEAD_BYTES - size])
            size += len(chunk)
            if size >= HEAD_BYTES:
                break
        self.head_sha256 = head.hexdigest()
        if size < HEAD_BYTES:  # it all came: identified on the way
            self.content_sha256, self.content_size = self.head_sha256, size
        self.notes[:] = notes

    def learn(self, content_sha256: str, content_size: int) -> None:
        """The content's digest and size, from a reader that inflated all of it."""
        self.content_sha256, self.content_size = content_sha256, content_size

    def prefix_digests(self, sizes: Iterable[int]) -> dict[int, str]:
        """The digests of the content's first ``size`` bytes, for each of ``sizes`` that
        it holds, in one read that stops past the largest: a content that ends before
        then is identified on the way."""
        wanted = sorted({s for s in sizes if s > 0})
        out: dict[int, str] = {}
        h = hashlib.sha256()
        size = 0
        notes = list(self.notes)
        for chunk in self._chunks():
            view = memoryview(chunk)
            while wanted and size + len(view) >= wanted[0]:
                take = wanted[0] - size
                h.update(view[:take])
                view, size = view[take:], size + take
                out[wanted.pop(0)] = h.copy().hexdigest()
            h.update(view)
            size += len(view)
            if not wanted and len(view):
                break  # more content after the largest: not all of it read
        else:
            self.content_sha256, self.content_size = h.hexdigest(), size
        self.notes[:] = notes
        return out

    def size_hint(self) -> int:
        """The content's size, or for a ``.gz`` not yet read the size its last member's
        trailer gives (modulo 4 GiB): for a progress bar."""
        if self.content_size or self._data is not None:
            return self.content_size
        try:
            with open(self.path, "rb") as f:
                f.seek(-4, os.SEEK_END)
                return int.from_bytes(f.read(4), "little")
        except OSError:
            return 0

    def _open_raw(self) -> BinaryIO:
        if self._data is not None:
            return io.BytesIO(self._data)
        try:
            return open(self.path, "rb")
        except PermissionError as exc:
            raise InputUnreadableError("permission denied", path=self.display) from exc
        except OSError as exc:
            raise InputUnreadableError(exc.strerror or str(exc), path=self.display) from exc

    def lines(self, long: LongLines | None = None) -> Iterator[tuple[int, str]]:
        """``(line number, text)`` for every line; ``\\n`` alone ends a line. A line over
        the line limit comes as ``""`` (and is noted in ``long``), never held whole."""
        limit = long.limit if long is not None else max_line_bytes()
        chunks = self._chunks()
        first = next(chunks, b"")
        encoding = _encoding(first[:_SNIFF], self.display)
        read = itertools.chain((first,), chunks)
        ascii_like = encoding in ("utf-8", "utf-8-sig")
        stream: Iterator[bytes | memoryview] = cap_lines(read, long, limit) if ascii_like else read
        decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        pending: list[str] = []  # the start of the current line
        held = 0  # its length; over the limit (UTF-16: in characters) it is dropped
        number = 0
        for chunk in itertools.chain(stream, (None,)):
            text = decoder.decode(b"", final=True) if chunk is None else decoder.decode(chunk)
            parts = text.split("\n")
            tail = parts.pop()
            for i, part in enumerate(parts):
                number += 1
                if i == 0 and (pending or held):
                    held += len(part)
                    part = "".join(pending) + part if held <= limit else ""
                    pending = []
                if held > limit or len(part) > limit:
                    if long is not None:
                        long.lines.append((number, max(held, len(part))))
                    part = ""
                held = 0
                yield number, part
            held += len(tail)
            if held <= limit and tail:
                pending.append(tail)
            elif held > limit:
                pending = []
        if held > limit:
            if long is not None:
                long.lines.append((number + 1, held))
        elif pending:
            yield number + 1, "".join(pending)

    def lines_at(self, starts: Iterable[int], count: int) -> dict[int, list[str]]:
        """Up to ``count`` lines from each of the line numbers ``starts``, numbered as
        ``lines`` numbers them. Blocks before a wanted line are counted, not decoded."""
        wanted = sorted(set(starts))
        out: dict[int, list[str]] = {n: [] for n in wanted}
        if not wanted:
            return out
        raw = self._chunks()
        first = next(raw, b"")
        encoding = _encoding(first[:_SNIFF], self.display)
        chunks = cap_lines(itertools.chain((first,), raw), None, max_line_bytes())
        if encoding not in ("utf-8", "utf-8-sig"):  # not ASCII-compatible: count decoded lines
            for number, text in self.lines():
                for start in wanted:
                    if start <= number < start + count:
                        out[start].append(text)
                if number >= wanted[-1] + count:
                    break
            return out
        number, held = 1, b""  # the number of the first line in ``held``
        last = wanted[-1] + count - 1
        for chunk in itertools.chain(chunks, (None,)):
            if chunk is not None:
                held += chunk
                ends = held.count(b"\n")
                if number + ends <= wanted[0] or not ends:
                    cut = held.rfind(b"\n") + 1  # lines that no start reaches: skip
                    number += ends
                    held = held[cut:]
                    continue
                cut = held.rfind(b"\n") + 1
                body, held = held[:cut], held[cut:]
                pieces = body.split(b"\n")[:-1]
            else:
                pieces = [held] if held else []
            for piece in pieces:
                for start in wanted:
                    if start <= number < start + count:
                        out[start].append(piece.decode("utf-8", errors="replace"))
                number += 1
            while wanted and number > wanted[0] + count - 1:
                wanted.pop(0)
            if number > last or not wanted:
                break
        return out

    def encoding(self) -> str:
        """The text encoding, from the first bytes (a BOM, NULs beside ASCII)."""
        first = next(self._chunks(), b"")
        return _encoding(first[:_SNIFF], self.display)

    def head(self, size: int) -> str:
        """The first ``size`` bytes or so of the content (gunzipped), as text."""
        got: list[bytes] = []
        held = 0
        for chunk in self._chunks():
            got.append(chunk[: size - held])
            held += len(got[-1])
            if held >= size:
                break
        data = b"".join(got)
        return data.decode(_encoding(data[:_SNIFF], self.display), errors="replace")

    def blocks(self, size: int, long: LongLines | None = None) -> Iterator[bytes]:
        """The content in blocks of about ``size`` bytes that end where a line ends (the
        last may not): for reading in bulk. Lines over the line limit come empty, as from
        ``lines`` (UTF-8 only), noted in ``long`` by where they are (``LongLines.place``)."""
        parts: list[bytes | memoryview] = []
        held = 0
        limit = long.limit if long is not None else max_line_bytes()
        for chunk in cap_lines(self._chunks(), long, limit, numbered=False):
            parts.append(chunk)
            held += len(chunk)
            if held < size:
                continue
            data = b"".join(parts)
            cut = data.rfind(b"\n") + 1
            parts, held = ([data[cut:]], len(data) - cut) if cut else ([data], len(data))
            if cut:
                yield data[:cut]
        if held:
            yield b"".join(parts)

    def _chunks(self) -> Iterator[bytes]:
        """The content in blocks, gunzipped when it is gzip (several members too). A gzip
        stream inflates a block at a time (never more than ``_CHUNK`` at once) and is
        refused once it inflates past ``limits.gzip_allowance`` of its size."""
        with self._open_raw() as raw:
            data = raw.read(_CHUNK)
            if data[:2] != b"\x1f\x8b":
                while data:
                    yield data
                    data = raw.read(_CHUNK)
                return
            compressed = (
                len(self._data) if self._data is not None else os.fstat(raw.fileno()).st_size
            )
            allowed = gzip_allowance(compressed)
            produced = 0
            inflate = zlib.decompressobj(wbits=31)
            while True:
                try:
                    out = inflate.decompress(data, _CHUNK)
                except zlib.error as exc:
                    if not produced:
                        raise InputBinaryError(
                            f"not a readable gzip stream ({exc})", path=self.display
                        ) from exc
                    self.notes.append(
                        f"the gzip stream is corrupt after {produced} bytes "
                        f"({exc}): what came before was read"
                    )
                    return
                if out:
                    produced += len(out)
                    if produced > allowed:
                        raise InputBinaryError(
                            f"a gzip stream of {size_text(compressed)} that inflates past "
                            f"{size_text(allowed)} (a gzip bomb?): refused "
                            "(SPECSCOPE_GZIP_MAX_RATIO, SPECSCOPE_GZIP_MAX_BYTES raise the limit)",
                            path=self.display,
                        )
                    yield out
                # The end of a member first: zlib leaves the input after it in both
                # ``unused_data`` and ``unconsumed_tail``, and fed the tail again an ended
                # member takes nothing (a reader that looped there forever, its
                # ``unused_data`` growing, on a multi-member .gz).
                if inflate.eof:
                    data = inflate.unused_data or raw.read(_CHUNK)
                    if not data.strip(b"\x00"):
                        return
                    inflate = zlib.decompressobj(wbits=31)
                    continue
                if inflate.unconsumed_tail:
                    data = inflate.unconsumed_tail  # more output is waiting in this input
                    continue
                data = raw.read(_CHUNK)
                if not data:
                    if not produced:
                        raise InputBinaryError("a gzip stream with no content", path=self.display)
                    self.notes.append("the gzip stream is cut off: what came before was read")
                    return


def _encoding(sniff: bytes, display: str) -> str:
    if sniff.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if sniff.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    if b"\x00" in sniff:
        # UTF-16 without a BOM puts a NUL beside every ASCII character.
        even, odd = sniff[0::2], sniff[1::2]
        if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.05 * len(even):
            return "utf-16-le"
        if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.05 * len(odd):
            return "utf-16-be"
        raise InputBinaryError("binary data, not a text log", path=display)
    controls = sum(1 for b in sniff if b < 9 or 13 < b < 27 or 27 < b < 32)
    if sniff and controls > 0.1 * len(sniff):
        raise InputBinaryError("binary data, not a text log", path=display)
    return "utf-8"


def _digest(f: BinaryIO) -> tuple[str, int, str]:
    """The file's digest and size, and the digest of its first HEAD_BYTES."""
    h, head = hashlib.sha256(), hashlib.sha256()
    size = 0
    while chunk := f.read(_CHUNK):
        h.update(chunk)
        if size < HEAD_BYTES:
            head.update(chunk[: HEAD_BYTES - size])
        size += len(chunk)
    return h.hexdigest(), size, head.hexdigest()


def unhashed(path: str | os.PathLike[str]) -> Source:
    """A file to read lines of, without hashing it first (``open_source`` hashes)."""
    return Source(os.fspath(path), os.fspath(path), 0, "", datetime.now(UTC))


def open_source(path: str | os.PathLike[str]) -> Source:
    """Check that ``path`` is a readable, non-empty file (``-``: standard input)."""
    text_path = os.fspath(path)
    if text_path == STDIN:
        data = sys.stdin.buffer.read()
        if not data.strip():
            raise InputEmptyError("standard input is empty", path="<stdin>")
        sha = hashlib.sha256(data).hexdigest()
        source = Source(STDIN, "<stdin>", len(data), sha, datetime.now(UTC), _data=data)
        source.identify()
        return source
    display = text_path
    p = Path(text_path)
    try:
        st = p.stat()
    except FileNotFoundError as exc:
        raise InputMissingError("no such file", path=display) from exc
    except PermissionError as exc:
        raise InputUnreadableError("permission denied", path=display) from exc
    except OSError as exc:
        raise InputUnreadableError(exc.strerror or str(exc), path=display) from exc
    if stat.S_ISDIR(st.st_mode):
        raise InputNotAFileError("is a directory; give the log files in it", path=display)
    if not stat.S_ISREG(st.st_mode):
        raise InputNotAFileError("not a regular file", path=display)
    try:
        with open(p, "rb") as f:
            plain = f.read(2) != b"\x1f\x8b"
            f.seek(0)
            sha, size, head = _digest(f)
    except PermissionError as exc:
        raise InputUnreadableError("permission denied", path=display) from exc
    except OSError as exc:
        raise InputUnreadableError(exc.strerror or str(exc), path=display) from exc
    if size == 0:
        raise InputEmptyError("the file is empty", path=display)
    mtime = datetime.fromtimestamp(st.st_mtime, UTC)
    source = Source(text_path, display, size, sha, mtime)
    if plain:  # the content is the file: its digests are the file's (no second read)
        source.content_sha256, source.content_size, source.head_sha256 = sha, size, head
    else:  # the content is hashed as it is inflated to be read (``Source.learn``)
        source.identify_head()
    return source


__all__ = ["STDIN", "Source", "open_source", "unhashed"]
