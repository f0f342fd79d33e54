"""The compiled scanner (``specscope._core``, issue 17) against the polars classifier it
replaces: the same kind for every line, the same records, headers and processes, on every
fixture, on generated logs and on lines bent in the ways logs bend; its block reader
against ``Source.blocks``. And proof that an ingest uses it (no silent fallback)."""

from __future__ import annotations

import gzip
import hashlib
import random
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specscope.logs import bulk_polars, core
from specscope.logs.bulk import parse_source
from specscope.logs.bulkplan import REST, BulkGrammar
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.limits import LongLines
from specscope.logs.source import open_source
from specscope.logs.staging import Stage
from tests.helpers import FIXTURES, ROOT

sys.path.insert(0, str(FIXTURES))
sys.path.insert(0, str(ROOT / "bench"))

import synth
from generate import write_server

PLAN = BulkGrammar(Grammar(load_definitions()))
FILES = sorted(
    p for d in ("seeds", "world") for p in (FIXTURES / d).iterdir() if p.suffix != ".toml"
)


@pytest.fixture(scope="module")
def scanner():
    assert core.available(), "specscope._core is not built: pip install -e . builds it"
    return core.scanner(PLAN)


def _agree(scanner, block: bytes) -> None:
    if not block:  # never a block: the readers yield none empty
        return
    fast = core.prepare_block(scanner, PLAN, block)
    slow = bulk_polars.prepare_block(PLAN, block)
    if slow is None:
        assert fast is None
        return
    assert fast is not None
    assert len(fast.lines) == len(slow.lines)
    # Two records glued on a line: the core reads both (held to the line parser by
    # tests/test_disturbed.py), polars leaves the line to the line parser.
    glued = np.zeros(0, np.int64)
    # Processes the core saw a glued or wrapped record of (polars leaves those lines to
    # the line parser), with the first line it saw one at.
    joined: dict[int, int] = {}
    found = scanner.scan(block)
    if found is not None:
        key_of = np.frombuffer(found["key"], np.int32)
        for lines_raw, marks, _ in found["shapes"]:
            at = np.frombuffer(lines_raw, np.uint32)
            for i in at[np.frombuffer(marks, np.uint8) > 0].tolist():
                joined[int(key_of[i])] = min(i, joined.get(int(key_of[i]), i))
    if len(fast.records):
        at = fast.records["_i"].to_numpy()
        glued = np.unique(at[1:][at[1:] == at[:-1]])
        assert (fast.kind[glued] == 3).all() and (slow.kind[glued] == 0).all()
        fast.kind[glued] = 0
        fast.records = fast.records.filter(pl.Series(~np.isin(at, glued)))
        fast.slow = np.union1d(fast.slow, glued)
        fast.slow_texts = [fast.lines[i] for i in fast.slow.tolist()]
    # A record wrapped over two lines: the core reads it with its rest (held to the line
    # parser by tests/test_disturbed.py), polars leaves both to the line parser; the line
    # after them is not compared (the core holds a record there, polars did not).
    wrapped = np.zeros(0, np.int64)
    if len(fast.records):
        wrapped = fast.records.filter(pl.col("_n") > 0)["_i"].to_numpy()
        assert (fast.kind[wrapped] == 3).all() and (slow.kind[wrapped] == 0).all()
        assert (fast.kind[wrapped + 1] == REST).all()
        fast.kind[wrapped] = 0
        fast.records = fast.records.filter(pl.col("_n") == 0).drop("_n")
    # A record of a process after such a one: the core has seen the k it repeats, polars
    # has not and leaves it to the line parser as the first of its k (plain.reshaping);
    # both readers still give the line parser's tables (tests/test_launches.py).
    if joined and len(fast.records):
        after = [
            i
            for key, i in fast.records.select("_key", "_i").rows()
            if key in joined and i > joined[key] and fast.kind[i] == 3 and slow.kind[i] == 0
        ]
        if after:
            fast.kind[after] = 0
            fast.records = fast.records.filter(~pl.col("_i").is_in(after))
            fast.slow = np.union1d(fast.slow, after)
            fast.slow_texts = [fast.lines[i] for i in fast.slow.tolist()]
    near = np.union1d(np.union1d(wrapped, wrapped + 1), wrapped + 2)
    near = near[near < len(slow.kind)]
    fast.kind[near] = slow.kind[near]
    for p in (fast, slow):
        keep = ~np.isin(p.slow, near)
        p.slow_texts = [t for t, k in zip(p.slow_texts, keep.tolist(), strict=True) if k]
        p.slow = p.slow[keep]
    bad = np.flatnonzero(fast.kind != slow.kind)
    assert not len(bad), [(int(i), slow.lines[int(i)], fast.kind[i], slow.kind[i]) for i in bad[:3]]
    assert (fast.dated == slow.dated).all()
    for i in range(len(slow.lines)):
        assert fast.lines[i] == slow.lines[i]
    env = np.flatnonzero(slow.kind >= 2)
    for i in env.tolist()[:200]:
        assert fast.process(i) == slow.process(i)
        if slow.dated[i]:
            assert fast.envelope(i) == slow.envelope(i)
    # Processes numbered differently, the same lines alike.
    pairs = set(zip(fast.key_of[env].tolist(), slow.key_of[env].tolist(), strict=True))
    assert len({a for a, _ in pairs}) == len(pairs) == len({b for _, b in pairs})
    assert len(fast.records) == len(slow.records)
    if len(slow.records):
        a = fast.records.drop("_key", "_month", "_day")
        b = slow.records.drop("_key", "_month", "_day")
        # Columns that only the wrapped records left out above had are empty here.
        extra = [c for c in a.columns if c not in b.columns]
        assert all(a[c].null_count() == len(a) for c in extra), extra
        a = a.select(c for c in a.columns if c not in extra)
        assert sorted(a.columns) == sorted(b.columns)
        a = a.select(b.columns)  # diagonal concatenation orders by the shapes present
        assert a.equals(b), a.join(b, on="_i", suffix="_slow").head(3)
        assert fast.records["_month"].cast(pl.Int64).equals(slow.records["_month"].cast(pl.Int64))
        assert fast.records["_day"].cast(pl.Int64).equals(slow.records["_day"].cast(pl.Int64))
    assert fast.slow.tolist() == slow.slow.tolist()
    assert fast.slow_texts == slow.slow_texts


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixtures_classify_as_polars_does(scanner, path: Path) -> None:
    src = open_source(str(path))
    for block in src.blocks(1 << 24):
        _agree(scanner, bytes(block))


