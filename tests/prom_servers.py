"""Real servers on 127.0.0.1 for the Prometheus tests: a vLLM-shaped exporter whose
counters grow at known rates, a real `prometheus` scraping it, a small HTTP server that
misbehaves on purpose, and a hostile one (``Hostile``: huge answers generated as they are
sent, trickles, redirects, Retry-After: 3600, NaN counts, 10^5 model names)."""

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
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol

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
    between two scrapes has exactly the ratios in ``rates`` (RATES). ``restart`` resets
    them. ``odd`` is a value (NaN, inf, -1) the spec-decode counters show at every third
    collection."""

    def __init__(
        self,
        rates: dict[str, dict] | None = None,
        running: dict[str, int] | None = None,
        odd: float | None = None,
    ) -> None:
        self.started = time.time()
        self.restarts = 0
        self.rates = rates or RATES
        self.running = running or RUNNING
        self.odd = odd
        self.collections = 0

    def restart(self) -> None:
        """A new server: counters start again from zero, and have counted a couple of
        seconds by the next scrape (lower than before, so the drop is visible)."""
        self.started = time.time() - 2.5
        self.restarts += 1

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        n = math.floor(time.time() - self.started)
        self.collections += 1
        odd = self.odd is not None and self.collections % 3 == 0
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
        for engine, r in self.rates.items():
            values = [MODEL, engine]

            def count(rate: int) -> float:
                return self.odd if odd and self.odd is not None else rate * n

            families["drafts"].add_metric(values, count(r["drafts"]))
            families["draft_tokens"].add_metric(values, count(r["draft_tokens"]))
            families["accepted_tokens"].add_metric(values, count(r["accepted"]))
            for position, rate in enumerate(r["per_pos"]):
                per_pos.add_metric([*values, str(position)], count(rate))
            running.add_metric(values, self.running[engine])
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
    """A real prometheus binary scraping ``targets`` every second, on a free port (and
    evaluating ``rules`` every second, when given)."""

    def __init__(
        self, workdir: Path, targets: list[str], *args: str, rules: Path | None = None
    ) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise FileNotFoundError("prometheus")
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            + (f"rule_files: [{json.dumps(str(rules))}]\n" if rules else "")
            + "scrape_configs:\n  - job_name: vllm\n    static_configs:\n"
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


def _query_time(path: str) -> float:
    from urllib.parse import parse_qs, urlsplit

    return float(parse_qs(urlsplit(path).query)["time"][0])


def _matrix(path: str, *, compact: bool = False) -> bytes:
    """A range-vector answer: drafts growing by 10 and accepted by 6 every 5 s up to the
    query's time (k = 2), for one engine; ``compact`` in Prometheus' own layout."""
    at = _query_time(path)
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
    answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return json.dumps(answer, separators=(",", ":") if compact else None).encode()


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
                if "/api/v1/series?" in self.path or "/api/v1/rules?" in self.path:
                    # Not served, as by an old proxy; not counted: a pull reads on unchunked.
                    self._send(404, b"")
                    return
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


_HEAD = b'{"status":"success","data":{"resultType":"matrix","result":['
_DRAFTS = "vllm:spec_decode_num_drafts_total"


def _series(labels: dict[str, str], values: list[tuple[float, str]]) -> bytes:
    """One series in Prometheus' own layout (Go's encoder: no spaces)."""
    metric = json.dumps(labels, separators=(",", ":"))
    pairs = ",".join(f'[{t:.3f},"{v}"]' for t, v in values)
    return b'{"metric":' + metric.encode() + b',"values":[' + pairs.encode() + b"]}"


def _honest_items(path: str) -> bytes:
    """The series of ``_matrix``'s answer, as items of a result list."""
    body = _matrix(path, compact=True)
    return body[len(_HEAD) : -len(b"]}}")]


