"""TensorRT-LLM's and SGLang's spec-decode counters (issue 21) through ``scrape`` and
through a real Prometheus with ``pull``, read on the one definition the paste reader uses
(``specscope.exposition``): every interval's ratios exact, across a counter reset, and
across a TensorRT-LLM position series that is created at its first count."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from specscope.exposition import NAMES
from specscope.prometheus.names import SERIES_NAMES
from specscope.prometheus.scrape import scrape
from specscope.store.reading import Store

from .prom_servers import Prometheus, serving

RESET = 3  # after this many answers the server "restarts" and counts from one step again
LABELS = 'model_name="nemotron-nano-3",engine_type="trtllm"'

# TensorRT-LLM, one step: drafted and accepted per token_position (k varies: position 2
# drafted on 60 of 100 drafts), and the iteration counters, which count otherwise.
DRAFTED = [100, 100, 60]
ACCEPTED = [80, 50, 18]


class Exporter:
    """A /metrics body counting up one step per answer, as ``lines`` writes it."""

    def __init__(self, lines: Callable[[int, int], list[str]]) -> None:
        self.lines = lines
        self.answers = 0
        self.lock = threading.Lock()

    def body(self) -> bytes:
        with self.lock:
            self.answers += 1
            life, steps = divmod(self.answers - 1, RESET)
        return ("\n".join(self.lines(life, steps + 1)) + "\n").encode()


def trtllm_lines(life: int, steps: int) -> list[str]:
    """trtllm-serve's shape (tensorrt_llm/metrics/collector.py). A position's series is
    created at its first count: in the first life position 2 starts drafting one step
    late, so the first answer has no series for it."""
    out = ["# HELP trtllm_num_requests_running Number of active requests"]
    out.append(f"trtllm_num_requests_running{{{LABELS}}} 4.0")
    out.append(f"trtllm_num_requests_waiting{{{LABELS}}} 1.0")
    out.append(f"trtllm_kv_cache_utilization{{{LABELS}}} 0.25")
    for family, per_step in (("drafted", DRAFTED), ("accepted", ACCEPTED)):
        name = f"trtllm_spec_decode_{family}_tokens_total"
        out += [f"# HELP {name} x", f"# TYPE {name} counter"]
        for position, n in enumerate(per_step):
            value = n * (steps - 1 if position == 2 and life == 0 else steps)
            if value:
                out.append(f'{name}{{{LABELS},token_position="{position}"}} {float(value)}')
    out.append(f"trtllm_spec_decode_num_draft_tokens_total{{{LABELS}}} {262.0 * steps}")
    out.append(f"trtllm_spec_decode_num_accepted_tokens_total{{{LABELS}}} {149.0 * steps}")
    out.append(f"trtllm_spec_decode_acceptance_length{{{LABELS}}} 2.4")
    out.append(f"trtllm_spec_decode_draft_overhead{{{LABELS}}} 0.12")
    return out


def vllm_adaptive_lines(life: int, steps: int) -> list[str]:
    """vLLM's counters with the drafted-per-position family its main branch adds beside
    adaptive verification (k varies per step): the same step as TensorRT-LLM's above."""
    labels = 'model_name="meta-llama/Llama-3.1-8B-Instruct",engine="0"'
    out = [
        f"vllm:spec_decode_num_drafts_total{{{labels}}} {100.0 * steps}",
        f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {260.0 * steps}",
        f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {148.0 * steps}",
    ]
    for family, per_step in (("accepted_tokens", ACCEPTED), ("draft_tokens", DRAFTED)):
        name = f"vllm:spec_decode_num_{family}_per_pos_total"
        out += [f'{name}{{{labels},position="{i}"}} {n * steps}.0' for i, n in enumerate(per_step)]
    return out


def vllm_exact(row: dict[str, object]) -> None:
    assert row["drafts"] == 100 and row["draft_tokens"] == 260
    assert row["accepted_tokens"] == 148
    assert row["drafted_per_pos"] == DRAFTED and row["accepted_per_pos"] == ACCEPTED
    assert row["per_position_rate"] == pytest.approx([0.8, 0.5, 0.3])
    assert row["mean_acceptance_length"] == pytest.approx(2.48)


