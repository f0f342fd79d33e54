"""What an ingest spends after the parse, step by step (issue 17, ninth pass):

    python bench/after_parse.py LOG [--repeat 3] [--fine]

Each step is the function that does it, wrapped where it is looked up; its figure is the
process's CPU seconds (``time.process_time``: polars' and pyarrow's threads included, which
a thread's clock would miss) spent in it less what the steps it calls spent (each CPU
second is counted once, in the innermost step). The parse is one line (the core's scan
and its prepare thread, the walk, the stage written); the rest are the steps between the
parse's end and the commit: the stage read back with the finishing steps and the sums
(``Finished.parts``), the store's columns, the by-day split, Arrow and Parquet, fsync,
the commit's footer reads and hashes. ``--fine`` splits the read-back into the stage's
IPC read, polars' collects and the sums. ``--repeat N``: the least of each step over N
ingests in this process (imports and definitions paid before the first).

Run it from the checkout to measure (``cd /tmp/wt && python bench/after_parse.py ...``):
the checkout's ``specscope`` is imported, not the installed one.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CPU: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)
_STACK: list[list[Any]] = []  # [label, CPU at its start, CPU of the steps it called]
PARSE = "parse (scan, prepare thread, walk, stage written)"


def _enter(label: str) -> None:
    if label.startswith("  "):  # a fine step: named after the step it is part of
        outer = next((f[0] for f in reversed(_STACK) if not f[0].startswith("  ")), "")
        label = f"  {outer.split()[0].rstrip(':,')}: {label.strip()}"
    _STACK.append([label, time.process_time(), 0.0])


def _leave() -> None:
    label, start, inner = _STACK.pop()
    spent = time.process_time() - start
    CPU[label] += spent - inner
    CALLS[label] += 1
    if _STACK:
        _STACK[-1][2] += spent


def timed(owner: Any, name: str, label: str) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _enter(label)
        try:
            return original(*args, **kwargs)
        finally:
            _leave()

    setattr(owner, name, wrapper)


def timed_items(owner: Any, name: str, label: str) -> None:
    """A generator's steps: the CPU of making each item, not of what its caller does."""
    original: Callable[..., Iterator[Any]] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        items = original(*args, **kwargs)
        while True:
            _enter(label)
            try:
                item = next(items)
            except StopIteration:
                return
            finally:
                _leave()
            yield item

    setattr(owner, name, wrapper)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--repeat", type=int, default=1, help="ingests; the least of each step")
    parser.add_argument("--fine", action="store_true", help="the read-back in its parts")
    args = parser.parse_args(argv)

    import polars as pl
    import pyarrow.parquet as pq

    from specscope.logs import assemble, ingest
    from specscope.logs.grammar import default_grammar
    from specscope.store import commit, days, durable, rollup, writing

    default_grammar()  # the definitions compiled once, before the first ingest
    timed(ingest, "parse_source", PARSE)
    timed_items(assemble.Finished, "parts", "stage read back, finishing steps, sums")
    timed(assemble.Finished, "_sum", "runs: tables not read yet")
    timed(assemble.Finished, "run_sums", "run_sums rows")
    timed(ingest, "store_columns", "store columns")
    timed_items(ingest, "_flagged", "rows with problems, line filter")
    timed(days.Folders, "add", "by-day split")
    timed(days.Folders, "end", "by-day split")
    timed(pl.DataFrame, "to_arrow", "polars to Arrow")
    timed(pq.ParquetWriter, "write_table", "Parquet encoding")
    timed(pq.ParquetWriter, "__init__", "Parquet files opened, closed")
    timed(pq.ParquetWriter, "close", "Parquet files opened, closed")
    timed(pq, "write_table", "Parquet of runs, run_sums, sources")
    timed(writing.StoreWriter, "add_parts", "add_parts' own (casts, groups)")
    timed(durable, "sync_file", "fsync")
    timed(durable, "sync_dir", "fsync")
    timed(commit, "describe", "commit: footers read")
    timed(commit, "sha256_of", "commit: SHA-256 of the files")
    timed(commit, "prepare", "commit: folders")
    timed(commit, "write_commit", "commit: manifest")
    timed(commit, "move_in", "commit: files moved in")
    timed(writing.StoreWriter, "commit", "commit: the rest")
    timed(ingest, "_ingest_one", "source: opened, identified, its report")
    timed(ingest, "ingest", "store: opened, locked")
    if args.fine:
        timed(pl, "read_ipc", "  stage IPC read")
        timed(assemble._Aggregates, "add", "  spans, k counts")
        timed(rollup.RunSums, "add", "  run sums")
        timed(pl.LazyFrame, "collect", "  collects (the finishing steps)")
        timed(pl.DataFrame, "filter", "  filters")

    best: dict[str, float] = {}
    totals = []
    for _ in range(args.repeat):
        CPU.clear()
        work = Path(tempfile.mkdtemp(prefix="specscope-after-"))
        try:
            cpu, wall = time.process_time(), time.perf_counter()
            report = ingest.ingest([str(args.log)], store=work / "store")
            totals.append((time.process_time() - cpu, time.perf_counter() - wall))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        report.raise_for_errors()
        for label, spent in CPU.items():
            best[label] = min(best.get(label, float("inf")), spent)
    print(f"{args.log.name}: {args.log.stat().st_size / 1e6:,.0f} MB")
    print("ingest CPU s: " + ", ".join(f"{c:.2f}" for c, _ in totals), end="")
    print(" (wall s: " + ", ".join(f"{w:.2f}" for _, w in totals) + ")")
    after = 0.0
    for label, spent in sorted(best.items(), key=lambda kv: -kv[1]):
        print(f"  {spent:6.3f}  {label}")
        if "parse" not in label.split(":")[0]:
            after += spent
    print(f"  {after:6.3f}  after the parse, in all (each step's least)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
