"""`specscope pull` at fleet size (issue 23): a real Prometheus on 127.0.0.1 scraping a few
hundred vLLM-shaped exporters, read in chunks of instances, each committed on its own."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import polars as pl
import pytest

import specscope
from specscope.prometheus import pull as pulling
from specscope.prometheus.chunking import RECORDED_PREFIX, Chunk, instances_of, pack
from specscope.prometheus.pull import pull
from specscope.prometheus.rules import PREFIX, rules_yaml

from .prom_servers import Prometheus

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="needs Debian's prometheus (.ci/run installs it)"
)

SERVERS = 300
CHUNK_SERIES = 400  # 8 series a server: 50 servers a chunk, 6 chunks
MODEL = "Qwen/Qwen3-8B"


def rates(i: int) -> dict[str, int]:
    """Server i's counts per second: its own ratios, so that rows cannot be mixed up."""
    drafts = 5 + i % 11
    per_pos = (drafts - i % 3, drafts // 2, i % 4)
    return {
        "drafts": drafts,
        "draft_tokens": 3 * drafts,
        "accepted_tokens": sum(per_pos),
        **{f"pos{p}": n for p, n in enumerate(per_pos)},
    }


class Fleet:
    """``n`` exporters, each on a port of its own (its ``instance``), in this process: a
    counter is its rate times the whole seconds since the fleet started."""

    def __init__(self, n: int) -> None:
        self.started = time.time()
        self.servers: list[ThreadingHTTPServer] = []
        self.threads: list[threading.Thread] = []
        for i in range(n):
            server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(i))
            server.daemon_threads = True
            thread = threading.Thread(target=server.serve_forever, args=(0.5,), daemon=True)
            thread.start()
            self.servers.append(server)
            self.threads.append(thread)
        self.targets = [f"127.0.0.1:{s.server_address[1]}" for s in self.servers]
        self.rates = {t: rates(i) for i, t in enumerate(self.targets)}

    def _handler(self, i: int) -> type[BaseHTTPRequestHandler]:
        fleet = self
        r = rates(i)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = fleet.exposition(r).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # Prometheus stopped mid-scrape

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def exposition(self, r: dict[str, int]) -> str:
        n = int(time.time() - self.started)
        labels = f'model_name="{MODEL}",engine="0"'
        lines = [
            f"vllm:spec_decode_num_{name}_total{{{labels}}} {r[name] * n}"
            for name in ("drafts", "draft_tokens", "accepted_tokens")
        ]
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{p}"}} '
            f"{r[f'pos{p}'] * n}"
            for p in range(3)
        ]
        lines += [
            f"vllm:num_requests_running{{{labels}}} 1",
            f"vllm:num_requests_waiting{{{labels}}} 0",
        ]
        return "\n".join(lines) + "\n"

    def stop(self) -> None:
        # Each shutdown waits for its loop's next poll: all at once, not one after another.
        stopping = [threading.Thread(target=s.shutdown) for s in self.servers]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        for server in self.servers:
            server.server_close()


