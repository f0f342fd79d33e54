"""``ingest``: logs in, rows in the store out, and a report of what was found and skipped."""

from __future__ import annotations

import multiprocessing
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from specscope.errors import NoTelemetryError, SpecscopeError, UsageError
from specscope.logs.assemble import Finished, finish, reconfigure
from specscope.logs.bulk import parse_source
from specscope.logs.grammar import Grammar, default_grammar
from specscope.logs.known import known_as, same_text
from specscope.logs.label_config import add_headings
from specscope.logs.limits import max_line_bytes, size_text
from specscope.logs.results import ParseResult
from specscope.logs.source import HEAD_BYTES, STDIN, Source, open_source, unhashed
from specscope.logs.staging import RECORD_TABLES, Stage
from specscope.logs.zone import utc_offset
from specscope.schema import CONFIG_COLUMNS, RUNS, store_columns
from specscope.store.layout import default_store_path
from specscope.store.reading import Store
from specscope.store.sources import source_id as new_source_id
from specscope.store.sources import sources_row
from specscope.store.writing import StoreWriter

SKIP_EXAMPLES = 5
# How much of a log's start ``zone`` reads for container stamps (they are on every line).
_ZONE_HEAD_BYTES = 1 << 20
_INT_CONFIG = {f.name for f in RUNS if f.type in ("int32", "int64")} & set(CONFIG_COLUMNS)


@dataclass
class SkippedLines:
    reason: str
    count: int
    lines: list[int]  # the first few


@dataclass
class RunSummary:
    run_id: str
    first_line: int
    last_line: int
    config: dict[str, Any]
    spec_records: int
    stats_records: int
    first_ts: datetime | None
    last_ts: datetime | None
    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    per_position: list[float | None] | None
    k: int | None
    estimated: bool = False  # the mean length is a mean of printed means (no counts)


@dataclass
class SourceReport:
    """What ingest did with one input."""

    path: str
    status: str  # new, grown, unchanged, error
    source_id: str | None = None
    lines: int = 0
    added: dict[str, int] = field(default_factory=dict)
    found: dict[str, int] = field(default_factory=dict)
    runs: list[RunSummary] = field(default_factory=list)
    skipped: list[SkippedLines] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: SpecscopeError | None = None

    @property
    def skipped_lines(self) -> int:
        return sum(s.count for s in self.skipped)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "source_id": self.source_id,
            "lines": self.lines,
            "found": self.found,
            "added": self.added,
            "runs": [_run_dict(r) for r in self.runs],
            "skipped": [s.__dict__ for s in self.skipped],
            "notes": self.notes,
            "error": None
            if self.error is None
            else {
                "message": self.error.one_line(),
                "exit_status": int(self.error.exit_status),
            },
        }


@dataclass
class IngestReport:
    store: str
    sources: list[SourceReport]

    @property
    def errors(self) -> list[SpecscopeError]:
        return [s.error for s in self.sources if s.error is not None]

    def raise_for_errors(self) -> None:
        if self.errors:
            raise self.errors[0]

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "sources": [s.to_dict() for s in self.sources]}


def _run_dict(r: RunSummary) -> dict[str, Any]:
    d = dict(r.__dict__)
    for key in ("first_ts", "last_ts"):
        d[key] = d[key].isoformat() if d[key] is not None else None
    return d