@pytest.mark.parametrize("seed", range(30))
def test_synthetic_logs_classify_as_polars_does(scanner, seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    log = synth.generate_seed(seed, synth.random_wrappings(rng))
    path = log.write(tmp_path / ("log.gz" if "gzip" in log.wrappings else "log.txt"))
    for block in open_source(str(path)).blocks(1 << 24):
        _agree(scanner, bytes(block))


def test_server_log_classifies_as_polars_does(scanner, tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    with open(path, "w") as f:
        write_server(f, 400_000, 3, runs=3, disturbed=0.1)
    _agree(scanner, path.read_bytes())


HEADER = "(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] "
SPEC = (
    "SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, "
    "Drafted throughput: 169.20 tokens/s, Accepted: 0 tokens, Drafted: 1692 tokens, "
    "Per-position acceptance rate: 0.000, 0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.0%"
)
STATS = (
    "Engine 000: Avg prompt throughput: 812.8 tokens/s, Avg generation throughput: 27.7 "
    "tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.4%, Prefix cache hit "
    "rate: 0.0%"
)
# Pieces that bend a line where the hand-written parsers decide: prefixes, header fields,
# white space and digits that are not ASCII, markdown, colour, cut literals.
PIECES = [
    HEADER,
    SPEC,
    STATS,
    "(APIServer pid=7) ",
    "(EngineCore_DP0 pid=12) WARNING 12-31 23:59:59 [core.py:9] ",
    "(A pid=1234567890) ",
    'INFO:     10.0.0.1:5 - "GET /metrics HTTP/1.1" 200 OK',
    "2026-01-02T03:04:05.123456789Z ",
    "2026-01-02T03:04:05+05:30 stdout F ",
    "2026-01-02T03:04:05Z stderr P",
    "\uff12\uff10\uff12\uff16-01-02T03:04:05Z ",  # a year in full-width digits
    "vllm-1  | ",
    "api.svc-2 |",
    "\x1b[32m",
    "\x1b]0;t\x07",
    "\u3000",
    "\u00a0",
    "\t",
    " ",
    "١٢",
    "WARNING  12-01",
    "INFO\u300012-01",
    "Spec",
    "SpecDecoding",
    "Engine",
    "model",
    "pid=",
    "(",
    "]",
    "*",
    "`",
    "\uff1a",
    "\r",
    "{",
    "0",
    "9",
    "é",
    "x" * 90,
    "Mean acceptance length: 2.50, ",
    "Per-position acceptance rate: " + ", ".join(["0.500"] * 70),
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=6), min_size=1, max_size=12))
def test_bent_lines_classify_as_polars_does(scanner, lines: list[list[str]]) -> None:
    _agree(scanner, "\n".join("".join(parts) for parts in lines).encode())


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_are_classified_without_a_failure(scanner, data: bytes) -> None:
    found = scanner.scan(data)
    if found is None:  # not UTF-8: the caller decodes and scans that
        found = scanner.scan(data.decode("utf-8", errors="replace").encode())
    assert found is not None
    assert len(np.frombuffer(found["offsets"], np.int64)) == len(found["kind"]) + 1


