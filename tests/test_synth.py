"""Synthetic vLLM logs (fixtures/synth.py) against the parser: every record, every wrapping.

For each seed the generator builds a log and the rows a correct reading gives; the parser
must give exactly those rows (a projection of the columns the generator knows).
"""

from __future__ import annotations

import functools
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

import specscope

from .helpers import FIXTURES, explain

sys.path.insert(0, str(FIXTURES))

import synth

SEEDS = range(60)
INGEST_SEEDS = (0, 2, 6, 11, 20, 25, 27, 33)  # 6-33: 0.8.3-0.8.4 runs whose k the config states
PARSE_WRAPPINGS = ["plain", *(w for w in synth.WRAPPINGS if w != "gzip"), "combo"]

SPEC_COLS = (
    "line",
    "end_line",
    "engine",
    "k",
    "drafts",
    "draft_tokens",
    "accepted_tokens",
    "accepted_per_pos",
    "per_position_rate",
    "mean_acceptance_length",
    "acceptance_rate",
    "accepted_throughput",
    "drafted_throughput",
)
STATS_COLS = (
    "line",
    "end_line",
    "engine",
    "engines_aggregated",
    "prompt_throughput",
    "generation_throughput",
    "running_reqs",
    "waiting_reqs",
    "deferred_reqs",
    "preemptions",
    "kv_cache_usage",
    "kv_cache_device",
    "prefix_cache_hit_rate",
    "external_prefix_cache_hit_rate",
    "mm_cache_hit_rate",
)
RUN_COLS = (
    "vllm_version",
    "model",
    "spec_method",
    "k",
    "enable_prefix_caching",
    "tensor_parallel_size",
    "quantization",
)


def wrappings_for(name: str, seed: int) -> tuple[str, ...]:
    if name == "plain":
        return ()
    if name == "combo":
        return tuple(
            w for w in synth.random_wrappings(random.Random(f"combo-{seed}")) if w != "gzip"
        )
    return (name,)


@functools.cache
def case(name: str, seed: int) -> tuple[synth.SynthLog, specscope.ParseResult]:
    log = synth.generate_seed(seed, wrappings_for(name, seed))
    return log, specscope.parse_text(log.text)


def project(rows: list[dict[str, Any]], cols: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{c: r.get(c) for c in cols} | {"partial": bool(r.get("partial"))} for r in rows]


def parse_level(row: dict[str, Any]) -> dict[str, Any]:
    """parse_text reads one line at a time: a 0.8.3-0.8.4 line gets k (and drafts) from the
    run's configuration only in ingest."""
    if row.get("k_from_config"):
        return dict(row, k=None, drafts=None)
    return row


# --------------------------------------------------------------------------------------
# the generator itself


def test_generator_is_deterministic() -> None:
    for seed in (0, 7, 41):
        for ws in ((), ("noise", "glue"), ("json", "crlf", "gzip"), ("hardwrap",)):
            a, b = synth.generate_seed(seed, ws), synth.generate_seed(seed, ws)
            assert a.data == b.data
            assert a.truth_json() == b.truth_json()


def test_wrappings_keep_the_records() -> None:
    for seed in range(10):
        base = synth.generate_seed(seed)
        for w in synth.WRAPPINGS:
            other = synth.generate_seed(seed, (w,))
            strip = ("line", "end_line", "ts")
            assert [{k: v for k, v in r.items() if k not in strip} for r in other.spec_decode] == [
                {k: v for k, v in r.items() if k not in strip} for r in base.spec_decode
            ]


