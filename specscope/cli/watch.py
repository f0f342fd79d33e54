"""``watch``: a live view of a server's speculative decoding, from a log being written (its
rotation followed) or from a ``/metrics`` endpoint polled at an interval.

The same parser and detectors as everywhere else: a followed log feeds a ``LineParser`` as
lines arrive; a polled endpoint gives intervals between polls. Findings are printed once,
as they first appear. Ctrl-C ends it with a one-line summary; ``--store`` keeps what it saw.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import polars as pl
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from specscope.acceptance import weighted_acceptance
from specscope.analysis.advise import Advice, advice_of
from specscope.analysis.detectors import findings_of
from specscope.analysis.drafter_cost import costs_in
from specscope.analysis.evidence import evidence_from
from specscope.analysis.findings import Finding
from specscope.analysis.requests import requests_in
from specscope.cli.render import finding_text
from specscope.errors import InputMissingError
from specscope.logs.follow import FollowedLog, FollowedStream
from specscope.logs.ingest import IngestReport, frames
from specscope.logs.parser import LineParser
from specscope.prometheus.intervals import intervals
from specscope.prometheus.scrape import Poller
from specscope.store.sources import source_id as new_source_id
from specscope.thresholds import load_config

RECENT = 6  # intervals in "recent"


@dataclass
class Snapshot:
    """What the view shows."""

    spec: pl.DataFrame
    stats: pl.DataFrame
    findings: list[Finding] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)


class Watcher:
    def __init__(
        self, source: str, *, interval: float = 10.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.source = source
        self.interval = interval
        self.clock = clock
        self.is_url = source.startswith(("http://", "https://"))
        self.is_stdin = source == "-"
        self.source_id = new_source_id("watch", source)
        self.parser = LineParser()
        # Standard input is also spooled to a file, to ingest it when the watch ends.
        self.spool = tempfile.TemporaryFile() if self.is_stdin else None
        self.log: FollowedLog | FollowedStream | None = None
        if self.is_stdin:
            self.log = FollowedStream(sys.stdin.buffer, self.spool)
        elif not self.is_url:
            self.log = FollowedLog(Path(source))
        # Each poll bounded in size and time, series and targets bounded (as in scrape).
        self.poller = Poller(source, timeout=max(1.0, interval)) if self.is_url else None
        self.seen: set[tuple[str, str | None]] = set()
        self.polls = 0
        self.config = load_config()
        if self.log is not None and not self.is_stdin and not Path(source).exists():
            raise InputMissingError("no such file", path=source)

    def step(self) -> Snapshot:
        """Read what is new and return the view's data."""
        if self.poller is not None:
            self._poll()
            got = intervals(self.poller.batch())
            # Each target (instance, model, engine) its own run, as in scrape and pull.
            internal = ("_instance", "_model", "_engine", "_key", "_t")
            spec, stats = (
                _runs_apart(f).drop(internal, strict=False)
                for f in (got.spec_decode, got.engine_stats)
            )
            return Snapshot(spec, stats, [])
        assert self.log is not None
        for number, line in self.log.read():
            self.parser.feed(number, line)
        tables = frames(
            self.parser.snapshot(),
            display=self.source,
            source_id=self.source_id,
            mtime=datetime.now(UTC),
        )
        ev = evidence_from(
            tables["spec_decode"],
            tables["engine_stats"],
            tables["runs"],
            tables["events"],
            tables["bench"],
            config=self.config,
        )
        # What a store's evidence holds beside the rows: the requests (request_acceptance,
        # request_outlier) and the drafter's measured cost (the advice's c).
        rows = tables["spec_decode"].lazy()
        ev.requests = requests_in(rows)
        ev.costs = costs_in(rows, tables["engine_stats"].lazy())
        return Snapshot(ev.spec, tables["engine_stats"], findings_of(ev), advice_of(ev))

    @property
    def ended(self) -> bool:
        """Standard input was closed: nothing more will come."""
        return isinstance(self.log, FollowedStream) and self.log.ended

    def _poll(self) -> None:
        assert self.poller is not None
        self.poller.poll(self.clock())
        self.polls += 1

    def new_findings(self, snap: Snapshot) -> list[Finding]:
        fresh = [f for f in snap.findings if (f.kind, f.run_id) not in self.seen]
        self.seen.update((f.kind, f.run_id) for f in fresh)
        return fresh


