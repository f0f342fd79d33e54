"""vLLM's n-gram drafter benchmark (benchmarks/benchmark_ngram_proposer.py, issue 21): its
table is read, and its measured proposer time feeds `advise`'s drafter cost for a vLLM
n-gram run in the same store, as llama.cpp's `dur(b,g,a)` and TensorRT-LLM's draft
overhead do for theirs."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from statistics import median

import pytest

import specscope
from specscope.analysis.advise import advise
from specscope.logs.limits import max_line_bytes
from specscope.logs.parser import parse_text

ROOT = Path(__file__).resolve().parent.parent
DEFINITION = ROOT / "parsers" / "vllm_ngram_proposer_bench.toml"
# The benchmark's default table (the definition's first sample): 128 requests a batch.
BENCH = tomllib.loads(DEFINITION.read_text(encoding="utf-8"))["samples"][0]["text"] + "\n"
AVG_US = [312.641, 335.904, 371.118, 420.552, 468.017]

# (running, generation throughput, accepted, drafted) per 10 s interval, k = 3.
INTERVALS = [(24, 1510.2, 2210, 4104), (32, 1804.7, 2802, 5106), (28, 1655.0, 2415, 4575)]


def _vllm_log(method: str) -> str:
    lines = [
        "(APIServer pid=1) INFO 06-06 14:19:02 [utils.py:278] non-default args: {'model': "
        "'meta-llama/Llama-3.1-8B-Instruct', 'speculative_config': {'method': "
        f"'{method}', 'num_speculative_tokens': 3}}}}"
    ]
    for i, (running, gen, acc, drafted) in enumerate(INTERVALS):
        ts = f"06-06 14:2{i}:00"
        lines.append(
            f"(APIServer pid=1) INFO {ts} [loggers.py:116] Engine 000: Avg prompt throughput: "
            f"120.0 tokens/s, Avg generation throughput: {gen} tokens/s, Running: {running} "
            "reqs, Waiting: 0 reqs, GPU KV cache usage: 9.5%, Prefix cache hit rate: 0.5%"
        )
        lines.append(
            f"(APIServer pid=1) INFO {ts} [metrics.py:86] SpecDecoding metrics: Draft "
            f"acceptance rate: {100 * acc / drafted:.1f}%, Mean acceptance length: "
            f"{1 + acc / (drafted / 3):.2f}, Accepted: {acc} tokens, Drafted: {drafted} tokens, "
            "Per-position acceptance rate: "
            + ", ".join(f"{w * acc / (drafted / 3):.3f}" for w in (0.5, 0.3, 0.2))
        )
    return "\n".join(lines) + "\n"


def _store(tmp_path: Path, **files: str) -> specscope.Store:
    paths = []
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    specscope.ingest(paths, store=tmp_path / "store", year=2026)
    return specscope.open_store(tmp_path / "store")


def test_the_benchmark_table_alone_is_stored(tmp_path) -> None:
    store = _store(tmp_path, **{"bench.txt": BENCH})
    rows = store.bench.collect()
    assert rows["format"].to_list() == ["vllm_ngram_proposer_bench"] * 5
    assert rows["max_concurrency"].to_list() == [128.0] * 5


def test_an_ngram_run_takes_its_drafter_cost_from_the_benchmark(tmp_path) -> None:
    store = _store(tmp_path, **{"serve.log": _vllm_log("ngram"), "bench.txt": BENCH})
    (a,) = [x for x in advise(store) if x.method == "ngram"]
    accepted = sum(i[2] for i in INTERVALS)
    drafts = sum(i[3] for i in INTERVALS) / 3
    tau = 1 + accepted / drafts
    step = median(1000 * r * tau / g for r, g, _, _ in INTERVALS)
    running = median(r for r, _, _, _ in INTERVALS)
    draft = max(AVG_US) / 128 * running / 1000  # the costliest row, per request
    assert a.measured is not None
    assert a.measured["tau"] == pytest.approx(tau)
    assert a.measured["step_ms"] == pytest.approx(step)
    assert a.measured["draft_ms_per_step"] == pytest.approx(draft)
    assert a.measured["c_step"] == pytest.approx(draft / (step - draft))
    assert a.measured["max_ngram"] == 20
    assert "vLLM n-gram proposer" in a.cost_source


def test_without_the_benchmark_the_run_keeps_the_default(tmp_path) -> None:
    store = _store(tmp_path, **{"serve.log": _vllm_log("ngram")})
    (a,) = [x for x in advise(store) if x.method == "ngram"]
    assert a.measured is None


def test_another_drafter_is_not_costed_by_the_ngram_benchmark(tmp_path) -> None:
    store = _store(tmp_path, **{"serve.log": _vllm_log("eagle3"), "bench.txt": BENCH})
    assert all(x.measured is None for x in advise(store))


@pytest.mark.parametrize(
    "unit",
    ["| # Request | Max Ngram | Avg (us) ", "| 128 | 1500 | 3 | 5 | 312.6 | 498.2 ", "+-----"],
)
def test_a_long_line_of_its_shapes_reads_in_linear_time(unit: str) -> None:
    text = unit * ((max_line_bytes() - 1024) // len(unit))
    start = time.monotonic()
    parse_text(text)
    assert time.monotonic() - start < 15