class Faulty:
    """A reverse proxy to ``upstream`` that answers HTTP 500 to every range query from
    the ``fail_from``-th on (counting from 1), until ``heal``: a server that goes away in
    the middle of a pull."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.fail_from: int | None = None
        self.fail_at: float | None = None  # or fail every query for a time from this on
        self.hang_from: int | None = None  # or never answer from this query on
        self.released = threading.Event()
        self.queries = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/api/v1/query?"):
                    outer.queries += 1
                    at = float(urllib.parse.parse_qs(self.path.split("?", 1)[1])["time"][0])
                    if outer.hang_from is not None and outer.queries >= outer.hang_from:
                        outer.released.wait(60)
                        return
                    late = outer.fail_at is not None and at >= outer.fail_at
                    if late or (outer.fail_from is not None and outer.queries >= outer.fail_from):
                        self._send(500, b'{"status":"error","error":"gone"}')
                        return
                with urllib.request.urlopen(outer.upstream + self.path, timeout=30) as r:
                    self._send(r.status, r.read())

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def _up(url: str) -> int:
    query = urllib.parse.urlencode({"query": "count(up == 1)"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as r:
        import json

        result = json.loads(r.read())["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[tuple[Prometheus, Fleet, datetime, datetime]]:
    """Every server scraped every second for ~8 s: the range the tests pull."""
    exporters = Fleet(SERVERS)
    work = tmp_path_factory.mktemp("prom")
    # specscope's own recording rules, evaluated: present, and still not what is pulled.
    rules = work / "rules.yml"
    rules.write_text(rules_yaml())
    prom = Prometheus(work, exporters.targets, rules=rules)
    try:
        deadline = time.time() + 60
        while _up(prom.url) < SERVERS:
            if time.time() > deadline:
                raise RuntimeError("prometheus never scraped every server")
            time.sleep(0.5)
        start = datetime.now(UTC)
        time.sleep(8)
        end = datetime.now(UTC) - timedelta(seconds=1)
        yield prom, exporters, start, end
    finally:
        prom.stop()
        exporters.stop()


def _rows(store) -> pl.DataFrame:
    s = specscope.open_store(store)
    runs = s.runs.collect().select("run_id", "pids")
    return (
        s.spec_decode.collect()
        .join(runs, on="run_id")
        .select(
            "pids", "ts", "counts", "drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos"
        )
        .sort("pids", "ts")
    )


def test_chunked_pull_equals_the_unchunked_one_and_the_servers_rates(fleet, tmp_path):
    prom, exporters, start, end = fleet
    whole = pull(prom.url, store=tmp_path / "whole", start=start, end=end, chunk_series=None)
    # The per-chunk caps are the chunk's size: a chunk answered with more series than the
    # series API named would leave some out, with a note.
    chunked = pull(
        prom.url,
        store=tmp_path / "chunked",
        start=start,
        end=end,
        chunk_series=CHUNK_SERIES,
        max_series=CHUNK_SERIES,
        max_targets=CHUNK_SERIES // 8,
    )
    assert not whole.failed and not chunked.failed
    assert not any("left out" in n for n in chunked.notes)
    assert f"read in {SERVERS * 8 // CHUNK_SERIES} chunks" in " ".join(chunked.notes)
    # The recorded rate()s are not the interval counts: the raw counters are pulled.
    assert RECORDED_PREFIX == PREFIX
    (why,) = [n for n in chunked.notes if "records specscope's rules" in n]
    assert "pulled the raw counters instead" in why and f"{PREFIX}:" in why
    a, b = _rows(tmp_path / "whole"), _rows(tmp_path / "chunked")
    assert a.height > SERVERS * 4
    assert a.equals(b)
    assert chunked.added == whole.added and chunked.runs == whole.runs == SERVERS
    # What the servers counted, interval by interval: each server's own ratios, exactly.
    import json

    for (pids,), rows in b.group_by("pids"):
        r = exporters.rates[json.loads(pids)["instance"]]
        seconds = rows["drafts"] // r["drafts"]
        assert (rows["drafts"] == seconds * r["drafts"]).all()
        assert (rows["accepted_tokens"] == seconds * r["accepted_tokens"]).all()
        assert (rows["draft_tokens"] == seconds * r["draft_tokens"]).all()
        assert rows["accepted_per_pos"].to_list() == [
            [s * r[f"pos{p}"] for p in range(3)] for s in seconds
        ]


def test_intervals_made_a_group_of_instances_at_a_time_are_the_whole_batchs(
    fleet, tmp_path, monkeypatch
):
    """The intervals of a chunk, made a few instances at a time (to bound their sorts and
    joins), are the rows, runs and notes of the chunk made at once."""
    assert SERVERS * 8 == 2_400
    import specscope.prometheus.pull as pulling

    prom, _, start, end = fleet
    got = {}
    for group in (None, 250, 800):  # 2,400 series: 10 groups, 3 groups
        monkeypatch.setattr(pulling, "GROUP_SERIES", group)
        report = pull(
            prom.url, store=tmp_path / str(group), start=start, end=end, chunk_series=None
        )
        got[group] = (_rows(tmp_path / str(group)), report.runs, report.added, report.notes)
    for group in (250, 800):
        assert got[group][0].equals(got[None][0])
        assert got[group][1:] == got[None][1:]


def test_the_cli_reads_in_the_chunks_it_is_told(fleet, tmp_path, cli):
    """`pull --chunk-series N` packs the instances as the library does; 0 reads every
    series at once; both store the rows of the library's unchunked pull."""
    import json

    prom, _, start, end = fleet
    window = ["--start", start.isoformat(), "--end", end.isoformat()]
    chunked = cli(
        "pull",
        "--prometheus",
        prom.url,
        *window,
        "--store",
        tmp_path / "c",
        "--chunk-series",
        CHUNK_SERIES,
        "--json",
    )
    whole = cli(
        "pull",
        "--prometheus",
        prom.url,
        *window,
        "--store",
        tmp_path / "w",
        "--chunk-series",
        0,
        "--json",
    )
    assert chunked.status == whole.status == 0, (chunked.err, whole.err)
    notes = " ".join(json.loads(chunked.out)["notes"])
    assert f"read in {SERVERS * 8 // CHUNK_SERIES} chunks" in notes
    assert "chunks" not in " ".join(json.loads(whole.out)["notes"])
    assert _rows(tmp_path / "c").equals(_rows(tmp_path / "w"))
    refused = cli("pull", "--prometheus", prom.url, "--chunk-series", -1)
    assert refused.status == 2 and "--chunk-series" in refused.err


