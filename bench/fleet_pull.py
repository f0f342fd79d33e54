"""`specscope pull` of a fleet, whole and in chunks of instances: time and peak memory.

    python bench/fleet_pull.py --servers 100,400 --hours 2 --chunks none,2000,500

For each fleet size, backfills a real Prometheus (``promtool tsdb create-blocks-from
openmetrics``, the counters of ``bench/pull.py``: 7 series a server at a 15 s scrape
interval) and starts it on 127.0.0.1; then runs each pull in a process of its own (a fresh
store each time) and reports its wall time, CPU seconds (user + system, from wait4), peak
RSS, requests and the rows stored. ``none`` is the unchunked pull (``chunk_series=None``).
Needs ``prometheus`` and ``promtool`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from pull import STEP_S, K, _port, openmetrics  # bench/pull.py

_PULL = """
import json, sys
from datetime import datetime
from specscope.prometheus import pull as pulling
from specscope.prometheus.pull import pull
url, store, start, end, chunk, span_mb = sys.argv[1:7]
if span_mb:
    pulling.SPAN_BYTES = int(float(span_mb) * (1 << 20))
r = pull(url, store=store, start=datetime.fromisoformat(start), end=datetime.fromisoformat(end),
         chunk_series=None if chunk == "none" else int(chunk))
# This process's own peak (VmHWM): wait4's ru_maxrss counts the parent's before exec.
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print(json.dumps({"requests": r.requests, "samples": r.samples, "added": r.added,
                  "failed": r.failed, "notes": r.notes, "hwm_kb": int(hwm)}))
"""


def _prometheus(work: Path, servers: int, start: int, end: int) -> tuple[subprocess.Popen, str]:
    (work / "data.om").write_text(openmetrics(start, end, servers))
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
    (work / "data.om").unlink()
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
    for _ in range(300):
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1):
                break
        except OSError:
            time.sleep(0.2)
    return proc, url


def _measure(
    url: str, store: Path, start: datetime, end: datetime, chunk: str, span_mb: str
) -> dict:
    t0 = time.perf_counter()
    times = [start.isoformat(), end.isoformat()]
    proc = subprocess.Popen(
        [sys.executable, "-c", _PULL, url, str(store), *times, chunk, span_mb],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status:
        raise SystemExit(f"the pull failed (status {status})")
    report = json.loads(out)
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": report["hwm_kb"] / 1024,
        **report,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="100,400", help="fleet sizes, comma-separated")
    parser.add_argument("--hours", type=float, default=2)
    parser.add_argument("--chunks", default="none,2000,500", help="chunk_series values")
    parser.add_argument("--span-mb", default="", help="SPAN_BYTES in MB (default: pull's)")
    args = parser.parse_args(argv)
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not on PATH (apt-get install -y prometheus)")
    end_t = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    start_t = end_t - timedelta(hours=args.hours)
    start, end = int(start_t.timestamp()), int(end_t.timestamp())
    print(
        f"{args.hours:g} h at {STEP_S} s, {K + 3} series a server (load average "
        f"{os.getloadavg()[0]:.1f} at the start)\n"
    )
    print(
        "| servers | series | chunk_series | requests | samples | rows | wall s | CPU s "
        "| peak RSS MB |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for servers in (int(s) for s in args.servers.split(",")):
        work = Path(tempfile.mkdtemp(prefix="specscope-bench-fleet-pull-"))
        proc = None
        try:
            proc, url = _prometheus(work, servers, start, end)
            rows = None
            for chunk in args.chunks.split(","):
                got = _measure(url, work / f"store-{chunk}", start_t, end_t, chunk, args.span_mb)
                added = got["added"].get("spec_decode", 0)
                assert rows is None or added == rows, (added, rows)  # every way, the same rows
                rows = added
                print(
                    f"| {servers:,} | {servers * (K + 3):,} | {chunk} | {got['requests']} | "
                    f"{got['samples']:,} | {added:,} | {got['wall']:.1f} | {got['cpu']:.1f} | "
                    f"{got['rss_mb']:.0f} |",
                    flush=True,
                )
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=10)
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
