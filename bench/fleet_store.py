"""A synthetic fleet's store: many servers pulled for days, written straight through the
store writer (no log, no Prometheus), for ``bench/fleet.py`` and ``tests/test_fleet.py``.

    python bench/fleet_store.py --servers 1000 --days 30 --sample 0.005 --out /tmp/fleet

Each server is a source (a pull of its own), restarted a few times in the window (each
start a run). Every run has an interval every ``--interval`` seconds, all of them made
(a 1,000-server month at 10 s is 259 M intervals): their sums go into ``run_sums``
exactly as the writer would sum them, and only a uniform ``--sample`` of them (the same
intervals in ``spec_decode`` and ``engine_stats``) is stored as rows. ``--sample 1``
stores every row, and the rollups are then the rows' own sums (the tests check so).

Servers come in a few setups (model, method, k, hardware); a few percent are made sick,
each one way: nothing accepted, low acceptance, a collapse from two requests running, a
drop of level mid-run, a KV cache full with requests waiting, dead tail positions.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specscope.schema import TABLES, store_columns  # noqa: E402
from specscope.store.reading import Store  # noqa: E402

START = datetime(2026, 10, 1)
SETUPS = (
    # model, method, k, quantization, hardware, tp, prefix caching, a_1, decay
    ("meta-llama/Llama-3.1-70B-Instruct", "eagle3", 4, None, "H100", 4, True, 0.78, 0.8),
    ("meta-llama/Llama-3.1-8B-Instruct", "eagle3", 3, None, "L40S", 1, True, 0.74, 0.78),
    ("Qwen/Qwen3-32B", "mtp", 2, "fp8", "H100", 2, False, 0.85, 0.75),
    ("deepseek-ai/DeepSeek-V3", "mtp", 1, "fp8", "H200", 8, True, 0.88, 0.8),
    ("Qwen/Qwen3-8B", "ngram", 5, None, "A100", 1, False, 0.45, 0.7),
    ("meta-llama/Llama-3.1-70B-Instruct", "draft_model", 5, "awq", "A100", 4, True, 0.7, 0.78),
)
# What makes a server sick, and how many are (the rest are healthy).
SICKNESS = (
    ("zero", 0.01),
    ("low", 0.03),
    ("collapse", 0.02),
    ("drift", 0.02),
    ("kv_full", 0.01),
    ("dead_tail", 0.02),
    ("prefix_hurts", 0.01),
)


@dataclass
class Fleet:
    servers: int = 1000
    days: float = 30
    interval_s: int = 10
    sample: float = 0.005
    restarts: float = 2.0  # per server in the window, on average
    seed: int = 0
    every_sickness: bool = False  # server i has the i-th sickness in turn (for tests)
    per_source: int = 1  # servers per source: 1, a pull per server; more, a pull per cluster
    commits: int = 1  # more: each source's rows committed in this many pulls, by time


def source_id(server: int) -> str:
    return "s" + hashlib.sha1(f"fleet-{server}".encode()).hexdigest()[:10]


def _sickness(rng: np.random.Generator) -> str | None:
    draw, edge = rng.random(), 0.0
    for name, share in SICKNESS:
        edge += share
        if draw < edge:
            return name
    return None


def _run(
    rng: np.random.Generator, n: int, setup: tuple[Any, ...], sick: str | None
) -> dict[str, np.ndarray]:
    """Every interval of one run, as arrays."""
    _, _, k, *_, a1, decay = setup
    running = np.clip(rng.poisson(6, n), 0, 64)
    running[rng.random(n) < 0.15] = 1
    drafts = (running * rng.integers(8, 14, n)).astype(np.int64)
    level = np.full(n, 1.0)
    if sick == "drift":
        level[n // 2 :] = 0.45
    if sick == "collapse":
        level[running >= 2] = 0.25
    hit = np.clip(rng.normal(0.4, 0.15, n), 0, 1) if setup[6] else np.full(n, np.nan)
    if sick == "prefix_hurts" and setup[6]:
        level = np.clip(1.4 - 1.5 * hit, 0.1, 1.0)
    curve = a1 * decay ** np.arange(k)
    if sick == "zero":
        curve[:] = 0.0
    elif sick == "low":
        curve = 0.25 * curve
    elif sick == "dead_tail" and k > 1:
        curve[k // 2 :] = 0.003
    noise = rng.normal(1.0, 0.05, n)
    rate = np.clip(np.outer(level * noise, curve), 0.0, 1.0)
    per_pos = np.floor(drafts[:, None] * rate + rng.random((n, k))).astype(np.int64)
    per_pos = np.minimum.accumulate(np.minimum(per_pos, drafts[:, None]), axis=1)
    waiting = np.where(rng.random(n) < 0.05, rng.integers(1, 8, n), 0)
    kv = np.clip(0.3 + running / 40 + rng.normal(0, 0.05, n), 0, 0.94)
    if sick == "kv_full":
        full = rng.random(n) < 0.4
        kv[full], waiting[full] = 0.97, rng.integers(1, 20, int(full.sum()))
    return {
        "running": running,
        "waiting": waiting,
        "drafts": drafts,
        "per_pos": per_pos,
        "kv": kv,
        "hit": hit,
        "gen": running * rng.normal(40, 2, n) * (1 + per_pos.sum(axis=1) / np.maximum(drafts, 1)),
    }


def _rollup(run_id: str, iv: dict[str, np.ndarray], k: int, ts: np.ndarray) -> dict[str, Any]:
    """The ``run_sums`` row of every interval of the run (``acceptance.sums``)."""
    drafts, per_pos = iv["drafts"], iv["per_pos"]
    n = len(drafts)
    accepted = int(per_pos.sum())
    return {
        "run_id": run_id,
        "records": n,
        "draft_tokens": int(drafts.sum()) * k,
        "draft_tokens_n": n,
        "accepted_tokens": accepted,
        "accepted_tokens_n": n,
        "drafts": int(drafts.sum()),
        "drafts_n": n,
        "acc_with_drafts": accepted,
        "tau_sum": 0.0,
        "tau_n": 0,
        "first_ts": ts[0].item(),
        "last_ts": ts[-1].item(),
        "position_counts": [int(v) for v in per_pos.sum(axis=0)],
        "position_drafts": [int(drafts.sum())] * k,
        "k_values": [k],
        "k_records": [n],
    }


def _rows(
    run_id: str, source: str, iv: dict[str, np.ndarray], k: int, ts: np.ndarray, keep: np.ndarray
) -> tuple[pl.DataFrame, pl.DataFrame]:
    per_pos = iv["per_pos"][keep]
    drafts = iv["drafts"][keep]
    at = pl.Series("ts", ts[keep]).cast(pl.Datetime("ms"))
    n = len(drafts)
    spec = pl.DataFrame(
        {
            "source": [source] * n,
            "ts": at,
            "run_id": [run_id] * n,
            "engine": pl.Series([0] * n, dtype=pl.Int32),
            "format": ["prometheus"] * n,
            "k": pl.Series([k] * n, dtype=pl.Int32),
            "drafts": drafts,
            "draft_tokens": drafts * k,
            "accepted_tokens": per_pos.sum(axis=1),
            "accepted_per_pos": per_pos.tolist(),
            "counts": ["interval"] * n,
        }
    )
    hit = iv["hit"][keep]
    stats = pl.DataFrame(
        {
            "source": [source] * n,
            "ts": at,
            "run_id": [run_id] * n,
            "engine": pl.Series([0] * n, dtype=pl.Int32),
            "format": ["prometheus"] * n,
            "generation_throughput": iv["gen"][keep],
            "running_reqs": iv["running"][keep],
            "waiting_reqs": iv["waiting"][keep],
            "kv_cache_usage": iv["kv"][keep],
            "prefix_cache_hit_rate": pl.Series(hit).fill_nan(None),
        }
    )
    return store_columns(spec, "spec_decode"), store_columns(stats, "engine_stats")


def _server(
    fleet: Fleet, server: int, sid: str, source: str, ordinals: Iterator[int]
) -> Iterator[tuple[dict[str, Any], dict[str, Any], pl.DataFrame, pl.DataFrame]]:
    """Each run of one server: its runs row, rollup and sampled rows."""
    for run, iv, k, ts, keep in _server_runs(fleet, server, sid, source, ordinals):
        spec, stats = _rows(run["run_id"], source, iv, k, ts, keep)
        yield run, _rollup(run["run_id"], iv, k, ts), spec, stats


def _server_runs(
    fleet: Fleet, server: int, sid: str, source: str, ordinals: Iterator[int]
) -> Iterator[tuple[dict[str, Any], dict[str, np.ndarray], int, np.ndarray, np.ndarray]]:
    """Each run of one server: its runs row, every interval, k, times and the sample kept."""
    rng = np.random.default_rng([fleet.seed, server])
    setup = SETUPS[server % len(SETUPS)]
    turn = server % (len(SICKNESS) + 1)
    sick = _sickness(rng)
    if fleet.every_sickness:
        sick = SICKNESS[turn][0] if turn < len(SICKNESS) else None
    total = int(fleet.days * 86400 // fleet.interval_s)
    cuts = np.sort(rng.choice(np.arange(1, total), size=rng.poisson(fleet.restarts), replace=False))
    bounds = [0, *cuts.tolist(), total]
    for a, b in itertools.pairwise(bounds):
        n = b - a
        if n < 2:
            continue
        ordinal = next(ordinals)
        run_id = f"{sid}-{ordinal}"
        ts = np.datetime64(START, "ms") + (np.arange(a, b) * fleet.interval_s * 1000).astype(
            "timedelta64[ms]"
        )
        iv = _run(rng, n, setup, sick)
        keep = rng.random(n) < fleet.sample if fleet.sample < 1 else np.ones(n, bool)
        model, method, k, quant, hardware, tp, caching, *_ = setup
        run = {
            "run_id": run_id,
            "source": source,
            "ordinal": ordinal,
            "first_ts": ts[0].item(),
            "last_ts": ts[-1].item(),
            "server": "vllm",
            "model": model,
            "spec_method": method,
            "k": k,
            "quantization": quant,
            "hardware": hardware,
            "tensor_parallel_size": tp,
            "enable_prefix_caching": caching,
            "spec_records": n,
            "stats_records": n,
            "events": 0,
            "label": f"server-{server:04d}",
            "config": json.dumps({"sick": sick}),
        }
        yield run, iv, k, ts, keep


def write_fleet(path: Path, fleet: Fleet) -> dict[str, int]:
    """Write the fleet's store at ``path`` (one ingest); how many runs, intervals and rows."""
    if fleet.commits > 1:
        return _write_in_pulls(path, fleet)
    store = Store(path)
    counts = {"servers": fleet.servers, "runs": 0, "intervals": 0, "rows": 0}
    sources = []
    with store.writer() as w:
        for first in range(0, fleet.servers, fleet.per_source):
            servers = range(first, min(first + fleet.per_source, fleet.servers))
            sid = source_id(first)
            source = (
                f"http://prometheus.fleet:9090#instance=server-{first:04d}:8000"
                if fleet.per_source == 1
                else f"http://prometheus.fleet:9090#cluster={first // fleet.per_source}"
            )
            ordinals = itertools.count(1)
            runs: list[dict[str, Any]] = []
            sums: list[dict[str, Any]] = []
            specs: list[pl.DataFrame] = []
            stats: list[pl.DataFrame] = []
            for server in servers:
                for run, rollup, spec, stat in _server(fleet, server, sid, source, ordinals):
                    runs.append(run)
                    sums.append(rollup)
                    specs.append(spec)
                    stats.append(stat)
                    counts["intervals"] += rollup["records"]
                    counts["rows"] += spec.height
            counts["runs"] += len(runs)
            table = pa.Table.from_pylist(sums, schema=TABLES["run_sums"])
            w.add_parts("spec_decode", sid, specs, run_sums=lambda t=table: t)  # type: ignore[misc]
            w.add_parts("engine_stats", sid, stats)
            w.add("runs", sid, runs)
            sources.append(
                {
                    "source_id": sid,
                    "path": source,
                    "kind": "prometheus",
                    "spec_records": sum(r["spec_records"] for r in runs),
                    "stats_records": sum(r["stats_records"] for r in runs),
                    "runs": len(runs),
                    "ingest_id": w.ingest_id,
                    "ingested_at": datetime.now(),
                }
            )
        w.replace_sources(sources)
    return counts


