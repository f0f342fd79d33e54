"""The bulk reader against the line parser: the same tables, runs and skipped lines on
every fixture, on generated logs and on blocks cut anywhere (issue 7: one code path for
correctness, the fast one checked against it)."""

from __future__ import annotations

import random
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from specscope.logs.assemble import finish
from specscope.logs.bulk import parse_source
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.source import open_source
from specscope.logs.staging import Stage
from tests.helpers import FIXTURES, ROOT

sys.path.insert(0, str(FIXTURES))
sys.path.insert(0, str(ROOT / "bench"))

import synth
from generate import write_server

GRAMMAR = Grammar(load_definitions())
FILES = sorted(
    p for d in ("seeds", "world") for p in (FIXTURES / d).iterdir() if p.suffix != ".toml"
)


def _finished(
    path: Path, bulk: bool = True, block_bytes: int = 1 << 24, spill: Path | None = None
) -> Any:
    """The parse of ``path`` in an in-memory stage (in files under ``spill``, from the
    first row), finished (and the stage and result)."""
    src = open_source(str(path))
    stage = Stage() if spill is None else Stage(directory=spill, memory=0)
    result = parse_source(src, GRAMMAR, stage, bulk=bulk, block_bytes=block_bytes)
    done = finish(
        result,
        stage,
        display="log",
        source_id="s0",
        mtime=datetime(2026, 11, 21),
        year=None,
        user={},
    )
    return done, stage, result


def _read(
    path: Path, bulk: bool, block_bytes: int = 1 << 24, spill: Path | None = None
) -> dict[str, Any]:
    done, stage, result = _finished(path, bulk, block_bytes, spill)
    return {
        "tables": done.collect(),
        "runs": done.runs,
        "year": (done.first_year, done.year_basis),
        "skipped": [(s.line, s.reason) for s in result.skipped],
        "lines": (result.lines, result.telemetry_lines),
        "bulk_rows": stage.bulk_rows,
    }


def _same(path: Path, block_bytes: int = 1 << 24, spill: Path | None = None) -> dict[str, Any]:
    fast, slow = _read(path, True, block_bytes, spill), _read(path, False)
    assert slow["bulk_rows"] == 0
    for table, frame in slow["tables"].items():
        got = fast["tables"][table]
        assert got.columns == frame.columns, table
        if not got.equals(frame):
            diff = got.with_row_index().join(frame.with_row_index(), on="index", how="full")
            bad = [c for c in frame.columns if not got[c].equals(frame[c])]
            raise AssertionError(
                f"{path.name}: {table} differs in {bad}; bulk {len(got)} rows, line parser "
                f"{len(frame)}\n{diff.head(0)}\n"
                + "\n".join(
                    f"  line {a}: {x!r} vs {y!r}"
                    for c in bad[:2]
                    for a, x, y in list(
                        zip(got["line"], got[c].to_list(), frame[c].to_list(), strict=False)
                    )
                    if x != y
                )[:2000]
            )
    for key in ("runs", "year", "skipped", "lines"):
        assert fast[key] == slow[key], f"{path.name}: {key}"
    return fast


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixtures_read_the_same_in_bulk(path: Path) -> None:
    _same(path)


@pytest.mark.parametrize("path", FILES[::4], ids=lambda p: p.name)
def test_fixtures_read_the_same_in_small_blocks(path: Path) -> None:
    """Blocks of 1 KiB cut records wrapped over lines, runs and stretches anywhere."""
    _same(path, block_bytes=1024)


