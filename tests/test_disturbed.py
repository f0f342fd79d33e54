"""Records disturbed the way logs disturb them, read by the bulk reader with the compiled
core as the line parser reads them (issue 17): real records (every plain record of the
fixtures' real excerpts and seeds, a few of each shape) cut at every column, and every
pair of them glued on one line, as printed and under one header (the pairs the core
splits itself). The tables, runs, skipped lines and counts must be identical; the cuts
the core joins itself (``Scanner::wrapped``) are held to the line parser's joins here."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specscope.logs import core
from specscope.logs.bulkplan import BulkGrammar
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from tests.helpers import FIXTURES
from tests.test_bulk import _same

PLAN = BulkGrammar(Grammar(load_definitions()))
FILES = sorted(
    p for d in ("seeds", "world") for p in (FIXTURES / d).iterdir() if p.suffix != ".toml"
)
_HEAD = re.compile(r"\((\w+) pid=(\d+)\) .*?\] ")


def _real_records(per_shape: int) -> list[str]:
    """Plain record lines of the real excerpts, ``per_shape`` of each shape of message
    (its labels, numbers aside), from as many files as there are."""
    assert core.available()
    scanner = core.scanner(PLAN)
    by_shape: dict[str, list[str]] = {}
    for path in FILES:
        data = path.read_bytes()
        found = core.prepare_block(scanner, PLAN, data) if data else None
        if found is None or not len(found.records):
            continue
        seen = set()
        whole = found.records.filter(found.records["_n"] == 0)  # not wrapped over lines
        rows = zip(whole["_i"].to_list(), whole["format"].to_list(), strict=True)
        for i, fmt in rows:
            line = found.lines[i]
            m = _HEAD.search(line)
            assert m is not None, line
            shape = fmt + re.sub(r"[\d.]+(?:, [\d.]+)*", "0", line[m.end() :])
            if shape not in seen and len(by_shape.setdefault(shape, [])) < per_shape:
                seen.add(shape)  # one of a shape a file
                by_shape[shape].append(line)
    return [line for lines in by_shape.values() for line in lines]


RECORDS = _real_records(3) if core.available() else []
ONE_EACH = _real_records(1) if core.available() else []


def _access(record: str) -> str:
    m = _HEAD.search(record)
    assert m is not None
    return f'({m.group(1)} pid={m.group(2)}) INFO:     127.0.0.1:5 - "GET /metrics HTTP/1.1" 200 OK'


def _under(header_of: str, record: str) -> str:
    """``record``'s message and file under the process, level and time of ``header_of``
    (without a container's prefix: one is printed before a line, not inside it)."""
    m = _HEAD.search(header_of)
    assert m is not None
    head = header_of[m.start() : header_of.index(" [", m.start()) + 1]
    own = _HEAD.search(record)
    assert own is not None
    return head + record[record.index(" [", own.start()) + 1 :]


def _k(record: str) -> int | None:
    """The number of per-position rates a SpecDecoding record prints (its k), if any."""
    m = re.search(r"Per-position acceptance rate: ([\d., ]+)", record)
    return len(m.group(1).strip(", ").split(",")) if m else None


def _glued_pairs(tmp_path: Path, first: str) -> tuple[Path, int]:
    """The pairs, and how many of them glued under one header the core surely splits
    itself: those whose second record prints no k. A second that prints one may change
    its process's k, which may start a run (``RunBook.reshape``): such records are the
    line parser's (``plain.reshaping``), and the tables still must be the same."""
    lines = []
    for second in RECORDS:
        lines += [first, first + " " + second, _access(first)]
        lines += [first, first + " " + _under(first, second), _access(first), second]
    path = tmp_path / "glued.log"
    path.write_text("\n".join(lines) + "\n")
    return path, sum(_k(second) is None for second in RECORDS)


def _joined(path: Path, line: str) -> tuple[Any, int, int]:
    """The core's records of ``path``, how many it joined from parts, and the places in
    ``line``'s message where a cut falls inside a number (two digits side by side)."""
    scanned = core.prepare_block(core.scanner(PLAN), PLAN, path.read_bytes())
    assert scanned is not None
    joined = int((scanned.records["_n"] > 0).sum())
    m = _HEAD.search(line)
    assert m is not None
    body = line[m.end() :]
    return scanned, joined, sum(a.isdigit() and b.isdigit() for a, b in itertools.pairwise(body))


@pytest.mark.parametrize("first", range(len(RECORDS)))
def test_every_pair_glued_reads_as_the_line_parser_reads_it(first: int, tmp_path: Path) -> None:
    path, pairs = _glued_pairs(tmp_path, RECORDS[first])
    fast = _same(path)
    # The core read the pairs under one header itself (not left to the line parser).
    scanned = core.prepare_block(core.scanner(PLAN), PLAN, path.read_bytes())
    assert scanned is not None
    at = scanned.records["_i"].to_numpy()
    assert len(np.unique(at[1:][at[1:] == at[:-1]])) >= pairs
    assert fast["bulk_rows"] >= 2 * pairs


@pytest.mark.parametrize("record", range(len(ONE_EACH)))
def test_a_record_cut_at_every_column_reads_as_the_line_parser_reads_it(
    record: int, tmp_path: Path
) -> None:
    line = ONE_EACH[record]
    lines = []
    for column in range(1, len(line)):
        lines += [line, line[:column], line[column:], _access(line)]
    path = tmp_path / "cut.log"
    path.write_text("\n".join(lines) + "\n")
    _same(path)
    # The core joined the cuts it can be sure of itself (every one inside a number of the
    # message, at least), rather than leaving them all to the line parser; a line behind
    # a container's prefix it leaves (its rest would be printed behind one too).
    if not line.startswith("("):
        return
    _, joined, digits = _joined(path, line)
    assert joined >= digits > 0


def test_there_are_real_records_of_each_kind() -> None:
    formats = {r.split("] ", 1)[1].split(":", 1)[0][:6] for r in RECORDS}
    assert {"SpecDe", "Engine"} <= formats
    assert len(RECORDS) >= 12 and len(ONE_EACH) >= 5


# Container prefixes a line of a server's log is printed behind: `docker logs -t` and
# kubectl's stamp, CRI's, compose's service name, and two stamps (`docker logs -t` of a
# container that stamped its log already: the first stamp's year is the line's).
STAMPS = {
    "docker": "2026-11-24T10:00:{s:02d}.{n:09d}Z ",
    "cri": "2026-11-24T10:00:{s:02d}.{n:09d}+01:00 stdout F ",
    "compose": "vllm-1  | 2026-11-24T10:00:{s:02d}.{n:09d}Z ",
    "twice": "2026-11-24T10:00:{s:02d}.{n:09d}Z 2025-05-24T11:55:21.{n:09d}Z ",
}


@pytest.mark.parametrize("stamp", sorted(STAMPS))
@pytest.mark.parametrize("record", range(len(ONE_EACH)))
def test_a_record_cut_at_every_column_behind_stamps_reads_as_the_line_parser_reads_it(
    record: int, stamp: str, tmp_path: Path
) -> None:
    """Each part of a wrapped record behind a stamp of its own, as a container's log
    prints a record a terminal cut; or the first part alone behind one, or the rest alone
    (whose year the line parser gives the record: left to it). The core reads the record
    with its rest where it cut inside a number, and the whole lines behind the stamps."""
    line = ONE_EACH[record]
    if not line.startswith("("):
        return  # one already behind a prefix: the plain test reads it
    count = 0

    def s() -> str:
        nonlocal count
        count += 1
        return STAMPS[stamp].format(s=count % 60, n=count)

    lines = []
    for column in range(1, len(line)):
        head, rest = line[:column], line[column:]
        lines += [s() + line, s() + head, s() + rest, s() + _access(line)]
        lines += [s() + head, rest, head, s() + rest, s() + line]
    path = tmp_path / "cut.log"
    path.write_text("\n".join(lines) + "\n")
    _same(path)
    scanned, joined, digits = _joined(path, line)
    assert joined >= 2 * digits > 0  # each part stamped, and the rest bare
    # The whole lines, behind two stamps too (but for a few the line parser reads first: a
    # process's first line, a record that may change its process's k).
    assert int((scanned.records["_n"] == 0).sum()) >= 1.8 * (len(line) - 1)