def _python_blocks(path: Path, size: int) -> tuple[bytes, list[tuple[int, int]], list[str]]:
    src = open_source(str(path))
    long = LongLines(1000)
    data = b"".join(bytes(b) for b in src.blocks(size, long))
    return data, long.unplaced, src.notes


def _core_blocks(path: Path, size: int) -> tuple[bytes, list[tuple[int, int]], list[str]]:
    src = open_source(str(path))
    long = LongLines(1000)
    blocks = core.blocks(src, size, long)
    assert blocks is not None
    data = b"".join(blocks)
    return data, long.unplaced, src.notes


@pytest.mark.parametrize("size", [64, 1000, 1 << 20])
@pytest.mark.parametrize("form", ["plain", "gz", "members", "padded", "cut"])
def test_the_core_reads_blocks_as_source_does(tmp_path: Path, size: int, form: str) -> None:
    rng = random.Random(size)
    lines = [
        "y" * rng.choice([0, 5, 999, 1000, 1001, 3000]) + f" {i}" * rng.randrange(3)
        for i in range(300)
    ]
    text = ("\n".join(lines) + ("\n" if size != 64 else "" + "z" * 1500)).encode()
    path = tmp_path / "log"
    if form == "plain":
        path.write_bytes(text)
    elif form == "gz":
        path.write_bytes(gzip.compress(text))
    elif form == "members":
        half = len(text) // 2
        path.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]))
    elif form == "padded":
        path.write_bytes(gzip.compress(text) + b"\x00" * 700)
    else:
        whole = gzip.compress(text)
        path.write_bytes(whole[: len(whole) * 2 // 3])
    mine, want = _core_blocks(path, size), _python_blocks(path, size)
    if form == "cut":  # how much of a cut stream inflates depends on the inflater
        n = min(len(mine[0]), len(want[0]))
        assert mine[0][: n - 2000] == want[0][: n - 2000]
        assert mine[2] == want[2] == ["the gzip stream is cut off: what came before was read"]
        return
    assert mine == want


@pytest.mark.parametrize("form", ["gz", "members", "padded", "cut", "plain"])
def test_the_core_hashes_a_gz_as_it_inflates_it(tmp_path: Path, form: str) -> None:
    """A .gz's content is hashed by the reader that inflates it to read it (issue 17: one
    inflate, not two): the digest and size ``Source.identify`` gives, lines over the
    limit included (the digest is of the text, not of what the line cap lets through);
    of a cut stream, the digest of the start it could read."""
    rng = random.Random(7)
    text = b"".join(
        (b"y" * rng.choice([0, 50, 3000]) + b" %d\n" % i) for i in range(6000)
    )  # several MB: many chunks, lines over the limit of 1000
    path = tmp_path / "log"
    compressed = gzip.compress(text, 1)
    half = len(text) // 2
    path.write_bytes(
        {
            "gz": compressed,
            "members": gzip.compress(text[:half]) + gzip.compress(text[half:]),
            "padded": compressed + b"\x00" * 700,
            "cut": compressed[: len(compressed) * 2 // 3],
            "plain": text,
        }[form]
    )
    src = open_source(str(path))
    assert src.head_sha256 == hashlib.sha256(text[:65536]).hexdigest()
    if form != "plain":
        assert src.content_sha256 == "" and src.content_size == 0  # not inflated at open
    blocks = core.blocks(src, 1 << 20, LongLines(1000))
    assert blocks is not None
    read = sum(len(b) for b in blocks)
    assert 0 < read <= len(text)
    if form == "cut":
        assert 0 < src.content_size < len(text)
        assert src.content_sha256 == hashlib.sha256(text[: src.content_size]).hexdigest()
        return
    assert (src.content_sha256, src.content_size) == (hashlib.sha256(text).hexdigest(), len(text))
    again = open_source(str(path))
    again.identify()  # Python's inflate: the same
    assert (again.content_sha256, again.content_size) == (src.content_sha256, src.content_size)


def test_an_ingest_of_a_plain_log_uses_the_core(tmp_path: Path) -> None:
    """The result says which classifier read the blocks, so that a silent fallback to
    polars (an extension that failed to build or load) fails here."""
    path = tmp_path / "server.log"
    with open(path, "w") as f:
        write_server(f, 100_000, 1, runs=2, disturbed=0.02)
    grammar = Grammar(load_definitions())
    stage = Stage()
    result = parse_source(open_source(str(path)), grammar, stage)
    assert result.scanner == "core"
    assert stage.bulk_rows > 100
    polars_stage = Stage()
    fallback = parse_source(open_source(str(path)), grammar, polars_stage, compiled=False)
    assert fallback.scanner == "polars"
    # The core also reads the records glued two on a line that polars leaves to the line
    # parser (the same tables either way: tests/test_bulk.py, tests/test_disturbed.py).
    assert stage.bulk_rows > polars_stage.bulk_rows > 100