def parse_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """``["quantization=int4-awq", "k=4"]`` to typed run-config values."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set wants key=value, got {pair!r}")
        if key not in CONFIG_COLUMNS:
            raise UsageError(f"--set {key}: unknown field; known: " + ", ".join(CONFIG_COLUMNS))
        value = value.strip()
        if key in _INT_CONFIG:
            try:
                out[key] = int(value)
            except ValueError as exc:
                raise UsageError(f"--set {key}: expected a whole number, got {value!r}") from exc
        elif key == "enable_prefix_caching":
            low = value.lower()
            if low not in ("true", "false", "on", "off", "1", "0", "yes", "no"):
                raise UsageError(f"--set {key}: expected true or false, got {value!r}")
            out[key] = low in ("true", "on", "1", "yes")
        else:
            out[key] = value
    return out


def ingest(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    store: str | os.PathLike[str] | Store | None = None,
    year: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    label: str | None = None,
    grammar: Grammar | None = None,
    bulk: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    jobs: int = 1,
    runs: Sequence[str] | None = None,
) -> IngestReport:
    """Read logs into the store. A problem with one input is reported in its
    ``SourceReport.error`` and does not stop the others; ``raise_for_errors()`` raises it.
    ``overrides`` and ``label`` are what the user says of the runs: given for a log that is
    already in the store, they are applied to its runs without reading it again; ``runs``
    names the runs (of the store) they are for, and then they are for those alone.
    ``bulk=False`` reads every line with the line parser (slower; the same tables).
    ``progress(name, bytes read, bytes in all)`` is called as a big log is read.
    ``jobs``: logs read side by side, each in a process of its own (as much memory each
    as one log takes); logs that may hold the same text are read one after the other."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    target = store if isinstance(store, Store) else Store(store or default_store_path())
    side_by_side = jobs > 1 and grammar is None and _can_spawn() and _independent(paths)
    grammar = grammar or default_grammar()
    settings = dict(overrides or {})
    if label is not None:
        settings["label"] = label
    named = list(runs or ())
    user = {} if named else settings  # named runs are runs of the store: new logs get none
    reports: list[SourceReport] = []
    with target.writer() as writer:
        known = target.sources.collect().to_dicts()
        changed = False

        def take(report: SourceReport, row: dict[str, Any] | None) -> None:
            nonlocal known, changed
            reports.append(report)
            if row is not None:
                known = [k for k in known if k["source_id"] != row["source_id"]] + [row]
                changed = True

        if side_by_side:
            names = [os.fspath(p) for p in paths]
            for report, row in _side_by_side(names, writer, known, year, user, bulk, jobs):
                take(report, row)
        else:
            for p in paths:  # each log sees the ones before it (the same text is read once)
                take(*_ingest_one(os.fspath(p), writer, known, year, user, grammar, bulk, progress))
        if changed:
            writer.replace_sources(known)
        if settings:
            _settle(target, writer, reports, settings, named)
    return IngestReport(str(target), reports)


def _settle(
    target: Store,
    writer: StoreWriter,
    reports: list[SourceReport],
    settings: Mapping[str, Any],
    named: list[str],
) -> None:
    """The user's settings on runs already in the store: the runs ``named``, or else every
    run of each log that was found unchanged (re-ingesting it with ``--set`` is how one
    corrects what its log did not say). Each source's runs file is written again; no log
    is read."""
    current = target.runs.collect()
    if named:
        unknown = sorted(set(named) - set(current["run_id"].to_list()))
        if unknown:
            raise UsageError(
                f"--run {unknown[0]}: no such run in the store (specscope runs lists them)"
            )
        chosen = set(named)
    else:
        unchanged = {r.source_id for r in reports if r.status == "unchanged"}
        chosen = set(current.filter(pl.col("source_id").is_in(unchanged))["run_id"].to_list())
    said = ", ".join(f"{k}={v}" for k, v in settings.items())
    for sid in sorted(set(current.filter(pl.col("run_id").is_in(chosen))["source_id"])):
        rows = current.filter(pl.col("source_id") == sid).to_dicts()
        mine = [r for r in rows if r["run_id"] in chosen]
        others = [r for r in rows if r["run_id"] not in chosen]
        writer.add("runs", sid, sorted(others + reconfigure(mine, settings), key=_by_ordinal))
        note = f"{said} set on {', '.join(r['run_id'] for r in mine)} (the log was not re-read)"
        for report in reports:
            if report.source_id == sid:
                report.notes.append(note)
                break
        else:
            reports.append(SourceReport(f"run {mine[0]['run_id']}", "reconfigured", sid, 0))
            reports[-1].notes.append(note)


def _by_ordinal(row: Mapping[str, Any]) -> int:
    return int(row.get("ordinal") or 0)