def _runs_apart(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows with a ``run_id`` per target: two engines of one server are two runs."""
    if rows.is_empty() or "_key" not in rows.columns:
        return rows
    return rows.with_columns(pl.col("_key").alias("run_id"))


def _rate(rows: pl.DataFrame) -> tuple[float | None, float | None, list[float | None]]:
    if rows.is_empty() or "draft_tokens" not in rows.columns:
        return None, None, []
    agg = weighted_acceptance(rows.with_columns(pl.lit("x").alias("run_id")), ["run_id"])
    row = agg.to_dicts()[0]
    return (
        row.get("acceptance_rate"),
        row.get("mean_acceptance_length"),
        row.get("per_position") or [],
    )


def render(snap: Snapshot, source: str) -> Group:
    spec = snap.spec
    if not spec.is_empty() and "ts" in spec.columns:
        spec = spec.sort([c for c in ("ts", "line") if c in spec.columns], nulls_last=True)
    last = spec.tail(1) if not spec.is_empty() else spec
    recent = spec.tail(RECENT) if not spec.is_empty() else spec
    rate_now, tau_now, _ = _rate(last)
    rate_recent, tau_recent, curve = _rate(recent)
    table = Table(title=f"specscope watch  {source}", expand=False)
    table.add_column("")
    table.add_column("last interval", justify="right")
    table.add_column(f"last {RECENT}", justify="right")
    table.add_row("acceptance rate", _pct(rate_now), _pct(rate_recent))
    table.add_row("mean acceptance length", _num(tau_now), _num(tau_recent))
    stats = snap.stats
    if not stats.is_empty() and "running_reqs" in stats.columns:
        s = stats.tail(1).to_dicts()[0]
        table.add_row(
            "requests running / waiting",
            f"{_count(s.get('running_reqs'))} / {_count(s.get('waiting_reqs'))}",
            "",
        )
        usage = s.get("kv_cache_usage")
        table.add_row("KV cache usage", _pct(usage), "")
    bars = Text()
    for i, a in enumerate(curve, start=1):
        width = 0 if a is None else round(30 * a)
        bars.append(f"  pos {i:2d} {'█' * width}{' ' * (30 - width)} {_pct(a)}\n")
    records = _of(spec.height, "interval") if not spec.is_empty() else "no spec-decode records yet"
    said = Text("".join(f"{_advice_line(a)}\n" for a in snap.advice))
    return Group(table, Text(f"per-position acceptance (last {RECENT}), {records}"), bars, said)


def _advice_line(a: Advice) -> str:
    """The cost model's word on a run so far (``advise``): its best k, or off."""
    head = f"advice, run {a.run_id} (c={a.cost_ratio}, {a.cost_source}): "
    best = next(p for p in a.curve if p["k"] == a.best_k)
    if a.off:
        lo, hi = a.speedup_interval or (0.0, 0.0)
        return head + (
            f"speculation should be off at this load: the best k' ({a.best_k}) is at "
            f"{best['speedup']:.3f}x ({a.coverage} {lo:.3f}-{hi:.3f})"
        )
    if not a.pays:
        return head + f"no k' beats speculation off ({best['speedup']:.3f}x at best)"
    return head + f"best k' {a.best_k}, {best['speedup']:.3f}x expected"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _of(count: int, word: str) -> str:
    return f"{count:,} {word if count == 1 else word + 's'}"


def _count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def watch(
    source: str,
    *,
    interval: float = 10.0,
    console: Console | None = None,
    store: str | os.PathLike[str] | None = None,
    max_steps: int | None = None,
) -> str:
    """Run the live view until Ctrl-C (or ``max_steps``); returns the summary line."""
    console = console or Console()
    watcher = Watcher(source, interval=interval)
    snap = Snapshot(pl.DataFrame(), pl.DataFrame())
    steps = 0
    try:
        with Live(
            render(snap, source), console=console, refresh_per_second=4, transient=False
        ) as live:
            while max_steps is None or steps < max_steps:
                snap = watcher.step()
                for f in watcher.new_findings(snap):
                    live.console.print(finding_text(f))
                live.update(render(snap, source))
                steps += 1
                if watcher.ended:
                    break
                if max_steps is None or steps < max_steps:
                    time.sleep(interval)
    except KeyboardInterrupt:
        pass
    rate, tau, _ = _rate(snap.spec)
    stored: str | None = None
    if store is not None and not watcher.is_url:
        from specscope.logs.ingest import ingest

        if watcher.spool is not None:
            report = _ingest_spooled(watcher.spool, store)
        else:
            report = ingest(source, store=store)
        stored = next((s.source_id for s in report.sources if s.source_id), None)
    summary = (
        f"watched {source}: {_of(snap.spec.height, 'interval')}, acceptance {_pct(rate)}, "
        f"mean acceptance length {_num(tau)}, {_of(len(watcher.seen), 'finding')}"
    )
    return summary + _store_names(watcher, stored)


def _store_names(watcher: Watcher, stored: str | None) -> str:
    """The store's names for the runs the findings named. A watch names runs before the
    log is whole, and a log's id in the store is the hash of its bytes when it is
    ingested: the same run (the same place in the log) has its number in both."""
    runs = sorted({run for _, run in watcher.seen if run}, key=_ordinal)
    if not runs:
        return ""
    if stored is None:
        return " (run ids are the watch's own: --store names them in a store)"
    named = ", ".join(f"{run} is {stored}-{_ordinal(run)}" for run in runs)
    return f"; in the store {named} (specscope advise --run {stored}-{_ordinal(runs[0])})"


def _ordinal(run_id: str) -> int:
    return int(run_id.rsplit("-", 1)[1])


def _ingest_spooled(spool: BinaryIO, store: str | os.PathLike[str]) -> IngestReport:
    """What came on standard input, ingested as standard input (``<stdin>``): the ingest
    reads ``sys.stdin``, which the watch has drained, so the spool stands in for it."""
    from specscope.logs.ingest import ingest

    spool.flush()
    spool.seek(0)
    held = sys.stdin
    sys.stdin = io.TextIOWrapper(spool, encoding="utf-8", errors="replace")
    try:
        return ingest("-", store=store)
    finally:
        sys.stdin = held


__all__ = ["FollowedLog", "Watcher", "render", "watch"]