def sglang_lines(life: int, steps: int) -> list[str]:
    """SGLang's shape (metrics/collector.py): the tokenizer's counters (model_name) beside
    the scheduler's last-interval gauge, which carries its ranks."""
    model = 'model_name="nvidia/GLM-5.2-NVFP4"'
    return [
        "# TYPE sglang:generation_tokens_total counter",
        f"sglang:generation_tokens_total{{{model}}} {3630.0 * steps}",
        "# TYPE sglang:spec_verify_calls_total counter",
        f"sglang:spec_verify_calls_total{{{model}}} {1000.0 * steps}",
        "# TYPE sglang:spec_accept_length gauge",
        f'sglang:spec_accept_length{{{model},tp_rank="0"}} 3.41',
    ]


def sglang_setup_lines(life: int, steps: int) -> list[str]:
    """SGLang 0.5.23's shape (srt/observability/metrics_collector.py): the same counters
    beside the setup gauges of an EAGLE chain of 3 steps verifying 4 tokens, whose k the
    pull reads from them as the paste reader does (parsers/prometheus_text_sglang.toml)."""
    model = 'model_name="Qwen/Qwen3-8B",engine_type="unified"'
    return [
        "# TYPE sglang:generation_tokens_total counter",
        f"sglang:generation_tokens_total{{{model}}} {2600.0 * steps}",
        "# TYPE sglang:spec_verify_calls_total counter",
        f"sglang:spec_verify_calls_total{{{model}}} {1000.0 * steps}",
        *(
            f"# TYPE sglang:{name} gauge\nsglang:{name}{{{model}}} {value}"
            for name, value in (
                ("spec_accept_length", 2.5),
                ("spec_num_steps", 3.0),
                ("spec_num_draft_tokens", 4.0),
                ("spec_cap_length", 0.0),
                ("spec_block_accept_length", 2.6),
            )
        ),
    ]


def trtllm_exact(row: dict[str, object]) -> None:
    assert row["drafts"] == 100 and row["draft_tokens"] == 260
    assert row["accepted_tokens"] == 148
    assert row["drafted_per_pos"] == DRAFTED and row["accepted_per_pos"] == ACCEPTED
    assert row["per_position_rate"] == pytest.approx([0.8, 0.5, 0.3])  # 18/60, not 18/100
    assert row["acceptance_rate"] == pytest.approx(148 / 260)
    assert row["mean_acceptance_length"] == pytest.approx(2.48)
    assert row["k"] == 3 and row["format"] == "prometheus"
    assert '"iteration_draft_tokens": 262' in str(row["extra"])
    assert '"draft_overhead": 0.12' in str(row["extra"])


def sglang_exact(row: dict[str, object]) -> None:
    assert row["drafts"] == 1000 and row["accepted_tokens"] == 2630
    assert row["draft_tokens"] is None and row["acceptance_rate"] is None
    assert row["mean_acceptance_length"] == pytest.approx(3.63)
    assert row["format"] == "prometheus_sglang"


def lmdeploy_lines(life: int, steps: int) -> list[str]:
    """LMDeploy's shape (lmdeploy/metrics/loggers.py, PrometheusStatLogger): vLLM's counters
    under its own prefix, labelled model_name and engine (the DP rank), beside its load."""
    labels = 'engine="0",model_name="Qwen/Qwen3-8B"'
    out = [
        f"lmdeploy:num_requests_running{{{labels}}} 4.0",
        f"lmdeploy:num_requests_waiting{{{labels}}} 1.0",
        f"lmdeploy:gpu_cache_usage_perc{{{labels}}} 0.25",
        "# TYPE lmdeploy:spec_decode_num_drafts_total counter",
        f"lmdeploy:spec_decode_num_drafts_total{{{labels}}} {100.0 * steps}",
        f"lmdeploy:spec_decode_num_draft_tokens_total{{{labels}}} {300.0 * steps}",
        f"lmdeploy:spec_decode_num_accepted_tokens_total{{{labels}}} {148.0 * steps}",
    ]
    name = "lmdeploy:spec_decode_num_accepted_tokens_per_pos_total"
    out += [f'{name}{{{labels},position="{i}"}} {n * steps}.0' for i, n in enumerate(ACCEPTED)]
    return out