class Hostile:
    """An HTTP server on 127.0.0.1 that is honest for a while, then hostile as ``mode``
    says. Prometheus queries for a time before ``good_before`` and the first ``good_polls``
    GETs of ``/metrics`` get an honest answer (``_matrix``, and the exposition of
    ``exporter``); every other request gets the hostile one:

    - ``label``: an answer with a series whose model_name is ``size`` bytes long
    - ``huge``: an answer (or /metrics body) of ``size`` bytes
    - ``trickle``: headers, then one byte a second; ``trickle_headers``: the headers so
    - ``retry_after``: 429 with Retry-After: 3600; ``retry_once``: 429 with Retry-After: 1
      on the first hostile request, honest after it
    - ``redirect``: 302 to ``redirect_to`` (the same path)
    - ``nan``: drafts counters with NaN, +Inf, -Inf and negative samples, and a real restart
    - ``models``: ``size`` series (or /metrics lines), each with a model_name of its own

    Huge bodies are generated as they are sent (never held), with no Content-Length: the
    client learns the size only by reading."""

    def __init__(
        self,
        mode: str,
        *,
        good_before: float = 0.0,
        good_polls: int = 0,
        size: int = 0,
        redirect_to: str = "",
        exporter: VllmExporter | None = None,
    ) -> None:
        self.mode = mode
        self.good_before = good_before
        self.good_polls = good_polls
        self.size = size
        self.redirect_to = redirect_to
        self.exporter = exporter or VllmExporter()
        self.registry = CollectorRegistry()
        self.registry.register(self.exporter)  # type: ignore[arg-type]
        self.requests = 0
        self.polls = 0
        self.hostile = 0
        self.headers: list[dict[str, str]] = []
        self.sent = 0  # bytes of hostile bodies written
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                outer.headers.append(dict(self.headers))
                try:
                    if self.path.startswith("/metrics"):
                        outer.polls += 1
                        if outer.polls <= outer.good_polls:
                            self._send(200, outer.exposition(), "text/plain")
                            return
                    elif _query_time(self.path) < outer.good_before:
                        self._send(200, _matrix(self.path, compact=True))
                        return
                    outer.hostile += 1
                    outer.misbehave(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up: what a hostile server wants tested

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def misbehave(self, h: BaseHTTPRequestHandler) -> None:
        metrics = h.path.startswith("/metrics")
        mode = self.mode
        if mode == "retry_once" and self.hostile > 1:
            body = self.exposition() if metrics else _matrix(h.path, compact=True)
            h.send_response(200)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        if mode in ("retry_after", "retry_once"):
            h.send_response(429)
            h.send_header("Retry-After", "3600" if mode == "retry_after" else "1")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if mode == "redirect":
            h.send_response(302)
            h.send_header("Location", self.redirect_to + h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if mode == "trickle_headers":
            h.wfile.write(b"HTTP/1.0 200 OK\r\n")
            for byte in b"X-Slow: " + b"a" * 10_000:
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
                time.sleep(1)
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/plain" if metrics else "application/json")
        if mode == "trickle":
            h.send_header("Content-Length", "1000000")
        h.end_headers()
        if mode == "trickle":
            for _ in range(1_000_000):
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(1)
            return
        for part in self._body(h.path, metrics):
            h.wfile.write(part)
            self.sent += len(part)

    def _body(self, path: str, metrics: bool) -> Iterator[bytes]:
        """The hostile body, a part at a time."""
        if self.mode == "huge" and metrics:
            line = b'vllm:num_requests_running{model_name="m",engine="0"} 1.0\n'
            yield from _repeat(line, self.size)
            return
        if self.mode == "models" and metrics:
            n = math.floor(time.time() - self.exporter.started)
            yield b"# TYPE vllm:spec_decode_num_drafts counter\n"
            for i in range(self.size):
                yield (
                    f'vllm:spec_decode_num_drafts_total{{model_name="model-{i:06d}",'
                    f'engine="0"}} {10 * n}\n'
                ).encode()
            return
        at = _query_time(path)
        labels = {"__name__": _DRAFTS, "engine": "0", "instance": "x:1", "model_name": "m"}
        if self.mode == "label":
            yield _HEAD + b'{"metric":{"__name__":"' + _DRAFTS.encode() + b'","engine":"1",'
            yield b'"instance":"x:1","model_name":"'
            yield from _repeat(b"A" * 1024, self.size)
            yield b'"},"values":[[' + f'{at - 5:.3f},"1"],[{at:.3f},"2"'.encode() + b"]]},"
            yield _honest_items(path) + b"]}}"
        elif self.mode == "huge":
            yield _HEAD + b'{"metric":' + json.dumps(labels, separators=(",", ":")).encode()
            yield b',"values":['
            pair = f'[{at:.3f},"1"],'.encode()
            yield from _repeat(pair, self.size)
            yield f'[{at:.3f},"1"]]}}]}}}}'.encode()
        elif self.mode == "nan":
            # drafts: 0, 10, NaN, 20, +Inf, 30, -1, 40, -Inf, 50, then a restart to 5
            # (k = 2, half accepted): 50 drafts, then 5 since the restart.
            times = [at - 51 + 5 * i for i in range(11)]  # the last before the window end
            drafts = ["0", "10", "NaN", "20", "+Inf", "30", "-1", "40", "-Inf", "50", "5"]

            def scaled(factor: int) -> list[str]:
                return [str(int(v) * factor) if v.isdigit() else v for v in drafts]

            items = [
                _series(labels, list(zip(times, drafts, strict=True))),
                _series(
                    {**labels, "__name__": "vllm:spec_decode_num_draft_tokens_total"},
                    list(zip(times, scaled(2), strict=True)),
                ),
                _series(
                    {**labels, "__name__": "vllm:spec_decode_num_accepted_tokens_total"},
                    list(zip(times, drafts, strict=True)),
                ),
            ]
            yield _HEAD + b",".join(items) + b"]}}"
        elif self.mode == "models":
            one = (
                b'{"metric":{"__name__":"' + _DRAFTS.encode() + b'","engine":"0",'
                b'"instance":"x:1","model_name":"model-%06d"},"values":[[%.3f,"%d"],[%.3f,"%d"]]}'
            )
            items = (one % (i, at - 10, i, at - 5, i + 10) for i in range(self.size))
            yield _HEAD + b",".join(items) + b"]}}"
        else:
            raise ValueError(self.mode)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _repeat(unit: bytes, size: int) -> Iterator[bytes]:
    """``size`` bytes (about) of ``unit`` over and over, in 1 MiB parts."""
    part = unit * max(1, (1 << 20) // len(unit))
    for _ in range(max(1, size // len(part))):
        yield part


class Exposition(Protocol):
    """What ``serving`` serves: a /metrics body made anew for each request."""

    def body(self) -> bytes: ...


@contextmanager
def serving(exporter: Exposition) -> Iterator[str]:
    """``exporter``'s bodies on 127.0.0.1 for the block; its ``host:port``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = exporter.body()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
