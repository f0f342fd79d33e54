"""Hostile logs (issue 20): memory and time bounded by the input's size, one bad value
costs its record and never the batch, and a format is read only in its shape.

Each probe runs ``specscope ingest`` in a process of its own into a store that already
holds a log, and measures it: peak RSS at most 300 MB, seconds rather than minutes, one
clear line with the documented exit status, nothing already stored lost, the valid files
of the batch stored. Inputs are made on the fly in ``tmp_path`` and removed after use.
"""

from __future__ import annotations

import gzip
import os
import resource
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

import specscope
from specscope.errors import ExitStatus
from specscope.logs.limits import MAX_K, max_line_bytes
from specscope.logs.parser import parse_text

from .helpers import ROOT, SEEDS
from .loglines import spec, stats

INT4 = SEEDS / "003_83783f5568908b19.txt"  # 21 spec-decode records
# another valid log, for batches: its spec-decode records as the line parser reads them
# (16 today, 5 of them what its author states)
GOOD_LOG = SEEDS / "002_2dcac71f91935498.txt"
GOOD_RECORDS = len(parse_text(GOOD_LOG.read_text(encoding="utf-8")).tables["spec_decode"])
# What an ingest may hold, whatever its input: the memory it allocates (anonymous RSS), and
# its whole peak RSS. The libraries' pages are in the second and not the first: how many of
# them the kernel maps depends on the page cache, not on specscope (the same ingest of the
# same files measured 232 MB of RSS in one virtualenv and 283 MB in another with
# byte-identical libraries, freshly installed; 120 MB allocated in both). A bound of 300 on
# the whole failed CI once at 301 MB that way. The allocated memory is bounded at 200 MB
# (every probe here measured 69-121 MB; a decompression bomb passed 3 GB before the
# limits), and the whole at 400, for a spike a 2 ms sample could miss and the kernel's
# peak cannot.
RSS_MB = 200
RSS_WHOLE_MB = 400
SECONDS = 60  # generous for a loaded 2-core machine; the probes take a few seconds
GOOD = spec(1, 100, [50, 25])

# The measuring process: runs the command (stdin, stdout and stderr passed through) and
# writes the peak RSS of its one child, the ingest, and the peak of the memory it allocated
# (anonymous and shared, sampled every 2 ms), both in KiB.
_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "child = subprocess.Popen(sys.argv[2:])\n"
    "held = 0\n"
    "while child.poll() is None:\n"
    "    try:\n"
    "        with open(f'/proc/{child.pid}/status') as f:\n"
    "            kinds = ('RssAnon:', 'RssShmem:')\n"
    "            held = max(held, sum(int(x.split()[1]) for x in f if x.startswith(kinds)))\n"
    "    except (OSError, ValueError, IndexError):\n"
    "        pass\n"
    "    time.sleep(0.002)\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "open(sys.argv[1], 'w').write(f'{peak} {held}')\n"
    "sys.exit(child.returncode)\n"
)


@dataclass
class Measured:
    status: int
    out: str
    err: str
    seconds: float
    cpu_seconds: float  # the ingest's user + system CPU: load on a shared machine moves it little
    rss_mb: float
    held_mb: float

    def bounded(self) -> Measured:
        print(
            f"ingest: exit {self.status}, {self.seconds:.1f} s ({self.cpu_seconds:.1f} CPU s), "
            f"peak RSS {self.rss_mb:.0f} MB, "
            f"allocated {self.held_mb:.0f} MB"
        )
        assert self.seconds < SECONDS, f"took {self.seconds:.1f} s"
        assert self.held_mb <= RSS_MB, f"allocated {self.held_mb:.0f} MB"
        assert self.rss_mb <= RSS_WHOLE_MB, f"peak RSS {self.rss_mb:.0f} MB"
        assert self.held_mb > 0  # (sampled: a probe that saw nothing measures nothing)
        assert "Traceback" not in self.out + self.err
        return self

    def one_error_line(self, *words: str) -> str:
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        assert "internal error" not in lines[0]
        for word in words:
            assert word in lines[0], lines[0]
        return lines[0]