def lmdeploy_exact(row: dict[str, object]) -> None:
    assert row["drafts"] == 100 and row["draft_tokens"] == 300
    assert row["accepted_tokens"] == 148 and row["accepted_per_pos"] == ACCEPTED
    assert row["per_position_rate"] == pytest.approx([0.8, 0.5, 0.18])
    assert row["acceptance_rate"] == pytest.approx(148 / 300)
    assert row["k"] == 3 and row["format"] == "prometheus"


def sglang_setup_exact(row: dict[str, object]) -> None:
    assert row["drafts"] == 1000 and row["accepted_tokens"] == 1600
    assert row["mean_acceptance_length"] == pytest.approx(2.6)
    assert row["k"] == 3 and row["format"] == "prometheus_sglang"
    for said in ('"spec_num_steps": 3.0', '"spec_num_draft_tokens": 4.0'):
        assert said in str(row["extra"])


CASES = [
    pytest.param(trtllm_lines, trtllm_exact, "tensorrt-llm", 3, id="tensorrt-llm"),
    pytest.param(sglang_lines, sglang_exact, "sglang", None, id="sglang"),
    pytest.param(sglang_setup_lines, sglang_setup_exact, "sglang", 3, id="sglang-setup-gauges"),
    pytest.param(lmdeploy_lines, lmdeploy_exact, "lmdeploy", 3, id="lmdeploy"),
    pytest.param(vllm_adaptive_lines, vllm_exact, "vllm", 3, id="vllm-drafted-per-position"),
]


def test_pull_and_scrape_read_the_names_the_paste_reader_reads() -> None:
    for engine in ("tensorrt-llm", "sglang", "lmdeploy"):
        for name, role in NAMES[engine].items():
            wanted = name if role in ("mean_acceptance_length", "draft_overhead") else None
            assert (wanted or name + "_total") in SERIES_NAMES or name in SERIES_NAMES


@pytest.mark.parametrize(("lines", "exact", "server", "k"), CASES)
def test_scrape_is_exact_across_a_reset(tmp_path: Path, lines, exact, server, k) -> None:
    ticks = iter(range(1_000_000, 2_000_000, 10))
    with serving(Exporter(lines)) as where:
        scrape(
            f"http://{where}/metrics",
            store=tmp_path / "s",
            interval=10,
            count=5,
            sleep=lambda _s: None,
            clock=lambda: float(next(ticks)),
        )
    store = Store(tmp_path / "s")
    spec = store.spec_decode.collect().sort("ts")
    assert spec["counts"].to_list() == ["delta", "delta", "since_restart", "delta"]
    for row in spec.iter_rows(named=True):
        exact(row)
    (run,) = store.runs.collect().to_dicts()
    assert (run["server"], run["k"]) == (server, k)
    if server in ("tensorrt-llm", "lmdeploy"):  # load gauges: what concurrency detectors read
        stats = store.engine_stats.collect()
        assert stats.height == 5
        assert set(stats["running_reqs"]) == {4} and set(stats["waiting_reqs"]) == {1}
        assert set(stats["kv_cache_usage"]) == {0.25}


@pytest.mark.parametrize(("lines", "exact", "server", "k"), CASES)
def test_pull_through_prometheus(tmp_path: Path, cli, lines, exact, server, k) -> None:
    try:
        exporter = Exporter(lines)
        with serving(exporter) as where:
            prom = Prometheus(tmp_path, [where])
            try:
                prom.wait_for_targets()
                deadline = time.time() + 30
                while exporter.answers < 2 * RESET + 2 and time.time() < deadline:
                    time.sleep(0.5)
                time.sleep(1.5)  # the last answer's sample is in the TSDB
                r = cli(
                    "pull", "--prometheus", prom.url, "--since", "5m", "--store", tmp_path / "s"
                )
            finally:
                prom.stop()
    except FileNotFoundError:
        pytest.skip("no prometheus binary (apt-get install prometheus)")
    assert r.status == 0, r.err
    store = Store(tmp_path / "s")
    spec = store.spec_decode.collect().sort("ts")
    assert spec.height >= 4
    assert "since_restart" in spec["counts"].to_list()
    for row in spec.iter_rows(named=True):
        exact(row)
    runs = store.runs.collect()
    assert runs["server"].to_list() == [server]
    assert isinstance(spec, pl.DataFrame)
