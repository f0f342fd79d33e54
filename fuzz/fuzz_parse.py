#!/usr/bin/env python3
"""Coverage-guided fuzzing of the log readers with atheris (libFuzzer for Python).

    python fuzz/fuzz_parse.py --seed        # the seeds into fuzz/corpus/, labels into parse.dict
    python fuzz/fuzz_parse.py fuzz/corpus -dict=fuzz/parse.dict -max_total_time=600 \
        -timeout=10 -max_len=8192

Each input (any bytes, decoded as UTF-8 with replacement) goes through
``specscope.parse_text``, through ``specscope.logs.fields.read_fields`` (and
``read_block``) of every format definition, and through the bounded line splitter of
``specscope.logs.limits``. It must give rows or skipped lines and never raise, nor hang
(libFuzzer's ``-timeout``); the rows must be ones the store can hold (they are staged as
Arrow tables) and keep the limits (k, counts, accepted no more than drafted). See
fuzz/README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports(include=["specscope.logs"]):
    from specscope.logs.definitions import load_definitions
    from specscope.logs.fields import read_block, read_fields
    from specscope.logs.grammar import Grammar
    from specscope.logs.limits import MAX_COUNT, MAX_K, LongLines, cap_lines
    from specscope.logs.parser import parse_text
    from specscope.logs.staging import Stage

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
DICTIONARY = HERE / "parse.dict"
DEFINITIONS = load_definitions()
GRAMMAR = Grammar(DEFINITIONS)
FIELDS = [d for d in DEFINITIONS if d.kind == "fields"]
BLOCKS = [d for d in DEFINITIONS if d.kind == "block"]


def _check_rows(tables: dict[str, list[dict[str, Any]]]) -> None:
    for table, rows in tables.items():
        for row in rows:
            assert isinstance(row["line"], int) and row["line"] >= 1, row
            if table != "spec_decode":
                continue
            per_pos = row.get("accepted_per_pos") or []
            assert len(per_pos) <= MAX_K, row
            assert all(c is None or 0 <= c < MAX_COUNT for c in per_pos), row
            assert row.get("k") is None or 0 <= row["k"] <= MAX_K, row
            accepted, drafted = row.get("accepted_tokens"), row.get("draft_tokens")
            if isinstance(accepted, int) and isinstance(drafted, int) and accepted > drafted:
                assert "above draft tokens" in str(row.get("problems")), row


def _check_cap_lines(data: bytes) -> None:
    """The bounded splitter against the obvious one, with a small limit and chunks cut
    where the input says."""
    if len(data) < 2:
        return
    limit = 1 + data[0] % 40
    cut = 1 + data[1] % 50
    body = data[2:]
    chunks = iter([body[i : i + cut] for i in range(0, len(body), cut)])
    long = LongLines(limit)
    got = b"".join(cap_lines(chunks, long, limit))
    lines = body.split(b"\n")
    want = b"\n".join(line if len(line) <= limit else b"" for line in lines)
    assert got == want, (body, limit, cut, got, want)
    numbers = [i + 1 for i, x in enumerate(lines) if len(x) > limit]
    assert [n for n, _ in long.lines] == numbers
    # Noted by where they are, and numbered as blocks of the output pass (the bulk reader).
    chunks = iter([body[i : i + cut] for i in range(0, len(body), cut)])
    placed = LongLines(limit)
    out = b"".join(cap_lines(chunks, placed, limit, numbered=False))
    offset = count = 0
    for i in range(0, len(out), cut + 3):
        block = out[i : i + cut + 3]
        placed.place(block, offset, count)
        offset, count = offset + len(block), count + block.count(b"\n")
    placed.place(None, offset, count)
    assert placed.lines == long.lines, (placed.lines, long.lines)


# Values that broke a reader before, for mutations to insert whole; and a byte that the
# target turns into a number of 5,000 digits (too long for a dictionary entry, and past
# Python's int conversion limit).
HOSTILE = [
    "99999999999999999999",
    "1e308",
    "-0",
    "nan",
    "inf",
    "\x00",
    "02-30",
    "13-45",
    "99:99:99",
    "pid=",
    "\x7f",
]
LONG_NUMBER = "\x7f"


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace").replace(LONG_NUMBER, "9" * 5000, 40)
    result = parse_text(text, GRAMMAR)
    _check_rows(result.tables)
    for skip in result.skipped:
        assert isinstance(skip.line, int) and isinstance(skip.reason, str)
    Stage().flush(result.tables)  # every row as the store's columns hold it (Arrow)
    for defn in FIELDS:
        read_fields(defn, text)
    for defn in BLOCKS:
        read_block(defn, text)
    _check_cap_lines(data)


def _escape(byte: int) -> str:
    return chr(byte) if 32 <= byte < 127 and byte not in b'"\\' else f"\\x{byte:02x}"


def write_seeds() -> int:
    """Every sample text of every definition in ``parsers/`` as a corpus file, and every
    label and literal as a libFuzzer dictionary entry."""
    CORPUS.mkdir(exist_ok=True)
    n = 0
    words: set[str] = set(HOSTILE)
    for defn in DEFINITIONS:
        words.update(defn.literals)
        words.update(f"{spec.label}: " for spec in defn.fields.values())
        for i, sample in enumerate(defn.samples, 1):
            (CORPUS / f"seed-{defn.name}-{i}").write_text(sample.text, encoding="utf-8")
            n += 1
    entries = ("".join(_escape(b) for b in w.encode()) for w in sorted(words))
    DICTIONARY.write_text("".join(f'"{e}"\n' for e in entries), encoding="ascii")
    return n


def main() -> None:
    if sys.argv[1:] == ["--seed"]:
        print(f"{write_seeds()} seeds in {CORPUS}")
        return
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