def ingest(
    tmp_path: Path,
    store: Path,
    *inputs: object,
    paste: bytes | None = None,
    env: dict[str, str] | None = None,
) -> Measured:
    peak = tmp_path / "peak-rss"
    command = [
        sys.executable,
        "-c",
        _MEASURE,
        str(peak),
        sys.executable,
        "-m",
        "specscope",
        "ingest",
        *(str(i) for i in inputs),
        "--store",
        str(store),
    ]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SPECSCOPE_")}
    start = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        command,
        input=paste,
        capture_output=True,
        cwd=tmp_path,
        timeout=600,
        env={**environment, **(env or {})},
    )
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    whole_kib, held_kib = (int(v) for v in peak.read_text().split())  # KiB on Linux
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss > 0
    return Measured(
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
        seconds,
        cpu_seconds,
        whole_kib / 1024,
        held_kib / 1024,
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store that already holds a log: every probe must leave it there."""
    path = tmp_path / "store"
    specscope.ingest(INT4, store=path).raise_for_errors()
    return path


def _rows(store: Path) -> pl.DataFrame:
    return specscope.open_store(store).spec_decode.collect()


def _holds(store: Path, log: Path, records: int) -> None:
    rows = _rows(store)
    assert rows.filter(pl.col("source").str.ends_with(log.name)).height == records
    sources = specscope.open_store(store).sources.collect()
    assert any(str(p).endswith(log.name) for p in sources["path"])


def _kept(store: Path) -> None:
    _holds(store, INT4, 21)


# -- memory and time -------------------------------------------------------------------------


def _gzip_bomb(path: Path, size: int) -> None:
    """A valid gzip stream of ``size`` bytes of 'x' and no newline: one line, about
    size/1000 compressed (a flushed segment repeated: no segment refers to another)."""
    block = b"x" * (1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
        for _ in range(size >> 20):
            f.write(segment)
            crc = zlib.crc32(block, crc)
        f.write(deflate.flush())
        f.write(struct.pack("<II", crc, size & 0xFFFFFFFF))


def test_a_gzip_bomb_is_refused_and_the_valid_file_beside_it_stored(tmp_path, store):
    bomb = tmp_path / "bomb.log.gz"
    _gzip_bomb(bomb, 4 << 30)  # 4 GiB in one line, from about 4 MB
    assert bomb.stat().st_size < 5 << 20
    r = ingest(tmp_path, store, GOOD_LOG, bomb).bounded()
    bomb.unlink()
    assert r.status == ExitStatus.INPUT_BINARY
    r.one_error_line("bomb.log.gz", "gzip bomb", "SPECSCOPE_GZIP_MAX_RATIO")
    _kept(store)
    _holds(store, GOOD_LOG, GOOD_RECORDS)


def test_the_gzip_limits_are_settable(tmp_path, store):
    log = tmp_path / "big.log.gz"
    text = "\n".join(spec(i, 100, [50, 25]) for i in range(1, 20_000)) + "\n"
    log.write_bytes(gzip.compress(text.encode()))
    r = ingest(tmp_path, store, log, env={"SPECSCOPE_GZIP_MAX_BYTES": "1M"}).bounded()
    assert r.status == ExitStatus.INPUT_BINARY
    r.one_error_line("big.log.gz", "1 MiB")
    assert ingest(tmp_path, store, log).bounded().status == ExitStatus.SUCCESS
    _holds(store, log, 19_999)
    r = ingest(tmp_path, store, log, env={"SPECSCOPE_GZIP_MAX_RATIO": "none"})
    assert r.status == ExitStatus.USAGE
    r.one_error_line("SPECSCOPE_GZIP_MAX_RATIO")


def test_a_gigabyte_without_a_newline_is_skipped_in_bounded_memory(tmp_path, store):
    path = tmp_path / "one-line.log"
    block = b"y" * (1 << 20)
    with open(path, "wb") as f:
        for _ in range(1024):
            f.write(block)
    r = ingest(tmp_path, store, path, GOOD_LOG).bounded()
    path.unlink()
    assert r.status == ExitStatus.NO_TELEMETRY
    r.one_error_line("one-line.log", "line 1 (1,073,741,824 bytes)", "1 MiB line limit")
    _kept(store)
    _holds(store, GOOD_LOG, GOOD_RECORDS)


def _list_line(n: int, i: int = 2) -> str:
    """A V1 record whose per-position list has ``n`` entries."""
    rates = ", ".join(["0.500"] * (n - 1) + ["0.250"])
    return spec(i, 100, [50, 25]).replace("rate: 0.500, 0.250", f"rate: {rates}")


def test_a_per_position_list_of_a_million_values_is_a_skipped_line(tmp_path, store):
    log = tmp_path / "million.log"
    log.write_text("\n".join([stats(0), GOOD, _list_line(10**6), spec(3, 100, [50, 25])]) + "\n")
    r = ingest(tmp_path, store, log).bounded()
    assert r.status == ExitStatus.SUCCESS
    assert "over the 1 MiB line limit" in r.out and "(line 3)" in r.out
    assert "line 3 is 7,000," in r.out  # its size
    rows = _rows(store).filter(pl.col("source").str.ends_with("million.log"))
    assert rows["line"].to_list() == [2, 4] and set(rows["k"].to_list()) == {2}
    _kept(store)


def test_a_per_position_list_longer_than_k_allows_is_skipped_with_its_reason(tmp_path, store):
    log = tmp_path / "long-list.log"
    log.write_text("\n".join([GOOD, _list_line(100_000), _list_line(MAX_K, 3)]) + "\n")
    r = ingest(tmp_path, store, log).bounded()
    assert r.status == ExitStatus.SUCCESS
    assert "a list of 100000 entries, over the limit of 64 (SPECSCOPE_MAX_K) (line 2)" in r.out
    rows = _rows(store).filter(pl.col("source").str.ends_with("long-list.log"))
    assert rows["line"].to_list() == [1, 3] and rows["k"].to_list() == [2, MAX_K]
    r = ingest(tmp_path, tmp_path / "other", log, env={"SPECSCOPE_MAX_K": "8"}).bounded()
    assert "a list of 64 entries, over the limit of 8 (SPECSCOPE_MAX_K) (line 3)" in r.out


def _open_list(chars: int) -> str:
    """A record cut inside a long per-position list, its closing field never printed."""
    head = GOOD.split("Per-position")[0] + "Per-position acceptance rate: "
    return head + "0.500, " * (chars // 7) + "0.5"


def test_a_long_list_without_its_closing_field_reads_in_linear_time(tmp_path, store):
    log = tmp_path / "open.log"
    log.write_text(GOOD + "\n" + _open_list(2_200_000) + "\n")
    r = ingest(tmp_path, store, log, env={"SPECSCOPE_MAX_LINE_BYTES": "4M"}).bounded()
    assert r.status == ExitStatus.SUCCESS
    assert r.cpu_seconds < 20  # it took 32 s at 1.1 MB when it was quadratic
    r = ingest(tmp_path, tmp_path / "other", log).bounded()  # over the default line limit
    assert "over the 1 MiB line limit" in r.out and "(line 2)" in r.out


def test_fifty_megabytes_of_blank_lines_take_seconds(tmp_path, store):
    log = tmp_path / "blank.log"
    with open(log, "w") as f:
        f.write(GOOD + "\n")
        for _ in range(50):
            f.write("\n" * (1 << 20))
        f.write(spec(2, 100, [50, 25]) + "\n" + "  \n" * 100_000 + spec(3, 100, [50, 25]) + "\n")
    r = ingest(tmp_path, store, log).bounded()
    log.unlink()
    assert r.status == ExitStatus.SUCCESS
    assert r.cpu_seconds < 30  # 69 s before
    rows = _rows(store).filter(pl.col("source").str.ends_with("blank.log"))
    assert rows["line"].to_list() == [1, 50 * (1 << 20) + 2, 50 * (1 << 20) + 100_003]
    _kept(store)


# Shapes that were quadratic in the length of a line, found by timing every sample line
# repeated to a megabyte, by runs of one character beside each literal, and by the fuzzer
# (fuzz/corpus/timeout-engines-digits): each must read in seconds at the line limit.
_REPEATED = [
    ("", "Avg Draft acceptance rate: 9.3% ", ""),
    ("", "Per-position acceptance rate: 0.427, 0.232", ""),
    ("", "0.139, 0.120, 0.103, Avg Draft acceptance rate: 40.1% ", ""),
    ("", "SpecDecoding metrics: ", ""),
    ("", "Decode batch. ", ""),
    ("", "Avg prompt throughput: ", ""),
    (_open_list(0), "0.500, ", "0.5"),  # a list whose last value is cut
    ("Serving Benchmark Result ", "=", "!"),
    ("============ Serving Benchmark Result ============\nSuccessful requests: 5\n", "=", "!"),
    ("num_drafts: 5\n", " ", "!"),
    ("Engine 000: Avg prompt throughput: 1 ", "9", " Engine 000: x"),
    ("", "Initializing an LLM engine (", ""),
    ("", "Using a b ", "backend."),
    ("", "{", ""),
    ("", "'", ""),
    ("", "a:", ""),
    ("", "Position 1: 5\n", ""),
    # An author's words and tables (session 15: minutes to hours a line of 1 MiB, each
    # place weighed against hundreds of characters around it; their definitions' max_line)
    ("", "TPOT is 14.2 ms vs ", ""),
    ("", " slower than with no speculation (61 tok/s baseline", ""),
    ("", "drops from 1200 tok/s to ", ""),
    ("", "25 tps with spec vs 42.6 without ", ""),
    ("", "EAGLE-3 is slower than EAGLE-2 on this GPU. ", ""),
    ("", "but we only get 25% acceptance ", ""),
    ("", "采纳率~40% ", ""),
    ("", "accept    = 34.320% ", ""),
    ("", "## Acceptance Rate ", ""),
    ("", "| 1 | 5.96 | ", ""),
    ("", "| K | C=1 | TPOT | ", ""),
    # Engine summaries (issue 16): oMLX's MTP line looked for its rate after each 'cycles='
    # to the line's end (17 s for 200 KB of its first words repeated)
    ("", "MTP[1] finish=stop tokens=1 cycles=1 ", ""),
    ("", "MTP[1] finish=stop tokens=9 cycles=5 tok/cycle=1.80 accept=4/5 (80.0%) ", ""),
    ("", "vlm_mtp stats: request=a rounds=1 ", ""),
    ("", "[AL] AVERAGE: 1.5 ", ""),
    ("", "draft_n=1 predicted_n=2 ", ""),
]


@pytest.mark.parametrize("head, unit, tail", _REPEATED, ids=[repr(u[:24]) for _, u, _ in _REPEATED])
def test_a_line_of_a_repeated_shape_parses_in_linear_time(head, unit, tail):
    text = head + unit * ((max_line_bytes() - 1024 - len(head)) // len(unit)) + tail
    start = time.process_time()  # CPU: a loaded CI machine's wall clock ran 15.7 s for 2.3
    parse_text(text)
    assert time.process_time() - start < 15


def test_a_line_over_the_limit_is_skipped_by_parse_text_too():
    result = parse_text(GOOD + "\n" + "z" * (max_line_bytes() + 1) + "\n" + GOOD)
    assert len(result.tables["spec_decode"]) == 2
    assert [(s.line, s.text) for s in result.skipped] == [(2, "1,048,577 bytes")]
    assert result.long_lines == [(2, max_line_bytes() + 1)]


# -- one bad value costs its record ----------------------------------------------------------

_HOSTILE = {
    # mutation of line 200 of a 400-line paste -> ("problem" | "skip", what is said)
    "per-position 10^20": (
        lambda s: s.replace("rate: 0.500, 0.250", "rate: 99999999999999999999, 0.250"),
        "problem",
        "per_position_rate[0]: 1e+20 is out of range",
    ),
    "pid of 5000 digits": (
        lambda s: s.replace("pid=1)", "pid=" + "7" * 5000 + ")"),
        "problem",
        "a pid of 5000 digits",
    ),
    "count of 10^20": (
        lambda s: s.replace("Accepted: 75 tokens", "Accepted: 99999999999999999999 tokens"),
        "skip",
        "expected a count",
    ),
    "negative count": (
        lambda s: s.replace("Drafted: 200 tokens", "Drafted: -200 tokens"),
        "skip",
        "expected a count",
    ),
    "accepted above drafted": (
        lambda s: s.replace("Accepted: 75 tokens", "Accepted: 750 tokens"),
        "skip",
        "accepted tokens (750) above draft tokens (200)",
    ),
    "NUL inside a number": (
        lambda s: s.replace("Accepted: 75 tokens", "Accepted: 7\x005 tokens"),
        "skip",
        "a damaged number",
    ),
    "02-30": (lambda s: s.replace("04-07", "02-30"), "problem", "02-30 17:33:20 is not a date"),
    "13-45": (lambda s: s.replace("04-07", "13-45"), "problem", "'13-45 17:33:20' in the log"),
    "model len of 5000 digits": (
        lambda s: s.split("[metrics.py")[0] + "[config.py:1] Using max model len " + "9" * 5000,
        "skip",
        "a configuration line that does not read (ValueError",
    ),
}


@pytest.mark.parametrize("case", _HOSTILE)
def test_one_bad_value_among_400_lines_costs_its_record_only(tmp_path, store, case):
    bend, outcome, said = _HOSTILE[case]
    lines = [spec(i, 100, [50, 25]) for i in range(1, 401)]
    lines[199] = bend(lines[199])
    assert lines[199] != spec(200, 100, [50, 25])
    r = ingest(tmp_path, store, "-", paste="\n".join(lines).encode()).bounded()
    assert r.status == ExitStatus.SUCCESS, r.err
    rows = _rows(store).filter(pl.col("source") == "<stdin>")
    others = rows.filter(pl.col("line") != 200)
    assert rows.height >= 399
    assert others.height == 399 and others["problems"].null_count() == 399
    if outcome == "skip":
        assert 200 not in rows["line"].to_list()
        assert said in r.out and "(line 200)" in r.out
    else:
        (problem,) = rows.filter(pl.col("line") == 200)["problems"].to_list()
        assert said in problem
        assert "1 record kept with a problem" in r.out and "line 200" in r.out
    _kept(store)


def test_a_k_over_the_limit_is_skipped_and_no_looser_format_keeps_it():
    """Found by the fuzzer (fuzz/corpus/crash-v0-k-330): a V0 record of k = 330 was kept."""
    v0 = (
        "INFO 10-16 19:05:52 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.643, "
        "System efficiency: 0.599, Number of speculative tokens: 330, Number of accepted "
        "tokens: 8847, Number of draft tokens: 13761, Number of emitted tokens: 10986."
    )
    result = parse_text(v0 + "\n" + v0.replace(": 330,", ": 3,").replace("19:05:52", "19:05:57"))
    assert [row["line"] for row in result.tables["spec_decode"]] == [2]
    ((line, reason),) = [(s.line, s.reason) for s in result.skipped]
    assert line == 1 and "k = 330, over the limit of 64 (SPECSCOPE_MAX_K)" in reason


def test_the_fuzz_corpus_reads_without_an_error():
    """Every input of fuzz/corpus/ (seeds and what the fuzzer found) as the fuzz target
    reads it, without atheris: rows the store can hold, or skipped lines."""
    from specscope.logs.definitions import load_definitions
    from specscope.logs.fields import read_block, read_fields
    from specscope.logs.staging import Stage

    definitions = load_definitions()
    corpus = sorted((ROOT / "fuzz" / "corpus").iterdir())
    assert len(corpus) > 300
    for path in corpus:
        text = path.read_bytes().decode("utf-8", errors="replace").replace("\x7f", "9" * 5000)
        result = parse_text(text)
        for row in result.tables.get("spec_decode", []):
            assert row.get("k") is None or row["k"] <= MAX_K, path.name
        Stage().flush(result.tables)
        for defn in definitions:
            if defn.kind == "fields":
                read_fields(defn, text)
            elif defn.kind == "block":
                read_block(defn, text)


def test_a_file_that_meets_a_bug_fails_alone(cli, tmp_path, monkeypatch):
    """Whatever escapes the reading of one file (here: a bug injected for it), the other
    files of the batch are stored and the command says which file failed, on one line."""
    from specscope.logs import ingest as ingesting

    real = ingesting.parse_source

    def parse(source, *args, **kwargs):
        if source.path.endswith("bad.log"):
            raise OverflowError("injected")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ingesting, "parse_source", parse)
    bad = tmp_path / "bad.log"
    bad.write_text(GOOD + "\n")
    store = tmp_path / "s"
    r = cli("ingest", INT4, bad, GOOD_LOG, "--store", store)
    assert r.status == ExitStatus.ERROR
    (line,) = r.err.strip().splitlines()
    assert "bad.log" in line and "OverflowError: injected" in line
    assert "found 21 spec-decode records" in r.out
    _holds(store, INT4, 21)
    _holds(store, GOOD_LOG, GOOD_RECORDS)
    assert not _rows(store).filter(pl.col("source").str.ends_with("bad.log")).height


# -- a format must match its shape -----------------------------------------------------------

_PROSE = """We tried it on two machines.
Backend: CUDA
Model: the small one
and the log said:
"""


def test_a_label_in_prose_is_no_benchmark(tmp_path, store):
    r = ingest(tmp_path, store, "-", paste=_PROSE.encode()).bounded()
    assert r.status == ExitStatus.NO_TELEMETRY
    r.one_error_line("<stdin>", "no speculative-decoding telemetry")
    paste = _PROSE + GOOD + "\nBackend: vllm\nSuccessful requests: 3\n"
    r = ingest(tmp_path, store, "-", paste=paste.encode()).bounded()
    assert r.status == ExitStatus.SUCCESS
    assert specscope.open_store(store).bench.collect().is_empty()
    runs = specscope.open_store(store).runs.collect().filter(pl.col("source") == "<stdin>")
    assert runs.height == 1
    _kept(store)


@pytest.mark.parametrize(
    "text, bench",
    [
        ("Backend: CUDA", 0),
        ("Successful requests: 5\nFailed requests: 0", 0),
        ("Successful requests: 5\nFailed requests: 0\nBenchmark duration (s): 10.0", 1),
        (
            "============ Serving Benchmark Result ============\nSuccessful requests: 5\n"
            + "=" * 50,
            1,
        ),
        ("---------------Speculative Decoding---------------\nAcceptance rate (%): 40.0", 1),
    ],
    ids=["one-label", "two-labels", "three-labels", "title-and-one", "rule-and-one"],
)
def test_a_benchmark_block_needs_its_title_or_several_labels(text, bench):
    result = parse_text("Some prose first.\n" + text + "\nMore prose.")
    assert len(result.tables.get("bench", [])) == bench
    assert len(result.runs) == bench


# -- the limits are stated --------------------------------------------------------------------


def test_every_limit_is_documented_with_its_variable():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    part = readme.split("## Limits and safety", 1)[1].split("### Logs", 1)[1].split("\n## ", 1)[0]
    for variable in (
        "SPECSCOPE_MAX_LINE_BYTES",
        "SPECSCOPE_GZIP_MAX_RATIO",
        "SPECSCOPE_GZIP_MAX_BYTES",
        "SPECSCOPE_MAX_K",
    ):
        assert variable in part, variable


# -- the bulk reader skips the same --------------------------------------------------------


@pytest.mark.parametrize("block_bytes", [1 << 24, 65536, 5000])
def test_blank_runs_and_long_lines_read_the_same_in_bulk(tmp_path, block_bytes):
    """Runs of blank lines cut out of the bulk reader's blocks, and lines over the limit,
    give the tables the line parser gives (``tests/test_bulk.py``'s comparison)."""
    from .test_bulk import _same

    record = spec(3, 100, [50, 25])
    half = len(record) // 2
    parts = [
        stats(0),
        GOOD,
        "\n" * 5000,  # a run cut out
        record[:half],  # a record wrapped, its rest after a run of blank lines
        "\n" * 4096 + " \t\r\n" * 10,
        record[half:],
        "x" * (max_line_bytes() + 10),  # over the limit, inside a stretch of records
        spec(4, 100, [50, 25]),
        "\n" * 4095,
        stats(5),
        "   \n" * 9000,
        spec(5, 100, [50, 25]),
        "y" * (3 * max_line_bytes()),
    ]
    log = tmp_path / "runs.log"
    log.write_text("\n".join(parts))
    _same(log, block_bytes)
    lines = log.read_text().split("\n")
    long = [n for n, line in enumerate(lines, 1) if len(line) > max_line_bytes()]
    result = parse_text("\n".join(lines))
    assert [s.line for s in result.skipped if "line limit" in s.reason] == long
    # The wrapped record's head and its rest, which opens with the counts' labels, are one
    # record however many blank lines part them: 4 rows, each whole and counted.
    rows = result.tables["spec_decode"]
    assert len(long) == 2 and len(rows) == 4
    assert all(r.get("draft_tokens") is not None and not r.get("partial") for r in rows)
    assert [(r["line"], r["end_line"]) for r in rows][1] == (
        lines.index(record[:half]) + 1,
        lines.index(record[half:]) + 1,
    )


def test_records_the_line_parser_refuses_or_flags_read_the_same_in_bulk(tmp_path):
    """Plain records with more accepted than drafted tokens, a list over the limit or a
    rate above 1 are left to the line parser by the bulk reader, which says the same."""
    from .test_bulk import _same

    lines = [line for i in range(1, 300) for line in (stats(i), spec(i, 100, [50, 25]))]
    lines[101] = lines[101].replace("Accepted: 75 tokens", "Accepted: 750 tokens")
    lines[201] = lines[201].replace("rate: 0.500, 0.250", "rate: " + ", ".join(["0.100"] * 65))
    lines[203] = lines[203].replace("rate: 0.500, 0.250", "rate: " + ", ".join(["0.100"] * 64))
    lines[205] = lines[205].replace("rate: 0.500, 0.250", "rate: 1.500, 0.250")
    log = tmp_path / "flagged.log"
    log.write_text("\n".join(lines) + "\n")
    read = _same(log, 4096)
    assert [line for line, _ in read["skipped"]] == [102, 202]
    # Each 4 KB block's first SpecDecoding record of the process, and those after a k of
    # 64, also go to the line parser: their k may start a run (plain.reshaping, a9012d7).
    assert read["bulk_rows"] > 0.75 * len(lines)
    spec_rows = read["tables"]["spec_decode"]
    (problem,) = spec_rows.filter(pl.col("line") == 206)["problems"].to_list()
    assert "per_position_rate[0]: 1.5 is out of range" in problem
