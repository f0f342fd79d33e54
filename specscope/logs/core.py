"""The compiled scanner (``specscope._core``, built from ``rust/``) as the bulk reader uses
it: the definitions compiled into what the core looks for (``scanner``), a block's lines
classified and its plain records cut out in Rust (``prepare_block``: whole columns back,
no Python object per line), and files and ``.gz`` read in blocks in Rust with the limits
of ``specscope.logs.limits`` (``blocks``).

Without the extension (a source tree never built) ``available()`` is false and the bulk
reader classifies with polars (``specscope.logs.bulk_polars``), as before.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from specscope.errors import InputBinaryError
from specscope.logs.blocks import BLOCK_LINES
from specscope.logs.bulkplan import (
    INNER_HEAD,
    PREFIX,
    BulkGrammar,
    Prepared,
    group_kinds,
    prepared,
    typed_records,
)
from specscope.logs.clean import ANSI
from specscope.logs.grammar import Envelope
from specscope.logs.jsonpaste import OPENS
from specscope.logs.limits import LongLines, gzip_allowance, size_text
from specscope.logs.source import STDIN, Source


def _load() -> Any:
    """The extension module, private to this one (it has no Python source for the layer
    test to follow, hence by name). Run from a source tree (``python -m pytest`` at its
    root) after ``pip install .``, the tree's ``specscope/`` shadows the installed package
    and holds no extension: the installed one is loaded from site-packages."""
    try:
        return importlib.import_module("specscope._core")
    except ImportError:
        pass
    from importlib import metadata

    try:
        files = metadata.distribution("specscope").files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.parts[:1] == ("specscope",) and f.name.startswith("_core.") and f.suffix == ".so":
            spec = importlib.util.spec_from_file_location("specscope._core", str(f.locate()))
            if spec is None or spec.loader is None:
                return None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules["specscope._core"] = module
            return module
    return None  # a source tree nobody built: the polars classifier reads


_core: Any = None
_loaded = False


def available() -> bool:
    """Whether the compiled core is there (loaded on first asking: commands that read no
    log, such as a pull, never load it)."""
    global _core, _loaded
    if not _loaded:
        _core, _loaded = _load(), True
    return _core is not None


def scanner(plan: BulkGrammar) -> Any:
    """What the definitions ask the core to find: their literals and the prefixes of them
    a cut line may end in, and each plain shape (its literal start and its regex). Built
    once a plan (the core's ``Scanner`` is frozen: a scan keeps its state to itself)."""
    assert available()
    if plan.compiled is None:
        plan.compiled = _build(plan)
    return plan.compiled


def _build(plan: BulkGrammar) -> Any:
    return _core.Scanner(
        plan.literals,
        plan.prefixes,
        [(s.prefix, s.pattern) for s in plan.shapes],
        7 * plan.max_k - 2,  # a list of k entries 'd.ddd, ' (``plain.clean_enough``)
        ANSI,
        PREFIX,
        INNER_HEAD,
        # Groups the core reads as their type (as ``plain.convert`` would), the rest as text.
        kinds=[sorted(group_kinds(s).items()) for s in plan.shapes],
        # Where none is in the rest of a wrapped record, the line parser reads that rest
        # as one piece (the core joins such a record itself: ``Scanner::wrapped``).
        anchor_literals=sorted(plan.grammar.anchor_literals),
    )


_LEADS = np.frombuffer(b" \t>", np.uint8)  # an indent or a quote
_FIRST = np.frombuffer(b" \t>[", np.uint8)  # how a line that may open a document starts
_AFTER_BRACKET = np.frombuffer(b" \t{\r\n", np.uint8)
_MAX_LEAD = 64  # indent and quotes before a document's '{' (a list item's fence: a few)


class BlockLines:
    """A block's lines, decoded one at a time when the walk asks for one."""

    def __init__(self, block: bytes, offsets: np.ndarray, filled: np.ndarray) -> None:
        self.block, self.offsets, self.filled_mask = block, offsets, filled

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> str:
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        if b > a and self.block[b - 1] == 10:
            b -= 1
        return self.block[a:b].decode("utf-8")

    def filled(self) -> np.ndarray:
        return np.flatnonzero(self.filled_mask)

    def opens(self) -> np.ndarray:
        # By bytes, in numpy: past each line's indent and quotes (a step a byte, all lines at
        # once), the lines whose next byte is '{', or '[' before a blank, '{' or the end
        # (a SGLang line's '[date' is not); OPENS decides the few found. A line starting
        # with '{' goes to the parser already.
        data = np.frombuffer(self.block, np.uint8)
        if not len(data) or len(self.offsets) < 2:
            return np.zeros(0, np.int64)
        last = len(data) - 1
        starts, ends = self.offsets[:-1], self.offsets[1:]
        lines = np.flatnonzero(np.isin(data[np.minimum(starts, last)], _FIRST))
        pos = starts[lines]
        for _ in range(_MAX_LEAD):
            more = (pos < ends[lines]) & np.isin(data[np.minimum(pos, last)], _LEADS)
            if not more.any():
                break
            pos = pos + more
        at = data[np.minimum(pos, last)]
        after = data[np.minimum(pos + 1, last)]
        opening = (pos < ends[lines]) & (
            ((at == 0x7B) & (pos > starts[lines]))
            | ((at == 0x5B) & (np.isin(after, _AFTER_BRACKET) | (pos + 1 >= ends[lines])))
        )
        found = lines[opening].tolist()
        return np.array([i for i in found if OPENS.match(self[i])], np.int64)


def _bitmap(valid: bytes) -> pa.Buffer | None:
    if b"\x00" not in valid:  # most columns: asked of the bytes (memchr), no array made
        return None
    mask = np.frombuffer(valid, np.uint8).astype(bool)
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def _strings(offsets: bytes, data: bytes, valid: bytes) -> pl.Series:
    bitmap = _bitmap(valid)
    nulls = -1 if bitmap is not None else 0
    array = pa.LargeStringArray.from_buffers(
        len(valid), pa.py_buffer(offsets), pa.py_buffer(data), bitmap, nulls
    )
    return pl.Series(array)


def _column(name: str, column: tuple[Any, ...]) -> pl.Series:
    """A group's column as the core hands it: text, or already read as its type."""
    kind, first, second, valid = column
    n = len(valid)
    if kind == "text":
        return _strings(first, second, valid).alias(name)
    if kind == "list":
        mask = pa.array(np.frombuffer(valid, np.uint8) == 0)
        offsets = pa.array(np.frombuffer(first, np.int64))
        values = pa.array(np.frombuffer(second, np.float64))
        array: pa.Array = pa.LargeListArray.from_arrays(offsets, values, mask=mask)
        return pl.Series(name, array).cast(pl.List(pl.Float64))
    dtype = pa.int64() if kind == "int" else pa.float64()
    array = pa.Array.from_buffers(dtype, n, [_bitmap(valid), pa.py_buffer(first)])
    return pl.Series(name, array)


def prepare_block(scan: Any, plan: BulkGrammar, block: bytes) -> Prepared | None:
    """A block classified by the core; ``None`` for a block without lines."""
    found = scan.scan(block)
    if found is None:  # not UTF-8: read as the line parser reads it
        block = block.decode("utf-8", errors="replace").encode("utf-8")
        found = scan.scan(block)
    offsets = np.frombuffer(found["offsets"], np.int64)
    if len(offsets) <= 1:
        return None
    kind = np.frombuffer(found["kind"], np.int8).copy()
    key_of = np.frombuffer(found["key"], np.int32).astype(np.int64)
    month = np.frombuffer(found["month"], np.uint8)
    day = np.frombuffer(found["day"], np.uint8)
    clock = np.frombuffer(found["clock"], np.uint32)
    year = np.frombuffer(found["year"], np.int32)
    level = np.frombuffer(found["level"], np.uint8)
    procs: list[tuple[str, int]] = found["procs"]
    levels: list[str] = _core.LEVELS if _core is not None else []
    out = []
    shapes = zip(found["shapes"], found["heads"], strict=True)
    for i, ((lines_raw, _, columns), heads) in enumerate(shapes):
        if len(lines_raw) == 0:
            continue
        # The records' line, order, process and timestamp's parts (``rust/src/head.rs``).
        head = pl.DataFrame([_column(name, c) for name, c in heads.items()])
        fields = head.with_columns(_column(name, columns[name]) for name in columns)
        out.append(typed_records(plan, i, fields))
    records = pl.DataFrame()
    if out:
        records = pl.concat(out, how="diagonal_relaxed").sort("_o").drop("_o")

    def process(i: int) -> tuple[str, int]:
        return procs[int(key_of[i]) - 1]

    def envelope(i: int) -> Envelope:
        proc, pid = process(i)
        c = int(clock[i])
        return Envelope(
            proc=proc,
            pid=pid,
            level=levels[int(level[i]) - 1],
            month=int(month[i]),
            day=int(day[i]),
            time=f"{c // 10000:02d}:{c // 100 % 100:02d}:{c % 100:02d}",
            year=int(year[i]) if year[i] >= 0 else None,
        )

    filled = np.frombuffer(found["filled"], np.uint8).astype(bool)
    return prepared(
        BlockLines(block, offsets, filled),
        kind,
        records,
        dated=month > 0,
        key_of=key_of,
        process=process,
        envelope=envelope,
    )


def blocks(source: Source, size: int, long: LongLines) -> Iterator[bytes] | None:
    """The source's content in blocks read by the core (a file on disk only; ``None``
    otherwise), as ``Source.blocks`` gives them: lines over the limit emptied and noted in
    ``long`` by where they are, a ``.gz`` inflated and refused past its allowance."""
    if not available() or source.path == STDIN:
        return None
    allowed = gzip_allowance(source.size)
    reader = _core.Reader(source.path, size, BLOCK_LINES, long.limit, allowed)
    return _read(reader, source, long, allowed)


def _read(reader: Any, source: Source, long: LongLines, allowed: int) -> Iterator[bytes]:
    while True:
        try:
            block = reader.next_block()
        except ValueError as exc:
            # The core raises ``ValueError(("bomb", inflated))``: its args are the pair.
            what, detail = exc.args if len(exc.args) == 2 else exc.args[0]
            if what == "bomb":
                raise InputBinaryError(
                    f"a gzip stream of {size_text(source.size)} that inflates past "
                    f"{size_text(allowed)} (a gzip bomb?): refused "
                    "(SPECSCOPE_GZIP_MAX_RATIO, SPECSCOPE_GZIP_MAX_BYTES raise the limit)",
                    path=source.display,
                ) from None
            raise InputBinaryError(str(detail), path=source.display) from None
        long.unplaced.extend(reader.take_long())
        source.notes.extend(reader.take_notes())
        if block is None:
            # A .gz's content, hashed as it was inflated: ingest needs no second inflate.
            digest = reader.content_digest()
            if digest is not None:
                source.learn(*digest)
            return
        yield block


__all__ = ["BlockLines", "available", "blocks", "prepare_block", "scanner"]
