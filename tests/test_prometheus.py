"""`specscope pull` against a real Prometheus scraping a vLLM-shaped exporter on 127.0.0.1."""

from __future__ import annotations

import json
import re
import shutil
import time
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

import specscope
from specscope.durations import parse_duration
from specscope.errors import ExitStatus
from specscope.prometheus.intervals import Series, deltas, intervals
from specscope.prometheus.pull import (
    Endpoint,
    PrometheusError,
    pull,
    series_selector,
)

from .prom_servers import RATES, RUNNING, Misbehaving, Prometheus, VllmExporter, serve_exporter

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="needs Debian's prometheus (.ci/run installs it)"
)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Two engines scraped every second for ~14 s, with a server restart half-way."""
    exporter = VllmExporter()
    port, server = serve_exporter(exporter)
    # A sample limit far below what a 30-minute window holds: every pull must split its
    # windows until each request fits (what Prometheus's own limits force on long pulls).
    prom = Prometheus(
        tmp_path_factory.mktemp("prom"), [f"127.0.0.1:{port}"], "--query.max-samples=200"
    )
    prom.wait_for_targets()
    started = datetime.now(UTC)
    time.sleep(6)
    exporter.restart()
    time.sleep(6)
    yield prom, exporter, started
    prom.stop()
    server.shutdown()  # type: ignore[attr-defined]


def _spec(store):
    return specscope.open_store(store).spec_decode.collect()


def test_pull_gives_the_exporters_exact_ratios(live, tmp_path):
    prom, _, _started = live
    report = pull(prom.url, store=tmp_path / "s", since="5m")
    assert not report.failed
    spec = _spec(tmp_path / "s")
    assert spec.height > 10
    for engine, r in RATES.items():
        rows = spec.filter(pl.col("engine") == int(engine))
        assert rows.height > 4
        for row in rows.iter_rows(named=True):
            assert row["accepted_tokens"] * r["drafts"] == row["drafts"] * r["accepted"]
            assert row["draft_tokens"] == row["drafts"] * 3
            assert row["k"] == 3
            assert row["accepted_per_pos"] == [
                p * row["drafts"] // r["drafts"] for p in r["per_pos"]
            ]
            assert row["mean_acceptance_length"] == pytest.approx(1 + r["accepted"] / r["drafts"])
            assert row["acceptance_rate"] == pytest.approx(r["accepted"] / r["draft_tokens"])
        # about the right number of drafts: the rate times the seconds observed
        seconds = (rows["ts"].max() - rows["ts"].min()).total_seconds()
        assert rows["drafts"].sum() == pytest.approx(
            r["drafts"] * seconds, rel=0.35, abs=3 * r["drafts"]
        )
    weighted = specscope.weighted_acceptance(spec, by=["engine"]).sort("engine")
    assert weighted["mean_acceptance_length"].to_list() == pytest.approx([2.8, 2.0])
    assert weighted["per_position"].to_list()[0] == pytest.approx([0.8, 0.6, 0.4])
    assert weighted["per_position"].to_list()[1] == pytest.approx([0.6, 0.2, 0.2])


def test_restart_is_an_interval_of_its_own(live, tmp_path):
    prom, _, _ = live
    pull(prom.url, store=tmp_path / "s", since="5m")
    spec = _spec(tmp_path / "s")
    restarted = spec.filter(pl.col("counts") == "since_restart")
    assert restarted.height >= 1  # one per engine that drafted after the restart
    assert (restarted["drafts"] >= 0).all()
    assert set(spec["counts"].unique()) <= {"delta", "since_restart"}


def test_engine_stats_and_run_config(live, tmp_path):
    prom, _, _ = live
    pull(prom.url, store=tmp_path / "s", since="5m")
    store = specscope.open_store(tmp_path / "s")
    stats = store.engine_stats.collect()
    for engine, running in RUNNING.items():
        rows = stats.filter(pl.col("engine") == int(engine))
        assert set(rows["running_reqs"]) == {running}
        assert rows["prefix_cache_hit_rate"].drop_nulls().to_list() == pytest.approx(
            [0.25] * rows["prefix_cache_hit_rate"].drop_nulls().len()
        )
    # Each data-parallel engine is a run of its own (issue 20), k from its position series.
    runs = store.runs.collect().sort("pids").to_dicts()
    assert [json.loads(r["pids"])["engine"] for r in runs] == list(RATES)
    spec = store.spec_decode.collect()
    for run in runs:
        assert run["model"] == "Qwen/Qwen3-8B"
        assert run["enable_prefix_caching"] is True
        assert run["kv_cache_dtype"] == "fp8"
        assert run["k"] == 3
        assert run["spec_records"] == spec.filter(pl.col("run_id") == run["run_id"]).height
    assert sum(r["spec_records"] for r in runs) == spec.height


def test_incremental_pulls_have_no_gap_and_no_duplicate(live, tmp_path):
    prom, _, started = live
    end = datetime.now(UTC) - timedelta(seconds=2)
    middle = started + (end - started) / 2
    once = tmp_path / "once"
    pull(prom.url, store=once, start=started - timedelta(seconds=5), end=end)
    twice = tmp_path / "twice"
    pull(prom.url, store=twice, start=started - timedelta(seconds=5), end=middle)
    second = pull(prom.url, store=twice, end=end)  # continues from the watermark
    assert second.start <= middle
    a, b = _spec(once), _spec(twice)
    key = ["engine", "ts"]
    assert b.select(key).is_duplicated().sum() == 0
    assert (
        a.sort(key)
        .select(key, "drafts", "accepted_tokens")
        .equals(b.sort(key).select(key, "drafts", "accepted_tokens"))
    )


def test_windows_are_split_to_fit_the_servers_sample_limit(live, tmp_path):
    prom, _, _ = live
    report = pull(prom.url, store=tmp_path / "s", since="5m")
    assert not report.failed
    assert report.requests > 4  # one 30-minute window would exceed --query.max-samples=200
    assert _spec(tmp_path / "s").height > 10


def test_window_boundaries_do_not_duplicate_samples(live, tmp_path):
    prom, _, started = live
    end = datetime.now(UTC) - timedelta(seconds=2)
    pull(prom.url, store=tmp_path / "big", start=started, end=end)
    small = pull(prom.url, store=tmp_path / "small", start=started, end=end, window_s=3)
    assert small.requests > 3
    key = ["engine", "ts"]
    big, little = _spec(tmp_path / "big"), _spec(tmp_path / "small")
    assert little.select(key).is_duplicated().sum() == 0
    assert big.sort(key).select(key, "drafts").equals(little.sort(key).select(key, "drafts"))


def test_a_second_pull_of_the_same_window_adds_nothing(live, tmp_path):
    prom, _, started = live
    end = datetime.now(UTC) - timedelta(seconds=2)
    first = pull(prom.url, store=tmp_path / "s", start=started, end=end)
    again = pull(prom.url, store=tmp_path / "s", end=end - timedelta(seconds=1))
    assert first.added["spec_decode"] > 0
    assert again.added.get("spec_decode", 0) == 0


def test_cli_pull_json(live, tmp_path, cli):
    prom, _, _ = live
    r = cli("pull", "--prometheus", prom.url, "--since", "5m", "--store", tmp_path / "s", "--json")
    assert r.status == 0, r.err
    data = json.loads(r.out)
    assert data["added"]["spec_decode"] > 0
    assert data["failed"] == []
    text = cli("runs", "--store", tmp_path / "s")
    assert "Qwen/Qwen3-8B" in text.out


# -- faults --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["500", "429", "slow", "malformed"])
def test_faults_are_clear_and_store_nothing(mode, tmp_path, cli):
    bad = Misbehaving(mode)
    try:
        r = cli(
            "pull",
            "--prometheus",
            bad.url,
            "--since",
            "10m",
            "--store",
            tmp_path / "s",
            "--timeout",
            "1",
            "--retries",
            "1",
        )
    finally:
        bad.stop()
    assert r.status == ExitStatus.PROMETHEUS
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and bad.url in lines[0]
    assert "Traceback" not in r.err
    if mode in ("500", "429"):
        assert bad.requests >= 2  # retried
    store = specscope.Store(tmp_path / "s")  # a failed first pull leaves no store at all
    assert not store.exists()
    assert store.spec_decode.collect().height == 0
    sources = store.sources.collect()
    assert sources.height == 0 or sources["watermark"].is_null().all()


def test_unreachable_server(tmp_path, cli):
    from .prom_servers import free_port

    r = cli(
        "pull",
        "--prometheus",
        f"http://127.0.0.1:{free_port()}",
        "--since",
        "5m",
        "--store",
        tmp_path / "s",
        "--retries",
        "0",
    )
    assert r.status == ExitStatus.PROMETHEUS
    assert "cannot reach" in r.err


def test_credentials_never_reach_the_store_or_output(tmp_path, cli):
    bad = Misbehaving("500")
    try:
        url = bad.url.replace("http://", "http://alice:s3cret@")
        r = cli(
            "pull",
            "--prometheus",
            url,
            "--since",
            "5m",
            "--store",
            tmp_path / "s",
            "--retries",
            "0",
            env={"SPECSCOPE_PROMETHEUS_TOKEN": "tok-123456"},
        )
    finally:
        bad.stop()
    assert "s3cret" not in r.out + r.err and "tok-123456" not in r.out + r.err
    for path in (tmp_path / "s").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"s3cret" not in data and b"tok-123456" not in data


# -- the arithmetic, without servers ---------------------------------------------------------


def test_deltas_are_reset_aware():
    points = [(1.0, 10), (2.0, 25), (3.0, 5), (4.0, 9), (4.0, 9)]
    assert deltas(points) == [(2.0, 15, 1.0, False), (3.0, 5, 2.0, True), (4.0, 4, 3.0, False)]


def test_intervals_line_per_position_up_with_drafts():
    labels = {"instance": "a", "model_name": "m", "engine": "0"}
    series = [
        Series("vllm:spec_decode_num_drafts_total", labels, ((0, 0), (10, 100))),
        Series("vllm:spec_decode_num_draft_tokens_total", labels, ((0, 0), (10, 300))),
        Series("vllm:spec_decode_num_accepted_tokens_total", labels, ((0, 0), (10, 150))),
        *[
            Series(
                "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                {**labels, "position": str(i)},
                ((0, 0), (10, c)),
            )
            for i, c in enumerate((80, 50, 20))
        ],
    ]
    (row,) = intervals(series).spec_decode.to_dicts()
    assert row["accepted_per_pos"] == [80, 50, 20] and row["k"] == 3
    assert row["mean_acceptance_length"] == 2.5 and row["acceptance_rate"] == 0.5


def test_v0_counters_are_skipped_with_a_note():
    labels = {"instance": "a", "model_name": "m"}
    got = intervals([Series("vllm:spec_decode_num_emitted_tokens_total", labels, ((0, 0), (5, 9)))])
    assert got.spec_decode.is_empty() and "over-count" in got.notes[0]


def test_selector_and_durations():
    assert series_selector('{job="vllm"}').endswith(', job="vllm"}')
    with pytest.raises(specscope.SpecscopeError):
        series_selector("job=vllm; drop table")
    assert parse_duration("1h30m") == timedelta(minutes=90)
    with pytest.raises(specscope.SpecscopeError):
        parse_duration("soon")


def test_prometheus_error_is_a_specscope_error():
    assert issubclass(PrometheusError, specscope.SpecscopeError)


# -- scrape: /metrics read directly -----------------------------------------------------------


def test_scrape_reads_the_exporter_directly(tmp_path, cli):
    exporter = VllmExporter()
    port, server = serve_exporter(exporter)
    try:
        r = cli(
            "scrape",
            f"http://127.0.0.1:{port}/metrics",
            "--interval",
            "1.1s",
            "--count",
            "4",
            "--store",
            tmp_path / "s",
            "--json",
        )
    finally:
        server.shutdown()  # type: ignore[attr-defined]
    assert r.status == 0, r.err
    assert json.loads(r.out)["kind"] == "scrape"
    spec = _spec(tmp_path / "s")
    assert spec.height >= 4  # two engines, up to three intervals each (a poll may share a second)
    for engine, rates in RATES.items():
        for row in spec.filter(pl.col("engine") == int(engine)).iter_rows(named=True):
            assert row["accepted_tokens"] * rates["drafts"] == row["drafts"] * rates["accepted"]
            assert row["per_position_rate"] == pytest.approx(
                [p / rates["drafts"] for p in rates["per_pos"]]
            )
    sources = specscope.open_store(tmp_path / "s").sources.collect()
    assert sources["kind"].to_list() == ["scrape"]


def test_scrape_says_what_it_stored_in_words(tmp_path, cli):
    """A scrape has no next pull to announce, and one run is one run."""
    exporter = VllmExporter()
    port, server = serve_exporter(exporter)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        r = cli("scrape", url, "--interval", "1.1s", "--count", "2", "--store", tmp_path / "s")
    finally:
        server.shutdown()  # type: ignore[attr-defined]
    assert r.status == 0, r.err
    assert "next pull" not in r.out and "1 runs" not in r.out
    assert re.search(r"\b2 runs\b", r.out), r.out  # two engines, two runs


def test_scrape_of_a_page_that_is_not_metrics(tmp_path, cli):
    bad = Misbehaving("500")
    try:
        r = cli(
            "scrape",
            f"{bad.url}/metrics",
            "--interval",
            "0.1s",
            "--count",
            "2",
            "--store",
            tmp_path / "s",
        )
    finally:
        bad.stop()
    assert r.status == ExitStatus.PROMETHEUS
    assert "HTTP 500" in r.err


def test_a_window_that_fails_mid_pull_keeps_what_came_before(tmp_path, cli):
    bad = Misbehaving("then500")
    try:
        r = cli(
            "pull",
            "--prometheus",
            bad.url,
            "--since",
            "2h",
            "--store",
            tmp_path / "s",
            "--retries",
            "0",
            "--json",
        )
    finally:
        bad.stop()
    assert r.status == ExitStatus.PROMETHEUS
    report = json.loads(r.out)
    assert report["failed"] and "500" in report["failed"][0]
    spec = _spec(tmp_path / "s")
    assert spec.height > 0
    assert spec.select("ts").is_duplicated().sum() == 0
    assert spec["accepted_per_pos"].to_list()[0] == [4, 2]
    (source,) = specscope.open_store(tmp_path / "s").sources.collect().to_dicts()
    # the watermark is the newest interval stored, before the window that failed
    assert source["watermark"] == spec["ts"].max()


def test_latency_means_from_histogram_sums_and_counts():
    labels = {"instance": "a", "model_name": "m", "engine": "0"}
    series = [
        Series("vllm:num_requests_running", labels, ((0, 3), (10, 3))),
        Series("vllm:time_to_first_token_seconds_sum", labels, ((0, 1.0), (10, 3.0))),
        Series("vllm:time_to_first_token_seconds_count", labels, ((0, 10), (10, 20))),
        Series("vllm_inter_token_latency_seconds_sum", labels, ((0, 0.0), (10, 0.5))),
        Series("vllm_inter_token_latency_seconds_count", labels, ((0, 0), (10, 100))),
    ]
    (row,) = [r for r in intervals(series).engine_stats.to_dicts() if r.get("mean_ttft_ms")]
    assert row["mean_ttft_ms"] == pytest.approx(200.0)
    assert row["mean_itl_ms"] == pytest.approx(5.0)


def test_both_prefix_cache_names_the_token_based_one_wins():
    labels = {"instance": "a", "model_name": "m", "engine": "0"}
    series = [
        Series("vllm:num_requests_running", labels, ((0, 1), (10, 1))),
        Series("vllm:prefix_cache_queries_total", labels, ((0, 0), (10, 100))),
        Series("vllm:prefix_cache_hits_total", labels, ((0, 0), (10, 25))),
        # the 0.8 names count blocks: 10 hits of 10 queries would say 100%
        Series("vllm:gpu_prefix_cache_queries_total", labels, ((0, 0), (10, 10))),
        Series("vllm:gpu_prefix_cache_hits_total", labels, ((0, 0), (10, 10))),
    ]
    rows = intervals(series).engine_stats.sort("_t")
    assert rows["prefix_cache_hit_rate"].to_list() == [None, 0.25]


def test_per_position_counts_run_to_the_highest_position_sampled():
    labels = {"instance": "a", "model_name": "m", "engine": "0"}
    series = [
        Series("vllm:spec_decode_num_drafts_total", labels, ((0, 0), (10, 10), (20, 20))),
        Series(
            "vllm_spec_decode_num_accepted_tokens_per_pos_total",
            {**labels, "position": "0"},
            ((0, 0), (10, 8), (20, 15)),
        ),
        # position 1 lost its samples; position 2 was scraped only at t=10
        Series(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            {**labels, "position": "2"},
            ((0, 0), (10, 3)),
        ),
    ]
    rows = intervals(series).spec_decode.sort("_t").to_dicts()
    assert [r["accepted_per_pos"] for r in rows] == [[8, 0, 3], [7]]
    assert [r["k"] for r in rows] == [3, 1]
    assert rows[0]["per_position_rate"] == [0.8, 0.0, 0.3]


def test_an_ipv6_loopback_url_keeps_its_brackets():
    assert Endpoint.from_url("http://[::1]:9090/").url == "http://[::1]:9090"


def test_a_position_label_past_any_k_is_left_out():
    labels = {"instance": "a", "model_name": "m", "engine": "0"}
    series = [
        Series("vllm:spec_decode_num_drafts_total", labels, ((0, 0), (10, 10))),
        Series(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            {**labels, "position": "0"},
            ((0, 0), (10, 6)),
        ),
        Series(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            {**labels, "position": "9" * 12},  # would be a list of 10^12 counts
            ((0, 0), (10, 1)),
        ),
    ]
    (row,) = intervals(series).spec_decode.to_dicts()
    assert row["accepted_per_pos"] == [6] and row["k"] == 1


def test_a_proxy_from_the_environment_is_used(tmp_path, monkeypatch):
    # requests reads the environment once per pull, not per request: still read.
    from .prom_servers import free_port

    proxy = Misbehaving("matrix")
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("http_proxy", proxy.url)
    target = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    try:
        report = specscope.pull(target, store=tmp_path / "s", since="1h", retries=0)
    finally:
        proxy.stop()
    asked = (f"{target}/api/v1/query?", f"{target}/api/v1/series?")
    assert proxy.paths and all(p.startswith(asked) for p in proxy.paths)
    assert report.failed == [] and report.added["spec_decode"] > 0
