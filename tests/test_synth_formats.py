"""Synthetic logs of the formats other than V1 server logs (fixtures/synth.py,
``generate_format``) against the parser: vLLM V0 server logs with cumulative counts,
`vllm bench serve` / benchmark_serving.py / SGLang bench_serving result blocks, the offline
example's summary, SGLang scheduler logs and pasted fragments of V1 records.

For each seed the generator builds a text and the rows a careful reader takes from it; the
parser must give exactly those rows (a projection of the columns the generator knows). One
seed in four is plain, the others carry a random combination of the format's wrappings.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import specscope

from .helpers import FIXTURES, explain

sys.path.insert(0, str(FIXTURES))

import synth

SEEDS = range(40)

V0_SPEC_COLS = (
    "line",
    "end_line",
    "engine",
    "stats_line",
    "counts",
    "k",
    "drafts",
    "draft_tokens",
    "accepted_tokens",
    "emitted_tokens",
    "system_efficiency",
    "acceptance_rate",
    "mean_acceptance_length",
    "per_position_rate",
    "accepted_per_pos",
)
V0_STATS_COLS = (
    "line",
    "end_line",
    "engine",
    "prompt_throughput",
    "generation_throughput",
    "running_reqs",
    "swapped_reqs",
    "waiting_reqs",
    "kv_cache_usage",
    "kv_cache_device",
    "cpu_kv_cache_usage",
    "prefix_cache_hit_rate",
    "cpu_prefix_cache_hit_rate",
)
SG_STATS_COLS = (
    "line",
    "end_line",
    "running_reqs",
    "waiting_reqs",
    "kv_cache_usage",
    "generation_throughput",
)
SG_SPEC_COLS = (
    "line",
    "end_line",
    "stats_line",
    "mean_acceptance_length",
    "reported_rate",
    "k",
    "draft_tokens",
    "accepted_tokens",
)
SG_RUN_COLS = (
    "model",
    "spec_method",
    "k",
    "tensor_parallel_size",
    "enable_prefix_caching",
    "server",
)
BENCH_COLS = (
    "line",
    "end_line",
    "backend",
    "successful_requests",
    "failed_requests",
    "max_concurrency",
    "request_rate",
    "duration_s",
    "total_input_tokens",
    "total_generated_tokens",
    "request_throughput",
    "output_throughput",
    "peak_output_throughput",
    "peak_concurrent_requests",
    "total_token_throughput",
    *(f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "p99")),
)
BENCH_SPEC_FLAG_COLS = ("line", "speculative", "acceptance_length")
BLOCK_SPEC_COLS = (
    "line",
    "end_line",
    "k",
    "drafts",
    "draft_tokens",
    "accepted_tokens",
    "acceptance_rate",
    "mean_acceptance_length",
    "per_position_rate",
    "accepted_per_pos",
)
OFFLINE_SPEC_COLS = (*BLOCK_SPEC_COLS, "emitted_tokens")
FRAGMENT_COLS = (
    *BLOCK_SPEC_COLS,
    "accepted_throughput",
    "drafted_throughput",
)

# Generator options by case name: (format, keyword arguments)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "v0": ("vllm_v0", {}),
    "sglang": ("sglang", {}),
    "offline": ("offline", {}),
    "bench": ("bench", {}),
    "bench_unknown_labels": (
        "bench",
        {"kinds": ("serve", "script", "script_v04"), "unknown": True},
    ),
    "bench_sglang": ("bench", {"kinds": ("sglang",)}),
    "fragment": ("fragment", {"quoting_prose": 0.0}),
    "fragment_cut_c": ("fragment", {"kinds": ("cut_c",), "quoting_prose": 0.0}),
    "fragment_quoting_prose": ("fragment", {"quoting_prose": 1.0}),
}


def wrappings_for(fmt: str, seed: int) -> tuple[str, ...]:
    if seed % 4 == 0:
        return ()
    return synth.random_format_wrappings(fmt, random.Random(f"wrap-{fmt}-{seed}"))


@functools.cache
def case(name: str, seed: int) -> tuple[synth.SynthLog, specscope.ParseResult]:
    fmt, kw = CASES[name]
    log = synth.generate_format_seed(fmt, seed, wrappings_for(fmt, seed), **kw)
    return log, specscope.parse_text(log.text)


def project(rows: list[dict[str, Any]], cols: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{c: r.get(c) for c in cols} | {"partial": bool(r.get("partial"))} for r in rows]


def check_table(name: str, seed: int, table: str, cols: tuple[str, ...]) -> None:
    log, result = case(name, seed)
    got = project(result.tables.get(table, []), cols)
    want = project(getattr(log, table), cols)
    assert got == want, explain(log, got, want, table)


def check_nothing_skipped(name: str, seed: int) -> None:
    _log, result = case(name, seed)
    assert [(s.line, s.reason, s.text[:120]) for s in result.skipped] == []


def check_record_runs(name: str, seed: int, tables: tuple[str, ...]) -> None:
    """Every record in the run the truth puts it in (runs numbered as they appear)."""
    log, result = case(name, seed)
    ordinals = {run.ordinal: i for i, run in enumerate(result.runs)}
    for table in tables:
        rows, truth = result.tables.get(table, []), getattr(log, table)
        assert len(rows) == len(truth), f"{table}: {len(rows)} rows, {len(truth)} expected"
        got = [(r["line"], ordinals.get(r["_run"])) for r in rows]
        want = [(r["line"], r["run"]) for r in truth]
        assert got == want, f"{table}: records in the wrong run ({log.versions})"


# --------------------------------------------------------------------------------------
# the generator itself

# sha256 of the V1 generator's output for a few seeds, taken before the other formats were
# added: the V1 logs (and their truth) must not change.
V1_DIGEST = "454f7b032b9b0c7e9352347a83bd49a2ca1d8ae5afbf3f3d9a8e98086c4a4f3f"


def test_v1_generator_unchanged() -> None:
    h = hashlib.sha256()
    for seed in range(8):
        for ws in (
            (),
            ("noise", "glue"),
            ("json", "crlf", "gzip"),
            ("hardwrap",),
            ("md_fence", "compose", "ansi"),
        ):
            log = synth.generate_seed(seed, ws)
            h.update(log.data)
            h.update(log.truth_json().encode())
    assert h.hexdigest() == V1_DIGEST


@pytest.mark.parametrize("name", sorted(CASES))
def test_format_generator_is_deterministic(name: str) -> None:
    fmt, kw = CASES[name]
    for seed in (0, 5):
        ws = tuple(w for w in synth.FORMAT_WRAPPINGS[fmt] if w in ("crlf", "noise", "gzip"))
        a = synth.generate_format_seed(fmt, seed, ws, **kw)
        b = synth.generate_format_seed(fmt, seed, ws, **kw)
        assert a.data == b.data
        assert a.truth_json() == b.truth_json()


@pytest.mark.parametrize("fmt", [f for f in synth.FORMATS if f != "vllm_v1"])
def test_format_wrappings_keep_the_records(fmt: str) -> None:
    strip = ("line", "end_line", "stats_line")
    for seed in range(4):
        base = synth.generate_format_seed(fmt, seed)
        for w in synth.FORMAT_WRAPPINGS[fmt]:
            other = synth.generate_format_seed(fmt, seed, (w,))
            for table in ("spec_decode", "engine_stats", "bench"):
                assert [
                    {k: v for k, v in r.items() if k not in strip} for r in getattr(other, table)
                ] == [{k: v for k, v in r.items() if k not in strip} for r in getattr(base, table)]


def test_format_wrappings_refused() -> None:
    with pytest.raises(ValueError):
        synth.generate_format_seed("fragment", 0, ("compose",))
    with pytest.raises(ValueError):
        synth.generate_format_seed("bench", 0, ("hardwrap",))
    with pytest.raises(ValueError):
        synth.generate_format_seed("nope", 0)


def test_v0_truth_is_self_consistent() -> None:
    """The deltas of an engine's life add up to the totals its last line prints, and the
    per-interval values follow from the counts."""
    counts_seen: set[str] = set()
    for seed in range(100):
        log = synth.generate_format_seed("vllm_v0", seed)
        lines = log.text.split("\n")
        total = None
        for r in log.spec_decode:
            counts_seen.add(r["counts"])
            if r["counts"] != "delta":
                total = {"accepted": 0, "draft": 0, "emitted": 0}
            assert total is not None
            total["accepted"] += r["accepted_tokens"]
            total["draft"] += r["draft_tokens"]
            total["emitted"] += r["emitted_tokens"]
            text = lines[r["line"] - 1]
            assert f"Number of accepted tokens: {total['accepted']}," in text
            assert f"Number of draft tokens: {total['draft']}," in text
            assert f"Number of emitted tokens: {total['emitted']}." in text
            assert r["drafts"] == r["_true_drafts"]
            assert r["draft_tokens"] == r["drafts"] * r["k"]
            if r["drafts"]:
                assert r["drafts"] <= r["emitted_tokens"] <= r["accepted_tokens"] + r["drafts"]
    assert counts_seen == {"since_engine_start", "since_restart", "delta"}


def test_block_truth_is_self_consistent() -> None:
    """The per-position counts a reader recovers are the true ones within the printed
    precision, and every bench kind and fragment kind occurs."""
    for seed in range(60):
        log = synth.generate_format_seed("bench", seed, kinds=synth.BENCH_KINDS, unknown=True)
        for r in log.spec_decode:
            assert r["accepted_tokens"] == sum(r["_true_counts"])
            if r["accepted_per_pos"] is not None:
                assert all(
                    abs(a - c) <= max(1, r["drafts"] // 5000)
                    for a, c in zip(r["accepted_per_pos"], r["_true_counts"], strict=True)
                )
        log = synth.generate_format_seed("offline", seed)
        for r in log.spec_decode:
            assert r["accepted_tokens"] == sum(r["_true_counts"])
            assert r["draft_tokens"] == r["drafts"] * r["k"]


# --------------------------------------------------------------------------------------
# vLLM V0 server logs


@pytest.mark.parametrize("seed", SEEDS)
def test_v0_spec_decode(seed: int) -> None:
    check_table("v0", seed, "spec_decode", V0_SPEC_COLS)


@pytest.mark.parametrize("seed", SEEDS)
def test_v0_engine_stats(seed: int) -> None:
    check_table("v0", seed, "engine_stats", V0_STATS_COLS)


@pytest.mark.parametrize("seed", SEEDS)
def test_v0_runs(seed: int) -> None:
    """One run per server start (a restart that prints nothing stays in its run), with
    the version, model and k the start-up lines state."""
    log, result = case("v0", seed)
    cols = ("vllm_version", "model", "k")
    got = [{c: r.config.get(c) for c in cols} for r in result.runs]
    want = [{c: r[c] for c in cols} for r in log.runs]
    assert got == want, f"runs: {got} expected {want} ({log.versions}, {log.wrappings})"
    check_record_runs("v0", seed, ("spec_decode", "engine_stats"))


@pytest.mark.parametrize("seed", SEEDS)
def test_v0_nothing_skipped(seed: int) -> None:
    check_nothing_skipped("v0", seed)


# --------------------------------------------------------------------------------------
# SGLang scheduler logs


@pytest.mark.parametrize("seed", SEEDS)
def test_sglang_engine_stats(seed: int) -> None:
    check_table("sglang", seed, "engine_stats", SG_STATS_COLS)


@pytest.mark.parametrize("seed", SEEDS)
def test_sglang_spec_decode(seed: int) -> None:
    check_table("sglang", seed, "spec_decode", SG_SPEC_COLS)


@pytest.mark.parametrize("seed", SEEDS)
def test_sglang_runs(seed: int) -> None:
    log, result = case("sglang", seed)
    got = [{c: r.config.get(c) for c in SG_RUN_COLS} for r in result.runs]
    want = [{c: r[c] for c in SG_RUN_COLS} for r in log.runs]
    assert got == want, f"runs: {got} expected {want} ({log.versions}, {log.wrappings})"
    check_record_runs("sglang", seed, ("spec_decode", "engine_stats"))


@pytest.mark.parametrize("seed", SEEDS)
def test_sglang_nothing_skipped(seed: int) -> None:
    check_nothing_skipped("sglang", seed)


def test_sglang_families_covered() -> None:
    """Every line shape of research section 8 occurs in the seeds the tests use."""
    text = "\n".join(case("sglang", seed)[0].text for seed in SEEDS)
    for needle in (
        "Decode batch. #running-req",
        "largest-len: 0, #queue-req",
        "#full token:",
        "Decode batch [",
        "accept rate:",
        "Decode batch, #running-req",
        "pre-allocated usage:",
        "#retracted-req:",
        "npu graph:",
        "cpu graph:",
        " DP1 TP",
        "] Prefill batch",
    ):
        assert needle in text, needle
    ends = {line.rstrip("\r").endswith(", ") for line in text.split("\n") if "Decode batch" in line}
    assert ends == {True, False}
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (?:DP\d )?TP\d\]", text)


# --------------------------------------------------------------------------------------
# result blocks


@pytest.mark.parametrize("seed", SEEDS)
def test_bench_blocks(seed: int) -> None:
    """`vllm bench serve` (with and without the spec-decode section) and
    benchmark_serving.py blocks: one bench row each."""
    check_table("bench", seed, "bench", BENCH_COLS)


@pytest.mark.parametrize("seed", SEEDS)
def test_bench_spec_section(seed: int) -> None:
    """The 'Speculative Decoding' section: one spec_decode row per block that has it."""
    check_table("bench", seed, "spec_decode", BLOCK_SPEC_COLS)


@pytest.mark.parametrize("seed", SEEDS)
def test_bench_speculative_flag(seed: int) -> None:
    """A block with the spec-decode section is a speculative run, and its acceptance
    length is the one it prints."""
    check_table("bench", seed, "bench", BENCH_SPEC_FLAG_COLS)


@pytest.mark.parametrize("seed", SEEDS)
def test_bench_unknown_labels(seed: int) -> None:
    """Blocks with lines whose labels the definition does not know: 'Request goodput',
    extra percentiles (P90), the 0.4-era 'Input token throughput'."""
    check_table("bench_unknown_labels", seed, "bench", (*BENCH_COLS, "speculative"))


@pytest.mark.parametrize("seed", SEEDS)
def test_bench_sglang(seed: int) -> None:
    check_table("bench_sglang", seed, "bench", (*BENCH_COLS, *BENCH_SPEC_FLAG_COLS[1:]))


@pytest.mark.parametrize("name", ["bench", "bench_unknown_labels", "bench_sglang"])
def test_bench_nothing_skipped(name: str) -> None:
    for seed in SEEDS:
        check_nothing_skipped(name, seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_offline_summary(seed: int) -> None:
    check_table("offline", seed, "spec_decode", OFFLINE_SPEC_COLS)


def test_offline_nothing_skipped() -> None:
    for seed in SEEDS:
        check_nothing_skipped("offline", seed)


# --------------------------------------------------------------------------------------
# pasted fragments


@pytest.mark.parametrize("seed", SEEDS)
def test_fragments(seed: int) -> None:
    """The per-position line with the rate line under it, and a 0.10.2+ record whose
    opening was not copied: one partial record each."""
    check_table("fragment", seed, "spec_decode", FRAGMENT_COLS)


@pytest.mark.parametrize("seed", SEEDS)
def test_fragments_cut_variant_c(seed: int) -> None:
    """A 0.8.5-0.10.1 record without its opening starts with 'Draft acceptance rate:'."""
    check_table("fragment_cut_c", seed, "spec_decode", FRAGMENT_COLS)


@pytest.mark.parametrize("seed", SEEDS)
def test_fragments_after_quoting_prose(seed: int) -> None:
    """Prose quoting one value ('... (Avg Draft acceptance rate: 85.8%):') right before a
    fragment is not part of it."""
    check_table("fragment_quoting_prose", seed, "spec_decode", FRAGMENT_COLS)


@pytest.mark.parametrize("name", ["fragment", "fragment_cut_c", "fragment_quoting_prose"])
def test_fragments_nothing_skipped(name: str) -> None:
    for seed in SEEDS:
        check_nothing_skipped(name, seed)


# --------------------------------------------------------------------------------------
# gzip through ingest


@pytest.mark.parametrize("name", ["v0", "sglang", "bench", "offline"])
def test_gzip_ingest(name: str, tmp_path: Path) -> None:
    fmt, kw = CASES[name]
    seed = 3
    log = synth.generate_format_seed(fmt, seed, ("gzip", "crlf"), **kw)
    path = log.write(tmp_path / "input.log.gz")
    store = tmp_path / "store"
    specscope.ingest(path, store=store, year=2026).raise_for_errors()
    opened = specscope.open_store(store)
    for table in ("spec_decode", "engine_stats", "bench"):
        rows = opened.table(table).collect().sort("line").to_dicts()
        assert [r["line"] for r in rows] == [r["line"] for r in getattr(log, table)], table
