"""`specscope pull` against the raw Prometheus HTTP requests for the same data.

    python bench/pull.py --hours 24 --engines 4

Backfills a real Prometheus (``promtool tsdb create-blocks-from openmetrics``) with vLLM's
spec-decode counters for ``--engines`` engines over ``--hours`` at a 15 s scrape interval,
starts it on 127.0.0.1, then times (a) the same range-vector requests that a pull makes,
issued with urllib and decoded with json, nothing more, and (b) ``specscope.pull`` into a
fresh store (requests, reset-aware intervals, Parquet). Needs ``prometheus`` and
``promtool`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from specscope.prometheus.pull import DEFAULT_WINDOW_S, LOOKBACK_S, pull, series_selector

STEP_S = 15
K = 4


def openmetrics(start: int, end: int, engines: int) -> str:
    """Counters growing at fixed rates per engine, one sample every STEP_S seconds."""
    families: dict[str, list[str]] = {}
    model = "Qwen/Qwen3-8B"
    for e in range(engines):
        labels = f'engine="{e}",model_name="{model}",job="vllm",instance="gpu{e}:8000"'
        for n, t in enumerate(range(start, end + 1, STEP_S)):
            drafts = 10 * STEP_S * n
            for name, value, extra in [
                ("vllm:spec_decode_num_drafts", drafts, ""),
                ("vllm:spec_decode_num_draft_tokens", K * drafts, ""),
                ("vllm:spec_decode_num_accepted_tokens", 2 * drafts, ""),
                *[
                    (
                        "vllm:spec_decode_num_accepted_tokens_per_pos",
                        drafts * (K - i) // K,
                        f',position="{i}"',
                    )
                    for i in range(K)
                ],
            ]:
                families.setdefault(name, []).append(f"{name}_total{{{labels}{extra}}} {value} {t}")
    out = []
    for name, samples in families.items():
        out.append(f"# TYPE {name} counter")
        out.extend(samples)
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raw_requests(url: str, start: float, end: float) -> tuple[int, int]:
    """The requests a pull makes, and nothing else: (requests, samples)."""
    selector = series_selector(None)
    edge, requests, samples = start - LOOKBACK_S, 0, 0
    while edge < end:
        stop = min(end, edge + DEFAULT_WINDOW_S)
        query = urllib.parse.urlencode(
            {"query": f"{selector}[{max(1, round(stop - edge))}s]", "time": f"{stop:.3f}"}
        )
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=60) as r:
            body = json.loads(r.read())
        requests += 1
        samples += sum(len(s["values"]) for s in body["data"]["result"])
        edge = stop
    return requests, samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24)
    parser.add_argument("--engines", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", help="write a cProfile of one more pull to this file")
    args = parser.parse_args(argv)
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not on PATH (apt-get install -y prometheus)")
    work = Path(tempfile.mkdtemp(prefix="specscope-bench-pull-"))
    proc = None
    try:
        end_t = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
        start_t = end_t - timedelta(hours=args.hours)
        start, end = int(start_t.timestamp()), int(end_t.timestamp())
        (work / "data.om").write_text(openmetrics(start, end, args.engines))
        subprocess.run(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                str(work / "data.om"),
                str(work / "tsdb"),
            ],
            check=True,
            capture_output=True,
        )
        (work / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")
        port = _port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'tsdb'}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(150):
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        raw_s, pull_s = [], []
        for i in range(args.repeat):
            t0 = time.perf_counter()
            requests, samples = raw_requests(url, start, end)
            raw_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            report = pull(url, store=work / f"store{i}", start=start_t, end=end_t)
            pull_s.append(time.perf_counter() - t0)
        raw, pulled = min(raw_s), min(pull_s)
        if args.profile:
            import cProfile

            cProfile.runctx(
                "pull(url, store=work / 'profiled', start=start_t, end=end_t)",
                globals(),
                {"url": url, "work": work, "start_t": start_t, "end_t": end_t},
                args.profile,
            )
        print(
            f"{args.hours:g} h x {args.engines} engines x {K + 3} series at {STEP_S} s: "
            f"{samples:,} samples in {requests} requests; pull stored "
            f"{report.added.get('spec_decode', 0):,} spec-decode interval rows"
        )
        print()
        print("| step | seconds | × raw HTTP |")
        print("|---|---:|---:|")
        print(f"| raw HTTP requests (urllib + json) | {raw:.2f} | 1.0 |")
        print(f"| specscope.pull into a store | {pulled:.2f} | {pulled / raw:.2f} |")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