def _can_spawn() -> bool:
    """A new process imports the caller's main module by its file: there must be one
    (``python -`` has none; a notebook or ``python -c`` has no file to import)."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return path is None or os.path.isfile(path)


def _independent(paths: Sequence[str | os.PathLike[str]]) -> bool:
    """Whether the logs can be read side by side: two or more files, none of which can hold
    the text of another (the same content, or one grown from the other: the same head)."""
    if len(paths) < 2 or any(os.fspath(p) == STDIN for p in paths):
        return False
    heads = set()
    for p in paths:
        try:
            head = unhashed(p).prefix_sha256(HEAD_BYTES)  # the head only: workers read the rest
        except SpecscopeError:
            continue  # its worker reports it
        if head in heads:
            return False
        heads.add(head)
    return True


def _side_by_side(
    paths: list[str],
    writer: StoreWriter,
    known: list[dict[str, Any]],
    year: int | None,
    user: dict[str, Any],
    bulk: bool,
    jobs: int,
) -> list[tuple[SourceReport, dict[str, Any] | None]]:
    """Each log in a process of its own, writing its files under this writer's ingest id;
    this writer commits them all."""
    context = multiprocessing.get_context("spawn")  # polars' threads do not survive fork
    with ProcessPoolExecutor(max_workers=min(jobs, len(paths)), mp_context=context) as pool:
        futures = [
            pool.submit(
                _worker, str(writer.store.path), writer.ingest_id, p, known, year, user, bulk
            )
            for p in paths
        ]
        out = []
        for future in futures:
            report, row, written, sources = future.result()
            writer.written.extend(written)
            writer.sources.extend(sources)
            out.append((report, row))
    return out


def _worker(
    store_path: str,
    ingest_id: str,
    path: str,
    known: list[dict[str, Any]],
    year: int | None,
    user: dict[str, Any],
    bulk: bool,
) -> tuple[SourceReport, dict[str, Any] | None, list[Path], list[str]]:
    writer = StoreWriter(Store(store_path), ingest_id=ingest_id)
    grammar = default_grammar()
    report, row = _ingest_one(path, writer, known, year, user, grammar, bulk, None)
    return report, row, writer.written, writer.sources


def _ingest_one(
    path: str,
    writer: StoreWriter,
    known: list[dict[str, Any]],
    year: int | None,
    user: dict[str, Any],
    grammar: Grammar,
    bulk: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[SourceReport, dict[str, Any] | None]:
    """One log into the writer; a log that fails is reported and leaves nothing behind."""
    mark = writer.mark()
    try:
        src = open_source(path)
        absolute = path if path == "-" else str(Path(path).resolve())
        inflated = not src.content_sha256  # a .gz: its content is hashed as it is read
        same, previous = known_as(src, known)
        if same is not None:
            return _unchanged(src, same), None
        source_id = previous["source_id"] if previous else new_source_id("log", src.sha256)
        stage = Stage(writer.stage_path())
        try:
            told = None
            if progress is not None:

                def told(done: int) -> None:
                    progress(src.display, done, max(done, src.size_hint()))

            result = parse_source(src, grammar, stage, bulk=bulk, progress=told)
            add_headings(src, result.runs)  # the heading above a table: its rows' context
            if inflated:
                if not src.content_sha256:  # read by Python, not by the core: hash it here
                    src.identify()
                # The same text as a stored source that ``known_as`` could not tell by its
                # head (one stored without its size): what was staged is dropped.
                same = same_text(src, known)
                if same is not None:
                    return _unchanged(src, same), None
            return _ingest_parsed(
                src, grammar, stage, result, previous, source_id, absolute, writer, year, user
            )
        finally:
            stage.close()
    except SpecscopeError as exc:
        writer.roll_back(mark)  # nothing of a source that failed half way
        return SourceReport(path, "error", error=exc), None
    except Exception as exc:  # a bug met on this input: it fails alone, the others land
        writer.roll_back(mark)
        if os.environ.get("SPECSCOPE_DEBUG"):
            traceback.print_exc()
        what = " ".join(str(exc).split())[:200]
        error = SpecscopeError(
            f"internal error while reading it: {type(exc).__name__}: {what} (nothing of it "
            "was stored; set SPECSCOPE_DEBUG=1 for the traceback, and please report it)",
            path=path,
        )
        return SourceReport(path, "error", error=error), None


def _unchanged(src: Source, same: dict[str, Any]) -> SourceReport:
    report = SourceReport(src.display, "unchanged", same["source_id"], same["lines"] or 0)
    report.found = {
        "spec_decode": same["spec_records"],
        "engine_stats": same["stats_records"],
        "runs": same["runs"],
    }
    report.notes.append(f"already in the store as {same['path']}; nothing added")
    return report


def _ingest_parsed(
    src: Source,
    grammar: Grammar,
    stage: Stage,
    result: ParseResult,
    previous: dict[str, Any] | None,
    source_id: str,
    absolute: str,
    writer: StoreWriter,
    year: int | None,
    user: dict[str, Any],
) -> tuple[SourceReport, dict[str, Any] | None]:
    report = SourceReport(src.display, "grown" if previous else "new", source_id, result.lines)
    report.notes.extend(src.notes)
    crashed = _crash_events(stage, grammar)
    if crashed:
        report.notes.append(
            f"no speculative-decoding telemetry, but the server died ({crashed}): "
            "stored for detect to name"
        )
    if not stage.counts.get("spec_decode") and not stage.counts.get("bench") and not crashed:
        names = sorted(
            d.name
            for d in grammar.definitions
            if d.table in ("spec_decode", "bench")
            or any(f.table == "spec_decode" for f in d.fields.values())
        )
        events = stage.lazy("events").select("code", "line").head(1).collect()
        held = (
            f"; it holds {stage.counts['events']} events, the first {events['code'][0]} at "
            f"line {events['line'][0]}"
            if len(events)
            else ""
        )
        if result.long_lines:
            n, size = result.long_lines[0]
            more = len(result.long_lines) - 1
            held += (
                f"; line {n} ({size:,} bytes)"
                + (f" and {more} more" if more else "")
                + f" over the {size_text(max_line_bytes())} line limit not read"
            )
        if result.skipped:  # what was there but not kept says more than the formats do
            skip = min(result.skipped, key=lambda s: s.line)
            more = len(result.skipped) - 1
            held += f"; line {skip.line} skipped: {skip.reason}" + (
                f" (and {more} more skipped)" if more else ""
            )
        raise NoTelemetryError(
            f"no speculative-decoding telemetry found in {result.lines} lines{held} "
            f"(formats known: {', '.join(names)}; `specscope formats --samples` shows them)",
            path=src.display,
        )
    done = finish(
        result,
        stage,
        display=src.display,
        source_id=source_id,
        mtime=src.mtime,
        year=year if not previous else previous.get("year") or year,
        user=user,
    )
    first_year, basis = done.first_year, done.year_basis
    after = previous["lines"] if previous else 0
    in_utc = _in_utc(src)
    flagged: list[tuple[int, str]] = [(0, "")]  # how many records kept with a problem; examples
    # One table at a time: writing two side by side saved 4% and cost 10 MB of peak memory.
    for table in RECORD_TABLES:
        parts = _flagged(
            (
                store_columns(in_utc(part.filter(pl.col("line") > after) if after else part), table)
                for part in done.parts(table)
            ),
            flagged,
        )
        # The run sums of a log read from its start are those of the run summary.
        report.added[table] = writer.add_parts(
            table, source_id, parts, run_sums=None if after else done.run_sums
        )
    runs = done.runs  # summed from the parts just written
    writer.add("runs", source_id, runs)
    report.found = {table: done.counts.get(table, 0) for table in RECORD_TABLES}
    report.found["runs"] = len(runs)
    report.skipped = _skipped(result)
    if flagged[0][0]:
        count, first = flagged[0][0], sorted(flagged[1:])[:SKIP_EXAMPLES]
        lines = ", ".join(str(n) for n, _ in first) + (" ..." if count > len(first) else "")
        report.notes.append(
            f"{count} record{'s' if count > 1 else ''} kept with a problem (their `problems` "
            f"column; line {lines}): {first[0][1]}"
        )
    report.runs = _summaries(done)
    if previous:
        report.notes.append(f"grew since the last ingest: read on from line {after + 1}")
    row = sources_row(
        source_id,
        absolute,
        "log",
        writer.ingest_id,
        size=src.size,
        sha256=src.sha256,
        content_sha256=src.content_sha256,
        content_size=src.content_size,
        head_sha256=src.head_sha256,
        mtime=src.mtime.replace(tzinfo=None),
        lines=result.lines,
        year=first_year,
        year_basis=basis,
        spec_records=report.found["spec_decode"],
        stats_records=report.found["engine_stats"],
        runs=len(runs),
        events=report.found["events"],
        bench_records=report.found["bench"],
        skipped_lines=report.skipped_lines,
    )
    return report, row


def frames(
    result: ParseResult,
    *,
    display: str,
    source_id: str,
    mtime: datetime,
    year: int | None = None,
    user: dict[str, Any] | None = None,
) -> dict[str, pl.DataFrame]:
    """A parse result as the store's tables would hold it, without a store (for `watch`)."""
    stage = Stage()  # in memory: what `watch` has read so far
    stage.flush({table: list(rows) for table, rows in result.tables.items()})  # watch keeps its own
    done = finish(
        result,
        stage,
        display=display,
        source_id=source_id,
        mtime=mtime,
        year=year,
        user=user or {},
    )
    tables = done.collect()
    out = {
        table: store_columns(tables[table], table).with_columns(
            pl.lit(source_id).alias("source_id")
        )
        for table in RECORD_TABLES
    }
    runs = pl.DataFrame(pa.Table.from_pylist(done.runs, schema=RUNS))
    out["runs"] = runs.with_columns(pl.lit(source_id).alias("source_id"))
    return out


