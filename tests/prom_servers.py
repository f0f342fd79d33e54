"""Real servers on 127.0.0.1 for the Prometheus tests: a vLLM-shaped exporter whose
counters grow at known rates, a real `prometheus` scraping it, and a small HTTP server
that misbehaves on purpose."""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

MODEL = "Qwen/Qwen3-8B"
# Per second and engine: drafts, draft tokens, accepted, accepted per position (k = 3).
RATES = {
    "0": {"drafts": 10, "draft_tokens": 30, "accepted": 18, "per_pos": (8, 6, 4)},
    "1": {"drafts": 5, "draft_tokens": 15, "accepted": 5, "per_pos": (3, 1, 1)},
}
RUNNING = {"0": 2, "1": 1}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VllmExporter:
    """Counters = rate x whole seconds since the (last) start, so that every interval
    between two scrapes has exactly the ratios in RATES. ``restart`` resets them."""

    def __init__(self) -> None:
        self.started = time.time()
        self.restarts = 0

    def restart(self) -> None:
        """A new server: counters start again from zero, and have counted a couple of
        seconds by the next scrape (lower than before, so the drop is visible)."""
        self.started = time.time() - 2.5
        self.restarts += 1

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        n = math.floor(time.time() - self.started)
        labels = ["model_name", "engine"]
        families = {
            name: CounterMetricFamily(f"vllm:spec_decode_num_{name}", name, labels=labels)
            for name in ("drafts", "draft_tokens", "accepted_tokens")
        }
        per_pos = CounterMetricFamily(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "per pos",
            labels=[*labels, "position"],
        )
        running = GaugeMetricFamily("vllm:num_requests_running", "running", labels=labels)
        waiting = GaugeMetricFamily("vllm:num_requests_waiting", "waiting", labels=labels)
        usage = GaugeMetricFamily("vllm:kv_cache_usage_perc", "kv", labels=labels)
        queries = CounterMetricFamily("vllm:prefix_cache_queries", "q", labels=labels)
        hits = CounterMetricFamily("vllm:prefix_cache_hits", "h", labels=labels)
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=["block_size", "cache_dtype", "enable_prefix_caching", "engine"],
        )
        for engine, r in RATES.items():
            values = [MODEL, engine]
            families["drafts"].add_metric(values, r["drafts"] * n)
            families["draft_tokens"].add_metric(values, r["draft_tokens"] * n)
            families["accepted_tokens"].add_metric(values, r["accepted"] * n)
            for position, rate in enumerate(r["per_pos"]):
                per_pos.add_metric([*values, str(position)], rate * n)
            running.add_metric(values, RUNNING[engine])
            waiting.add_metric(values, 0)
            usage.add_metric(values, 0.5)
            queries.add_metric(values, 100 * n)
            hits.add_metric(values, 25 * n)
            info.add_metric(["16", "fp8", "True", engine], 1)
        yield from families.values()
        yield from (per_pos, running, waiting, usage, queries, hits, info)


def serve_exporter(exporter: VllmExporter) -> tuple[int, object]:
    registry = CollectorRegistry()
    registry.register(exporter)  # type: ignore[arg-type]
    port = free_port()
    server, _thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    return port, server


class Prometheus:
    """A real prometheus binary scraping ``targets`` every second, on a free port."""

    def __init__(self, workdir: Path, targets: list[str], *args: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise FileNotFoundError("prometheus")
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: vllm\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        self.log = open(workdir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                *args,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("prometheus did not become ready")

    def wait_for_targets(self, timeout: float = 30.0) -> None:
        """Prometheus applies new targets after its discovery interval (about 5 s)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?query=up", timeout=2) as r:
                if json.loads(r.read())["data"]["result"]:
                    return
            time.sleep(0.5)
        raise RuntimeError("prometheus never scraped its targets")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _matrix(path: str) -> bytes:
    """A range-vector answer: drafts growing by 10 and accepted by 6 every 5 s up to the
    query's time (k = 2), for one engine."""
    from urllib.parse import parse_qs, urlsplit

    at = float(parse_qs(urlsplit(path).query)["time"][0])
    times = [at - 50 + 5 * i for i in range(11)]
    labels = {"instance": "x:1", "model_name": "m", "engine": "0"}

    def series(name: str, per_step: int, **extra: str) -> dict[str, object]:
        base = int(times[0])  # grows with time, so windows continue one another
        return {
            "metric": {"__name__": name, **labels, **extra},
            "values": [[t, str(base * per_step + per_step * i)] for i, t in enumerate(times)],
        }

    result = [
        series("vllm:spec_decode_num_drafts_total", 10),
        series("vllm:spec_decode_num_draft_tokens_total", 20),
        series("vllm:spec_decode_num_accepted_tokens_total", 6),
        series("vllm:spec_decode_num_accepted_tokens_per_pos_total", 4, position="0"),
        series("vllm:spec_decode_num_accepted_tokens_per_pos_total", 2, position="1"),
    ]
    return json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": result}}
    ).encode()


class Misbehaving:
    """An HTTP server answering the query API the way ``mode`` says: 500, 429 with
    Retry-After, slower than the timeout, malformed JSON. Counts the requests."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                if outer.mode == "500":
                    self._send(500, b'{"status":"error","error":"internal"}')
                elif outer.mode == "429":
                    self.send_response(429)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                elif outer.mode == "slow":
                    time.sleep(3)
                    self._send(200, b'{"status":"success","data":{"result":[]}}')
                elif outer.mode == "then500":
                    if outer.requests > 2:
                        self._send(500, b'{"status":"error","error":"gone"}')
                    else:
                        self._send(200, _matrix(self.path))
                elif outer.mode == "matrix":  # also as an HTTP proxy: the path is a URL
                    outer.paths.append(self.path)
                    self._send(200, _matrix(self.path))
                elif outer.mode == "malformed":
                    self._send(200, b'{"status":"success","data":{"result": [oops')
                else:
                    self._send(404, b"")

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except BrokenPipeError:
                    pass  # the client gave up waiting, as the slow mode intends

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