def _write_in_pulls(path: Path, fleet: Fleet) -> dict[str, int]:
    """Each source's rows committed in ``fleet.commits`` pulls, each of a slice of the
    window (its rows, and the rollups of its intervals), a source after another: the
    files a pull each that a store on object storage gets (a folder's newest file would
    take them: ``writing.GROW_ROWS`` is set to 0 here, as a file never grows there)."""
    from specscope.store import writing

    writing.GROW_ROWS = 0
    store = Store(path)
    counts = {"servers": fleet.servers, "runs": 0, "intervals": 0, "rows": 0, "commits": 0}
    total = int(fleet.days * 86400 // fleet.interval_s)
    edges = np.datetime64(START, "ms") + (
        np.linspace(0, total, fleet.commits + 1).astype(np.int64) * fleet.interval_s * 1000
    ).astype("timedelta64[ms]")
    for first in range(0, fleet.servers, fleet.per_source):
        sid = source_id(first)
        source = f"http://prometheus.fleet:9090#cluster={first}"
        ordinals = itertools.count(1)
        runs: list[dict[str, Any]] = []
        sums: list[list[dict[str, Any]]] = [[] for _ in range(fleet.commits)]
        specs: list[list[pl.DataFrame]] = [[] for _ in range(fleet.commits)]
        stats: list[list[pl.DataFrame]] = [[] for _ in range(fleet.commits)]
        for server in range(first, min(first + fleet.per_source, fleet.servers)):
            for run, iv, k, ts, keep in _server_runs(fleet, server, sid, source, ordinals):
                runs.append(run)
                counts["intervals"] += len(ts)
                at = np.searchsorted(ts, edges)
                for c, (a, b) in enumerate(itertools.pairwise(at.tolist())):
                    if b - a < 1:
                        continue
                    part = {name: v[a:b] for name, v in iv.items()}
                    sums[c].append(_rollup(run["run_id"], part, k, ts[a:b]))
                    spec, stat = _rows(run["run_id"], source, part, k, ts[a:b], keep[a:b])
                    specs[c].append(spec)
                    stats[c].append(stat)
                    counts["rows"] += spec.height
        counts["runs"] += len(runs)
        for c in range(fleet.commits):
            if not sums[c]:
                continue
            table = pa.Table.from_pylist(sums[c], schema=TABLES["run_sums"])
            with store.writer() as w:
                w.add_parts("spec_decode", sid, specs[c], run_sums=lambda t=table: t)  # type: ignore[misc]
                w.add_parts("engine_stats", sid, stats[c])
                w.add("runs", sid, [r for r in runs if r["first_ts"] < edges[c + 1].item()])
                w.replace_sources(
                    [
                        {
                            "source_id": sid,
                            "path": source,
                            "kind": "prometheus",
                            "runs": len(runs),
                            "ingest_id": w.ingest_id,
                            "ingested_at": datetime.now(),
                        }
                    ]
                )
            counts["commits"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the store to make (new)")
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--interval", type=int, default=10, help="seconds between intervals")
    parser.add_argument("--sample", type=float, default=0.005, help="share of rows stored")
    parser.add_argument("--restarts", type=float, default=2.0, help="per server, on average")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--per-source", type=int, default=1, help="servers per source (a pull of a cluster)"
    )
    parser.add_argument(
        "--commits",
        type=int,
        default=1,
        help="each source's rows in this many pulls by time, a file each (object storage's way)",
    )
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"{args.out} exists: give a new folder")
    fleet = Fleet(
        args.servers,
        args.days,
        args.interval,
        args.sample,
        args.restarts,
        args.seed,
        per_source=args.per_source,
        commits=args.commits,
    )
    started = time.perf_counter()
    counts = write_fleet(args.out, fleet)
    took = time.perf_counter() - started
    print(json.dumps({**counts, "seconds": round(took, 1), "store": str(args.out)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["Fleet", "source_id", "write_fleet"]