def _flagged(parts: Iterable[pl.DataFrame], out: list[tuple[int, str]]) -> Iterator[pl.DataFrame]:
    """The parts, counting in ``out[0]`` the rows that have a problem and keeping the line
    and problem of the first few of each part after it."""
    for part in parts:
        # Most parts have no problem: a count of nulls says so without a filter's copy.
        if "problems" in part.columns and part["problems"].null_count() < len(part):
            rows = part.filter(pl.col("problems").is_not_null()).select("line", "problems")
            if len(rows):
                out[0] = (out[0][0] + len(rows), "")
                out.extend(rows.head(SKIP_EXAMPLES).iter_rows())
        yield part


def _in_utc(src: Source) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """What gives a part of the log's rows their ``ts_utc``: ``ts`` less the offset its
    container stamps show (``logs.zone``); none where they show none."""
    offset = utc_offset(src.head(_ZONE_HEAD_BYTES).splitlines())
    if offset is None:
        return lambda part: part

    def convert(part: pl.DataFrame) -> pl.DataFrame:
        if "ts" not in part.columns:
            return part
        return part.with_columns(
            (pl.col("ts") - offset).dt.replace_time_zone("UTC").alias("ts_utc")
        )

    return convert


def _skipped(result: ParseResult) -> list[SkippedLines]:
    groups: dict[str, SkippedLines] = {}
    for s in result.skipped:
        g = groups.setdefault(s.reason, SkippedLines(s.reason, 0, []))
        g.count += 1
        if len(g.lines) < SKIP_EXAMPLES:
            g.lines.append(s.line)
    return sorted(groups.values(), key=lambda g: -g.count)