def test_a_pull_stopped_after_some_chunks_resumes_exactly(fleet, tmp_path):
    prom, _, start, end = fleet
    proxy = Faulty(prom.url)
    try:
        whole = pull(proxy.url, store=tmp_path / "whole", start=start, end=end, chunk_series=None)
        # One window per chunk: the 4th range query (chunk 4) fails, chunks 1-3 are kept.
        proxy.queries, proxy.fail_from = 0, 4
        first = pull(
            proxy.url,
            store=tmp_path / "twice",
            start=start,
            end=end,
            chunk_series=CHUNK_SERIES,
            retries=0,
        )
        assert first.failed and "500" in first.failed[0]
        kept = _rows(tmp_path / "twice")
        assert 0 < kept["pids"].n_unique() < SERVERS
        assert kept["pids"].n_unique() == 3 * CHUNK_SERIES // 8
        proxy.queries, proxy.fail_from = 0, None
        second = pull(proxy.url, store=tmp_path / "twice", end=end, chunk_series=CHUNK_SERIES)
        assert not second.failed
    finally:
        proxy.stop()
    # The finished chunks were not read again: their windows begin at their watermarks.
    assert second.added["spec_decode"] == whole.added["spec_decode"] - kept.height
    a, b = _rows(tmp_path / "whole"), _rows(tmp_path / "twice")
    assert b.select("pids", "ts").is_duplicated().sum() == 0
    assert a.equals(b)


def test_a_pull_killed_after_some_chunks_resumes_exactly(fleet, tmp_path):
    prom, _, start, end = fleet
    proxy = Faulty(prom.url)
    store = tmp_path / "twice"
    try:
        whole = pull(proxy.url, store=tmp_path / "whole", start=start, end=end, chunk_series=None)
        # The 4th range query (chunk 4) is never answered: the pull is killed waiting for it.
        proxy.queries, proxy.hang_from = 0, 4
        code = (
            "import sys; from datetime import datetime; from specscope import pull; "
            "pull(sys.argv[1], store=sys.argv[2], start=datetime.fromisoformat(sys.argv[3]), "
            f"end=datetime.fromisoformat(sys.argv[4]), chunk_series={CHUNK_SERIES})"
        )
        args = [proxy.url, str(store), start.isoformat(), end.isoformat()]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen([sys.executable, "-c", code, *args], env=env)
        deadline = time.time() + 60
        while proxy.queries < 4 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        proc.kill()
        assert proc.wait() == -signal.SIGKILL
        kept = _rows(store)
        assert kept["pids"].n_unique() == 3 * CHUNK_SERIES // 8  # chunks 1-3, committed
        proxy.hang_from = None
        second = pull(proxy.url, store=store, end=end, chunk_series=CHUNK_SERIES)
        assert not second.failed
    finally:
        proxy.stop()
    assert second.added["spec_decode"] == whole.added["spec_decode"] - kept.height
    assert _rows(tmp_path / "whole").equals(_rows(store))


