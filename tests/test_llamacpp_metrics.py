"""A llama.cpp server's ``/metrics`` (issue 21) through ``scrape`` and through a real
Prometheus with ``pull``: its spec-decode counters have vLLM's shape, so every interval is
exact, across a counter reset too, and the runs say the server is llama.cpp."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import polars as pl
import pytest

from specscope.prometheus.scrape import scrape
from specscope.store.reading import Store

from .prom_servers import Prometheus, serving

# Every answer adds one step of this much; after RESET answers the server "restarts" and
# counts again from one step, so each interval, and the one across the reset, is one step.
STEP = {"drafts": 100, "draft_tokens": 300, "accepted_tokens": 210}
PER_POS = [90, 70, 50]
RESET = 3


class LlamaCppExporter:
    """llama-server's /metrics as server-task.cpp writes it (HELP, TYPE, value; then the
    per-position family), counting up one step per answer."""

    def __init__(self) -> None:
        self.answers = 0
        self.lock = threading.Lock()

    def body(self) -> bytes:
        with self.lock:
            self.answers += 1
            steps = (self.answers - 1) % RESET + 1
        lines = []
        for column, per_step in STEP.items():
            name = f"llamacpp:spec_decode_num_{column}_total"
            lines += [f"# HELP {name} x", f"# TYPE {name} counter", f"{name} {per_step * steps}"]
        lines.append("llamacpp:tokens_predicted_total 12345")
        family = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
        lines += [f"# HELP {family} Accepted tokens per draft position", f"# TYPE {family} counter"]
        lines += [f'{family}{{position="{i}"}} {n * steps}' for i, n in enumerate(PER_POS)]
        return ("\n".join(lines) + "\n").encode()


def _exact(spec: pl.DataFrame) -> None:
    """Every interval one step: the ratios of the counters, exactly."""
    assert spec.height >= 2
    for row in spec.iter_rows(named=True):
        steps = row["drafts"] // STEP["drafts"]
        assert steps >= 1 and row["drafts"] == STEP["drafts"] * steps
        assert row["draft_tokens"] == STEP["draft_tokens"] * steps
        assert row["accepted_tokens"] == STEP["accepted_tokens"] * steps
        assert row["accepted_per_pos"] == [n * steps for n in PER_POS]
        assert row["acceptance_rate"] == pytest.approx(0.7)
        assert row["per_position_rate"] == pytest.approx([0.9, 0.7, 0.5])
        assert row["mean_acceptance_length"] == pytest.approx(3.1)
        assert row["k"] == 3


def test_scrape_of_a_llamacpp_server_is_exact_across_a_reset(tmp_path: Path) -> None:
    exporter = LlamaCppExporter()
    ticks = iter(range(1_000_000, 2_000_000, 10))
    with serving(exporter) as where:
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
    _exact(spec)
    assert spec["counts"].to_list() == ["delta", "delta", "since_restart", "delta"]
    assert spec["drafts"].to_list() == [100, 100, 100, 100]
    (run,) = store.runs.collect().to_dicts()
    assert (run["server"], run["k"]) == ("llama.cpp", 3)


def test_pull_of_a_llamacpp_server_through_prometheus(tmp_path: Path, cli) -> None:
    try:
        exporter = LlamaCppExporter()
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
    _exact(spec)
    assert "since_restart" in spec["counts"].to_list()
    assert store.runs.collect()["server"].to_list() == ["llama.cpp"]
