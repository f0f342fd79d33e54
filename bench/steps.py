"""Where an ingest's time goes, step by step, in one process (issue 17):

    python bench/steps.py LOG [--polars]

- read: the blocks alone (the core's reader: plain or gunzipped, lines over the limit cut)
- scan: read + the core's classification of every line (Rust, both cores)
- prepare: what the walk gets per block (scan + the plain records typed by polars); it
  runs in a thread beside the walk, so only what the walk waits for adds to the total
- walk: the Python bookkeeping (runs, stretches, lines fed to the line parser), of which
  keep (the bulk rows' engine and stats line), stage (Arrow IPC of each block's rows) and
  lines fed (the disturbed lines, one by one to the line parser: CPU a line)
- write: after the parse, the stage read back, run rows and summaries, Parquet

Timers wrap the functions in place: seconds of wall time, and of the calling thread's CPU
(``time.thread_time``: on a loaded machine the CPU seconds move far less than the wall;
work polars hands to its own threads is not in them). ``--repeat N`` keeps each step's
smallest figure of N ingests.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SPENT: dict[str, float] = defaultdict(float)
CPU: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)


def timed(owner: Any, name: str, label: str) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[label] += time.perf_counter() - start
            CPU[label] += time.thread_time() - cpu
            CALLS[label] += 1

    setattr(owner, name, wrapper)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--polars", action="store_true", help="without the compiled core")
    parser.add_argument("--repeat", type=int, default=1, help="ingests; the least of each step")
    args = parser.parse_args(argv)
    if args.polars:
        os.environ["SPECSCOPE_CORE"] = "0"

    from specscope.logs import bulk, core, ingest, staging
    from specscope.logs.bulkplan import BulkGrammar
    from specscope.logs.definitions import load_definitions
    from specscope.logs.grammar import Grammar
    from specscope.logs.limits import LongLines
    from specscope.logs.source import open_source

    size = args.log.stat().st_size
    if not args.polars:
        plan = BulkGrammar(Grammar(load_definitions()))
        scanner = core.scanner(plan)
        src = open_source(str(args.log))
        start = time.perf_counter()
        blocks = core.blocks(src, bulk.CORE_BLOCK_BYTES, LongLines(1 << 20))
        assert blocks is not None
        n = sum(len(b) for b in blocks)
        read = time.perf_counter() - start
        start = time.perf_counter()
        blocks = core.blocks(src, bulk.CORE_BLOCK_BYTES, LongLines(1 << 20))
        assert blocks is not None
        for b in blocks:
            scanner.scan(b)
        scan = time.perf_counter() - start
        print(f"{args.log.name}: {size / 1e6:,.0f} MB on disk, {n / 1e6:,.0f} MB of text")
        print(f"read {read:.2f} s, read + scan {scan:.2f} s")

    timed(bulk._BulkReader, "prepare", "prepare (thread)")
    timed(bulk._BulkReader, "_walk", "walk")
    timed(bulk._BulkReader, "_keep", "walk: keep")
    timed(staging.Stage, "flush", "walk: stage")
    timed(bulk._Walk, "feed", "walk: lines fed")  # the disturbed lines, to the line parser
    timed(ingest, "parse_source", "parse")
    labels = ("parse", "prepare (thread)", "walk", "walk: keep", "walk: stage", "walk: lines fed")
    fed = 0
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeat):
        SPENT.clear()
        CPU.clear()
        CALLS.clear()
        work = Path(tempfile.mkdtemp(prefix="specscope-steps-"))
        try:
            start, cpu = time.perf_counter(), time.process_time()
            report = ingest.ingest([str(args.log)], store=work / "store")
            SPENT["ingest"] = time.perf_counter() - start
            CPU["ingest"] = time.process_time() - cpu
        finally:
            shutil.rmtree(work, ignore_errors=True)
        report.raise_for_errors()
        fed = CALLS["walk: lines fed"]
        SPENT["write"] = SPENT["ingest"] - SPENT["parse"]
        CPU["write"] = CPU["ingest"] - CPU["parse"] - CPU["prepare (thread)"]
        for label in ("ingest", *labels, "write"):
            was = best.get(label, (float("inf"), float("inf")))
            best[label] = (min(was[0], SPENT[label]), min(was[1], CPU[label]))
    kind = "polars" if args.polars else "core"
    print(f"ingest {best['ingest'][0]:.2f} s wall, {best['ingest'][1]:.2f} s CPU ({kind})")
    for label in labels:
        print(f"  {label}: {best[label][0]:.2f} s wall, {best[label][1]:.2f} s CPU")
    if fed:
        each = best["walk: lines fed"][1] / fed * 1e6
        print(f"  ({fed:,} lines fed to the line parser, {each:.0f} µs of CPU each)")
    print(
        f"  write (after the parse): {best['write'][0]:.2f} s wall, "
        f"{best['write'][1]:.2f} s CPU (the process's rest: the write, polars' own threads)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