def test_truth_is_self_consistent() -> None:
    """The counts obey what vLLM computes, and the derived truth matches the true counts
    where the printed precision allows."""
    variants, ks, zero = set(), set(), 0
    for seed in range(200):
        log = synth.generate_seed(seed)
        for r in log.spec_decode:
            variants.add(r["variant"])
            drafts, counts = r["_true_drafts"], r["_true_counts"]
            ks.add(len(counts))
            assert all(b <= a for a, b in zip([drafts, *counts], counts, strict=False))
            assert r["accepted_tokens"] == sum(counts)
            assert r["draft_tokens"] == drafts * len(counts)
            zero += r["accepted_tokens"] == 0
            if r["drafts"] is not None:
                assert r["drafts"] == drafts
            if r["accepted_per_pos"] is not None and drafts:
                assert all(
                    abs(a - c) <= max(1, drafts // 1000)
                    for a, c in zip(r["accepted_per_pos"], counts, strict=True)
                )
    assert variants == {"B", "C", "D"}
    assert ks == set(range(1, 17))
    assert zero > 0


def test_wrappings_refuse_bad_combinations() -> None:
    with pytest.raises(ValueError):
        synth.check_wrappings(("hardwrap", "compose"))
    with pytest.raises(ValueError):
        synth.check_wrappings(("json", "kubectl"))


def test_command_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(FIXTURES / "synth.py"), "--out", str(tmp_path), "--seed", "5"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "spec" in out.stdout
    assert (tmp_path / "seed0005_plain.log").is_file()
    assert (tmp_path / "seed0005_gzip.log.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert (tmp_path / "seed0005_plain.truth.json").is_file()


# --------------------------------------------------------------------------------------
# the parser against the truth


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("wrapping", PARSE_WRAPPINGS)
def test_spec_decode(wrapping: str, seed: int) -> None:
    log, result = case(wrapping, seed)
    got = project(result.tables.get("spec_decode", []), SPEC_COLS)
    want = project([parse_level(r) for r in log.spec_decode], SPEC_COLS)
    assert got == want, explain(log, got, want, "spec_decode")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("wrapping", PARSE_WRAPPINGS)
def test_engine_stats(wrapping: str, seed: int) -> None:
    log, result = case(wrapping, seed)
    got = project(result.tables.get("engine_stats", []), STATS_COLS)
    want = project(log.engine_stats, STATS_COLS)
    assert got == want, explain(log, got, want, "engine_stats")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("wrapping", PARSE_WRAPPINGS)
def test_runs(wrapping: str, seed: int) -> None:
    """One parsed run per server run, with the configuration its startup lines state, and
    every record in its own run."""
    log, result = case(wrapping, seed)
    got = [{c: r.config.get(c) for c in RUN_COLS} for r in result.runs]
    want = [{c: r[c] for c in RUN_COLS} for r in log.runs]
    if got != want and "hardwrap_narrow" in log.wrappings:
        # Known limit: startup lines hard-wrapped below 90 columns can lose values
        # (a wrap inside a word the prefilter does not know); their records still read.
        pytest.xfail(explain(log, got, want, "runs"))
    assert got == want, explain(log, got, want, "runs")
    index = {run.ordinal: i for i, run in enumerate(result.runs)}
    for table in ("spec_decode", "engine_stats"):
        rows = result.tables.get(table, [])
        truth = getattr(log, table)
        if len(rows) == len(truth):
            got_runs = [(r["line"], index.get(r["_run"])) for r in rows]
            want_runs = [(r["line"], r["run"]) for r in truth]
            assert got_runs == want_runs, f"{table}: records in the wrong run ({log.versions})"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("wrapping", PARSE_WRAPPINGS)
def test_nothing_skipped(wrapping: str, seed: int) -> None:
    _log, result = case(wrapping, seed)
    assert [(s.line, s.reason, s.text[:120]) for s in result.skipped] == []


# --------------------------------------------------------------------------------------
# gzip, ingest and the store


def _ingest_case(seed: int, tmp_path: Path, combo: bool) -> None:
    ws = ("gzip",)
    if combo:
        ws = tuple(
            sorted(
                {*synth.random_wrappings(random.Random(f"ingest-{seed}")), "gzip"},
                key=synth.WRAPPINGS.index,
            )
        )
    log = synth.generate_seed(seed, ws)
    path = log.write(tmp_path / "server.log.gz")
    store = tmp_path / "store"
    report = specscope.ingest(path, store=store, year=2026)
    report.raise_for_errors()

    cols = (*SPEC_COLS, "ts")
    frame = specscope.open_store(store).spec_decode.collect()
    got = [{c: r.get(c) for c in cols} for r in frame.sort("line", maintain_order=True).to_dicts()]
    want = [{c: r.get(c) for c in cols} for r in log.spec_decode]
    if combo or log.width:
        for rows in (got, want):
            for r in rows:
                r.pop("ts")
    assert got == want, explain(log, got, want, "store spec_decode")

    stats = specscope.open_store(store).engine_stats.collect()
    assert stats.height == len(log.engine_stats)

    glob = (store / "spec_decode" / "**" / "*.parquet").as_posix()
    n, accepted, drafted, sources, runs = duckdb.sql(
        "select count(*), sum(accepted_tokens), sum(draft_tokens), "
        "count(distinct source_id), count(distinct run_id) "
        f"from read_parquet('{glob}', hive_partitioning=true)"
    ).fetchall()[0]
    assert n == len(log.spec_decode)
    assert accepted == sum(r["accepted_tokens"] for r in log.spec_decode)
    assert drafted == sum(r["draft_tokens"] for r in log.spec_decode)
    assert sources == 1
    assert runs == len({r["run"] for r in log.spec_decode})
    glob = (store / "engine_stats" / "**" / "*.parquet").as_posix()
    (m,) = duckdb.sql(
        f"select count(*) from read_parquet('{glob}', hive_partitioning=true)"
    ).fetchall()[0]
    assert m == len(log.engine_stats)


@pytest.mark.parametrize("seed", INGEST_SEEDS)
def test_gzip_ingest(seed: int, tmp_path: Path) -> None:
    _ingest_case(seed, tmp_path, combo=False)


@pytest.mark.parametrize("seed", INGEST_SEEDS)
def test_gzip_ingest_combo(seed: int, tmp_path: Path) -> None:
    _ingest_case(seed, tmp_path, combo=True)