@pytest.mark.parametrize("seed", range(60))
def test_synthetic_logs_read_the_same_in_bulk(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    log = synth.generate_seed(seed, synth.random_wrappings(rng) if seed % 2 else ())
    path = log.write(tmp_path / ("log.gz" if "gzip" in log.wrappings else "log.txt"))
    _same(path, block_bytes=rng.choice([700, 4096, 1 << 24]))


@pytest.mark.parametrize("fmt", [f for f in synth.FORMATS if f != "vllm_v1"])
def test_other_formats_read_the_same_in_bulk(fmt: str, tmp_path: Path) -> None:
    for seed in range(5):
        log = synth.generate_format_seed(fmt, seed)
        _same(log.write(tmp_path / f"{fmt}{seed}.txt"), block_bytes=2048)


@pytest.mark.parametrize("seed", range(4))
def test_server_logs_read_in_bulk(seed: int, tmp_path: Path) -> None:
    """The benchmark's server log (runs, disturbed records): the same tables, and most
    records read in bulk, so the fast path is not silently off."""
    path = tmp_path / "server.log"
    with open(path, "w") as out:
        write_server(out, 200_000, seed, runs=3, disturbed=0.05)
    fast = _same(path, block_bytes=16_384)
    records = len(fast["tables"]["spec_decode"]) + len(fast["tables"]["engine_stats"])
    assert fast["bulk_rows"] > 0.8 * records


def test_an_authors_sentence_above_telemetry_keeps_its_place_in_bulk(tmp_path: Path) -> None:
    """A sentence is kept or dropped only once the whole paste is read, after the bulk
    reader flushed the records below it (world 372 failed so): its row goes back to its
    place, in a part held in memory and in one already written to a file."""
    world = next((FIXTURES / "world").glob("372_*.log")).read_text(encoding="utf-8")
    path = tmp_path / "pasted.log"
    path.write_text("\n\n".join([world] * 30), encoding="utf-8")  # a thread of 30 replies
    for spill in (None, tmp_path / "stage"):
        fast = _same(path, block_bytes=2048, spill=spill)
        table = fast["tables"]["spec_decode"]
        stated = table.filter(pl.col("format") == "stated_claims_acceptance")
        assert len(stated) == 30 and table["line"].is_sorted()


def test_a_later_line_completes_a_record_read_in_bulk(tmp_path: Path) -> None:
    """A V0 prefix-cache line after a V1 stats line read in bulk attaches to it."""
    head = "(APIServer pid=7) INFO 01-02 03:04:{:02d} [loggers.py:1] "
    lines = [
        head.format(i)
        + "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
        "2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%"
        for i in range(3)
    ]
    # An access line between: the stats line before it is read in bulk, not held open.
    lines.append('(APIServer pid=7) INFO:     127.0.0.1:5 - "GET /metrics HTTP/1.1" 200 OK')
    lines.append(head.format(4) + "Prefix cache hit rate: GPU: 94.35%, CPU: 0.00%")
    path = tmp_path / "attach.log"
    path.write_text("\n".join(lines) + "\n")
    fast = _same(path)
    assert fast["bulk_rows"] == 2  # the first line of a process is fed: it starts the run
    stats = fast["tables"]["engine_stats"]
    assert stats["cpu_prefix_cache_hit_rate"].to_list() == [None, None, 0.0]
    assert stats["prefix_cache_hit_rate"].to_list() == [None, None, pytest.approx(0.9435)]


def test_lines_that_are_not_utf8_are_read_as_the_line_parser_reads_them(
    tmp_path: Path,
) -> None:
    line = (
        "(APIServer pid=7) INFO 01-02 03:04:05 [metrics.py:1] SpecDecoding metrics: "
        "Draft acceptance rate: 50.0%, Accepted: 4 tokens, Drafted: 8 tokens"
    )
    path = tmp_path / "mixed.log"
    path.write_bytes(
        (line + "\n").encode()
        + b"\xff\xfe junk \xc3\n"
        + (line.replace(":05", ":15") + "\n").encode()
    )
    fast = _same(path)
    assert len(fast["tables"]["spec_decode"]) == 2


def test_frames_hold_store_types() -> None:
    fast = _read(FIXTURES / "seeds" / "003_83783f5568908b19.txt", True)
    spec = fast["tables"]["spec_decode"]
    assert spec.schema["accepted_per_pos"] == pl.List(pl.Int64)
    assert spec.schema["engine"] == pl.Int32


def test_ingest_in_bulk_stores_what_the_line_parser_stores(tmp_path: Path) -> None:
    """End to end through stage files on disk and the store's Parquet, in small blocks."""
    from specscope import ingest, open_store

    path = tmp_path / "server.log"
    with open(path, "w") as out:
        write_server(out, 300_000, 3, runs=2, disturbed=0.05)
    stores = []
    for bulk in (True, False):
        store = tmp_path / f"store-{bulk}"
        ingest(path, store=store, bulk=bulk).raise_for_errors()
        stores.append(open_store(store))
    fast, slow = stores
    for table in ("spec_decode", "engine_stats", "events", "runs"):
        got, want = getattr(fast, table).collect(), getattr(slow, table).collect()
        assert len(want) > 0 or table == "events"
        assert got.drop("ingest_id", strict=False).equals(want.drop("ingest_id", strict=False)), (
            table
        )


@pytest.mark.parametrize(
    "wrap",
    [
        lambda i, line: f"2026-05-24T11:55:{i % 60:02d}.123456789Z {line}",  # docker logs -t
        lambda i, line: f"vllm-1  | {line}",  # docker compose logs
        lambda i, line: f"vllm-1  | 2025-12-31T23:59:59Z stdout F {line}",  # compose, CRI
        lambda i, line: "\x1b[1;36m" + line.replace(") ", ")\x1b[0;0m ", 1),  # colour
    ],
    ids=["docker", "compose", "compose_cri", "ansi"],
)
def test_container_logs_read_in_bulk(wrap: Any, tmp_path: Path) -> None:
    """Every line behind a container's prefix or in colour, as `docker logs` gives a
    server's log: still read in bulk, and still the line parser's tables (with the
    year the prefix gives)."""
    plain = tmp_path / "plain.log"
    with open(plain, "w") as out:
        write_server(out, 150_000, 5, runs=2, disturbed=0.02)
    lines = plain.read_text().split("\n")
    path = tmp_path / "wrapped.log"
    path.write_text("\n".join(wrap(i, line) if line else line for i, line in enumerate(lines)))
    fast = _same(path, block_bytes=20_000)
    records = len(fast["tables"]["spec_decode"]) + len(fast["tables"]["engine_stats"])
    assert fast["bulk_rows"] > 0.8 * records


@pytest.mark.parametrize(
    "definition", [d for d in GRAMMAR.definitions if d.plain], ids=lambda d: d.name
)
def test_plain_shapes_read_their_definitions_samples(definition: Any, tmp_path: Path) -> None:
    """A definition's samples read the same in bulk, and one-line samples in a released
    shape are read in bulk when the process has been seen (its first line is fed)."""
    head = "(APIServer pid=3) INFO 01-02 03:04:0{} [metrics.py:1] "
    for n, sample in enumerate(definition.samples):
        path = tmp_path / f"sample{n}.log"
        path.write_text(sample.text + "\n")
        _same(path)
        if "\n" in sample.text or sample.text.startswith("("):
            continue
        path.write_text(head.format(1) + sample.text + "\n" + head.format(2) + sample.text + "\n")
        _same(path)
    one_line = [s.text for s in definition.samples if "\n" not in s.text and s.text.startswith("(")]
    access = '(APIServer pid=3) INFO:     127.0.0.1:5 - "GET /metrics HTTP/1.1" 200 OK'
    bulk = 0
    for n, text in enumerate(one_line):
        path = tmp_path / f"plain{n}.log"
        pid = text[text.index("pid=") : text.index(")")]
        path.write_text("\n".join([text, text, access.replace("pid=3", pid)]) + "\n")
        bulk += _same(path)["bulk_rows"]
    assert bulk > 0, "no sample of the definition is in one of its plain shapes"


# -- differential fuzz: plain lines, bent the ways logs bend them --------------------------

_HEADS = [
    "(APIServer pid=11) INFO 03-04 05:06:{s:02d} [metrics.py:87] ",
    "(APIServer pid=11) INFO 03-04 05:06:{s:02d} [loggers.py:123] ",
    "(EngineCore_DP0 pid=12) INFO 03-04 05:06:{s:02d} [core.py:1] ",
    "(APIServer pid=13) WARNING 12-31 23:59:{s:02d} [metrics.py:87] ",
    "(APIServer pid=11) ",
]
_MESSAGES = [
    "SpecDecoding metrics: Mean acceptance length: 2.46, Accepted throughput: 1.88 tokens/s, "
    "Drafted throughput: 2.58 tokens/s, Accepted: 19 tokens, Drafted: 26 tokens, "
    "Per-position acceptance rate: 1.000, 0.462, Avg Draft acceptance rate: 73.1%",
    "SpecDecoding metrics: Draft acceptance rate: 28.4%, Mean acceptance length: 2.14, "
    "Accepted: 42 tokens, Drafted: 148 tokens, Per-position acceptance rate: 0.676, 0.243",
    "SpecDecoding metrics: Draft acceptance rate: 50.0%, Accepted: 4 tokens, Drafted: 8 tokens",
    "Engine 000: Avg prompt throughput: 2.8 tokens/s, Avg generation throughput: 2130.8 "
    "tokens/s, Running: 3 reqs, Waiting: 85 reqs, GPU KV cache usage: 24.4%, Prefix cache "
    "hit rate: 87.0%",
    "Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.0 tokens/s, "
    "Running: 1 reqs, Waiting: 0 reqs, Preemptions: 2, GPU KV cache usage: 1.0%",
    'INFO:     127.0.0.1:5 - "GET /metrics HTTP/1.1" 200 OK',
    "Added request cmpl-1.",
    "non-default args: {'model': 'Qwen/Qwen3-8B', 'speculative_config': {'method': 'eagle3', "
    "'num_speculative_tokens': 3}}",
    "vLLM API server version 0.10.2",
]
_BENDS = [
    lambda rng, t: t,
    lambda rng, t: t,
    lambda rng, t: t[: rng.randrange(len(t))],  # cut off
    lambda rng, t: (lambda i: t[:i] + "\n" + t[i:])(rng.randrange(len(t))),  # wrapped
    lambda rng, t: t.replace(", ", ",  ", 1),
    lambda rng, t: t.replace("2", "nan", 1),
    lambda rng, t: "\x1b[1;36m" + t.replace(") ", ")\x1b[0;0m ", 1),
    lambda rng, t: "2026-01-02T03:04:05.678Z " + t,
    lambda rng, t: "vllm-1  | " + t,
    lambda rng, t: t + " ",
    lambda rng, t: t + "\r",
    lambda rng, t: "> " + t,
    lambda rng, t: t.replace("pid=11", "pid=99"),
    lambda rng, t: t.replace("INFO", "INFO ", 1),
    lambda rng, t: t.replace(" tokens", "tokens", 1),
    lambda rng, t: t.replace("%", "%, Extra: 1", 1),
    lambda rng, t: t.replace(":0", ":0,123", 1),  # milliseconds in the header
    lambda rng, t: t.replace(") ", ")", 1),
    lambda rng, t: t.replace("(APIServer", "(VllmWorker rank=0", 1),
    lambda rng, t: '{"log": "' + t.replace('"', '\\"') + '\\n", "time": "2024-05-06T07:08:09Z"}',
    lambda rng, t: "[pod/vllm-0/vllm] " + t,
    lambda rng, t: "```\n" + t + "\n```",
    lambda rng, t: t[: len(t) // 2] + "\n" + t[len(t) // 2 :] if len(t) > 2 else t,
    lambda rng, t: t.replace(" ", "  ", 1),
    lambda rng, t: t.replace("SpecDecoding", "Spec" + "\n" + "Decoding", 1),
    lambda rng, t: t.replace("0.", "0\uff0c", 1),
    lambda rng, t: t + "\n" + t.split("] ", 1)[-1],  # the message again without a header
    lambda rng, t: "0.123, 0.456",
    lambda rng, t: "INFO 03-04 05:06:07 [metrics.py:1] " + t.split("] ", 1)[-1],
    lambda rng, t: t.replace("Engine 000", "2 Engines Aggregated", 1),
]


@pytest.mark.parametrize("seed", range(150))
def test_bent_plain_lines_read_the_same_in_bulk(seed: int, tmp_path: Path) -> None:
    """Lines the bulk reader takes, and the same lines cut, wrapped, glued, coloured,
    prefixed, given another pid or an extra field, in random order: both readers agree."""
    rng = random.Random(seed)
    lines = []
    for i in range(rng.randrange(5, 60)):
        text = rng.choice(_HEADS).format(s=i % 60) + rng.choice(_MESSAGES)
        if rng.random() < 0.3:
            text = rng.choice(_BENDS)(rng, text)
        if rng.random() < 0.05 and lines:
            text = lines.pop() + " " + text  # glued onto the line before
        lines.append(text)
    path = tmp_path / "bent.log"
    path.write_text("\n".join(lines) + "\n")
    _same(path, block_bytes=rng.choice([300, 2000, 1 << 20]))


# Lines behind stamps that stack, or wrapped with each part behind a stamp of its own (or
# one part alone behind one), as a container's log prints them (the core reads these).
_STAMPED = [
    lambda rng, t: t,
    lambda rng, t: "2026-01-02T03:04:05.678Z " + t,
    # `docker logs -t` of a log a container already stamped: two stamps, the first's year
    lambda rng, t: "2026-01-02T03:04:05.678Z 2025-12-31T23:59:59.1Z " + t,
    lambda rng, t: "vllm-1  | 2026-01-02T03:04:05Z 2025-12-31T23:59:59Z stdout F " + t,
    lambda rng, t: (lambda i: f"2026-01-02T03:04:05.1Z {t[:i]}\n2026-01-02T03:04:05.2Z {t[i:]}")(
        rng.randrange(1, len(t))
    ),
    lambda rng, t: (lambda i: f"2026-01-02T03:04:05.1Z {t[:i]}\n{t[i:]}")(rng.randrange(1, len(t))),
    lambda rng, t: (lambda i: f"{t[:i]}\n2027-01-02T03:04:05.2Z {t[i:]}")(rng.randrange(1, len(t))),
    lambda rng, t: (
        lambda i: (
            f"2026-01-02T03:04:05.1Z 2026-01-02T03:04:05.1Z {t[:i]}\n"
            f"2026-01-02T03:04:05.2Z 2026-01-02T03:04:05.2Z {t[i:]}"
        )
    )(rng.randrange(1, len(t))),
]


@pytest.mark.parametrize("seed", range(80))
def test_stamped_lines_read_the_same_in_bulk(seed: int, tmp_path: Path) -> None:
    """Lines behind container stamps, two stamps, and records wrapped behind stamps, in
    random order and blocks: both readers agree."""
    rng = random.Random(1000 + seed)
    lines = []
    for i in range(rng.randrange(5, 60)):
        text = rng.choice(_HEADS).format(s=i % 60) + rng.choice(_MESSAGES)
        if rng.random() < 0.5:
            text = rng.choice(_STAMPED)(rng, text)
        lines.append(text)
    path = tmp_path / "stamped.log"
    path.write_text("\n".join(lines) + "\n")
    _same(path, block_bytes=rng.choice([300, 2000, 1 << 20]))


def test_a_run_summary_counts_drafts_that_only_the_config_tells(tmp_path: Path) -> None:
    """0.8.3-0.8.4 lines print no per-position list: drafts come from k in the run's
    config, and the summary's mean acceptance length is 1 + accepted / drafts."""
    from specscope import ingest

    head = "(APIServer pid=7) INFO 01-02 03:04:{:02d} [metrics.py:1] "
    lines = [
        head.format(0) + "non-default args: {'model': 'm', 'speculative_config': "
        "{'method': 'eagle', 'num_speculative_tokens': 2}}"
    ]
    lines += [
        head.format(i) + "SpecDecoding metrics: Draft acceptance rate: 50.0%, "
        "Accepted: 10 tokens, Drafted: 20 tokens"
        for i in range(1, 5)
    ]
    path = tmp_path / "b.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = ingest(path, store=tmp_path / "s").sources[0].runs
    assert run.k == 2 and run.drafts == 40
    assert run.mean_acceptance_length == pytest.approx(1 + 40 / 40)


def test_a_config_dict_cut_off_gives_no_value_of_the_wrong_type(tmp_path: Path) -> None:
    """`{'model':` at a line's end and numbers on the next (found by the fuzz above): the
    run's model is unknown, not 0.123, and the ingest stores the run."""
    from specscope import ingest, open_store

    head = "(APIServer pid=7) INFO 01-02 03:04:{:02d} [metrics.py:1] "
    lines = [
        head.format(0) + "non-default args: {'model':",
        "0.123, 0.456",
        head.format(1) + "SpecDecoding metrics: Draft acceptance rate: 50.0%, "
        "Accepted: 10 tokens, Drafted: 20 tokens",
    ]
    path = tmp_path / "cut.log"
    path.write_text("\n".join(lines) + "\n")
    ingest(path, store=tmp_path / "s").raise_for_errors()
    runs = open_store(tmp_path / "s").runs.collect()
    assert runs["model"].to_list() == [None]


def test_run_rows_are_the_same_however_the_parts_were_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run rows and summaries are summed from the parts as ingest writes them; a table read
    only in part adds nothing, and one never read is summed on its own."""
    from specscope.logs import source as reader

    monkeypatch.setattr(reader, "_CHUNK", 8192)  # blocks of about block_bytes
    log = tmp_path / "server.log"
    with open(log, "w") as f:
        write_server(f, 300_000, runs=3)

    def finished() -> Any:
        done, stage, _ = _finished(log, block_bytes=20_000)
        assert len(stage.parts["spec_decode"]) > 3
        return done

    untouched = finished()
    expected = (untouched.runs, untouched.acceptance)  # its own pass over the stage
    whole = finished()
    for table in ("spec_decode", "engine_stats", "events", "bench"):
        for _ in whole.parts(table):
            pass
    assert (whole.runs, whole.acceptance) == expected
    partly = finished()
    next(partly.parts("spec_decode"))  # a reader that stops after one part
    for _ in partly.parts("engine_stats"):
        pass
    assert (partly.runs, partly.acceptance) == expected
    assert any(r["spec_records"] for r in expected[0])