def test_a_long_pull_commits_in_parts_and_resumes_inside_a_chunk(fleet, tmp_path, monkeypatch):
    prom, _, start, end = fleet
    whole = pull(prom.url, store=tmp_path / "whole", start=start, end=end, chunk_series=None)
    # 2-second windows, a part committed every 100 kB of answers (each window of data):
    # a chunk read as a long backfill is, in parts, each committed before the next.
    monkeypatch.setattr(pulling, "SPAN_BYTES", 100_000)
    # Each part looks back for the sample before its first interval: 10 s of 1-second
    # scrapes is plenty, and 5 windows to ask for instead of 300.
    monkeypatch.setattr(pulling, "LOOKBACK_S", 10)
    proxy = Faulty(prom.url)
    try:
        proxy.fail_at = start.timestamp() + 5
        first = pull(
            proxy.url,
            store=tmp_path / "twice",
            start=start,
            end=end,
            window_s=2,
            chunk_series=3 * CHUNK_SERIES,  # 2 chunks: fewer windows to ask for
            retries=0,
        )
        assert first.failed
        kept = _rows(tmp_path / "twice")
        naive = start.replace(tzinfo=None)
        assert naive + timedelta(seconds=2) < kept["ts"].max() <= naive + timedelta(seconds=5)
        ingests = specscope.open_store(tmp_path / "twice").manifest()["ingests"]
        assert len(ingests) >= 2  # parts of the first chunk, committed one by one
        proxy.fail_at = None
        second = pull(
            proxy.url, store=tmp_path / "twice", end=end, window_s=2, chunk_series=3 * CHUNK_SERIES
        )
        assert not second.failed
    finally:
        proxy.stop()
    assert second.added["spec_decode"] == whole.added["spec_decode"] - kept.height
    assert _rows(tmp_path / "whole").equals(_rows(tmp_path / "twice"))


def test_instances_pack_into_chunks_of_bounded_series():
    counts = {f"h{i:03d}": 8 for i in range(10)} | {"big": 50, "": 3}
    chunks = pack(counts, 20)
    assert sum(c.series for c in chunks) == sum(counts.values())
    assert sorted(i for c in chunks for i in c.instances or ()) == sorted(counts)
    assert all(c.series <= 20 or len(c.instances or ()) == 1 for c in chunks)
    # An instance name is matched literally, and an absent instance label as "".
    sel = Chunk(("a.b:1", 'q"x', ""), 3).selector('{__name__="m"}')
    assert sel == '{__name__="m", instance=~"a\\\\.b:1|q\\"x|"}'


@pytest.mark.parametrize(
    "body",
    [
        b"[1, 2]",
        b'"x"',
        b'{"status":"error","error":"no"}',
        b'{"status":"success","data":[["a"]]}',
    ],
)
def test_an_answer_that_is_no_list_of_series_is_one_line(body):
    with pytest.raises(ValueError, match=r"no list of series|not an object of labels"):
        instances_of(body)
    # Keys in any order, a label called "data" or "status": still a list of series.
    answer = b'{"data":[{"status":"x","instance":"a"},{"data":"y"}],"status":"success"}'
    assert instances_of(answer) == {"a": 1, "": 1}


def test_a_server_without_the_series_api_is_read_unchunked(tmp_path):
    from .prom_servers import Misbehaving

    server = Misbehaving("matrix")  # answers range queries only
    try:
        report = pull(server.url, store=tmp_path / "s", since="10m", retries=0)
    finally:
        server.stop()
    assert not report.failed and report.added["spec_decode"] > 0
    assert any("the series API gave no list of series" in n for n in report.notes)