def _summaries(done: Finished) -> list[RunSummary]:
    out = []
    for run in done.runs:
        a = done.acceptance.get(run["ordinal"], {})
        config = {c: run[c] for c in CONFIG_COLUMNS if run.get(c) is not None}
        out.append(
            RunSummary(
                run_id=run["run_id"],
                first_line=run["first_line"],
                last_line=run["last_line"],
                config=config,
                spec_records=run["spec_records"],
                stats_records=run["stats_records"],
                first_ts=run["first_ts"],
                last_ts=run["last_ts"],
                drafts=a.get("drafts"),
                draft_tokens=a.get("draft_tokens"),
                accepted_tokens=a.get("accepted_tokens"),
                acceptance_rate=a.get("acceptance_rate"),
                mean_acceptance_length=a.get("mean_acceptance_length"),
                per_position=a.get("per_position"),
                k=run.get("k"),
                estimated=bool(a.get("estimated")),
            )
        )
    return out


def _crash_events(stage: Stage, grammar: Grammar) -> str:
    """The crash a source without telemetry holds ("engine_dead at line 3"), or "": a
    paste of a crash alone is what a user has when the server died, and a verdict."""
    if (
        stage.counts.get("spec_decode")
        or stage.counts.get("bench")
        or not stage.counts.get("events")
    ):
        return ""
    crash = sorted({e.code for d in grammar.definitions for e in d.events if e.crash})
    first = (
        stage.lazy("events").filter(pl.col("code").is_in(crash)).select("code", "line").head(1)
    ).collect()
    return f"{first['code'][0]} at line {first['line'][0]}" if len(first) else ""


__all__ = [
    "IngestReport",
    "RunSummary",
    "SkippedLines",
    "SourceReport",
    "ingest",
    "parse_overrides",
]
