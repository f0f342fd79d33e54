"""``ingest``: logs in, rows in the store out, and a report of what was found and skipped."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from specscope.acceptance import weighted_acceptance
from specscope.definitions import load_definitions
from specscope.derive import DRAFTER_KINDS, fill_drafts, quantization_from_model_name
from specscope.errors import NoTelemetryError, SpecscopeError, UsageError
from specscope.parse import Grammar, ParseResult, Run, parse_lines
from specscope.reader import Source, open_source
from specscope.schema import CONFIG_COLUMNS, RUNS, TABLES
from specscope.store import Store, StoreWriter, default_store_path
from specscope.timestamps import resolve

SKIP_EXAMPLES = 5
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
        if key not in CONFIG_COLUMNS or key == "label":
            raise UsageError(
                f"--set {key}: unknown field; known: "
                + ", ".join(c for c in CONFIG_COLUMNS if c != "label")
            )
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
) -> IngestReport:
    """Read logs into the store. A problem with one input is reported in its
    ``SourceReport.error`` and does not stop the others; ``raise_for_errors()`` raises it."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    target = store if isinstance(store, Store) else Store(store or default_store_path())
    grammar = grammar or Grammar(load_definitions())
    user = dict(overrides or {})
    if label is not None:
        user["label"] = label
    reports: list[SourceReport] = []
    with target.writer() as writer:
        known = target.sources.collect().to_dicts()
        changed = False
        for path in paths:
            try:
                report, row = _ingest_one(os.fspath(path), writer, known, year, user, grammar)
            except SpecscopeError as exc:
                reports.append(SourceReport(os.fspath(path), "error", error=exc))
                continue
            reports.append(report)
            if row is not None:
                known = [k for k in known if k["source_id"] != row["source_id"]] + [row]
                changed = True
        if changed:
            writer.replace_sources(known)
    return IngestReport(str(target.path), reports)


def _ingest_one(
    path: str,
    writer: StoreWriter,
    known: list[dict[str, Any]],
    year: int | None,
    user: dict[str, Any],
    grammar: Grammar,
) -> tuple[SourceReport, dict[str, Any] | None]:
    src = open_source(path)
    absolute = path if path == "-" else str(Path(path).resolve())
    same = next(
        (
            k
            for k in known
            if k["sha256"] == src.sha256
            or (k.get("content_sha256") and k["content_sha256"] == src.content_sha256)
        ),
        None,
    )
    if same is not None:
        report = SourceReport(src.display, "unchanged", same["source_id"], same["lines"] or 0)
        report.found = {
            "spec_decode": same["spec_records"],
            "engine_stats": same["stats_records"],
            "runs": same["runs"],
        }
        report.notes.append(f"already in the store as {same['path']}; nothing added")
        return report, None
    previous = _grown_from(src, absolute, known)
    source_id = previous["source_id"] if previous else "s" + src.sha256[:10]
    result = parse_lines(src.lines(), grammar)
    report = SourceReport(src.display, "grown" if previous else "new", source_id, result.lines)
    report.notes.extend(src.notes)
    spec_rows = result.tables.get("spec_decode", [])
    if not spec_rows and not result.tables.get("bench"):
        names = sorted(
            d.name
            for d in grammar.definitions
            if d.table in ("spec_decode", "bench")
            or any(f.table == "spec_decode" for f in d.fields.values())
        )
        events = result.tables.get("events", [])
        held = (
            f"; it holds {len(events)} events, the first {events[0]['code']} at line "
            f"{events[0]['line']}"
            if events
            else ""
        )
        raise NoTelemetryError(
            f"no speculative-decoding telemetry found in {result.lines} lines{held} "
            f"(formats known: {', '.join(names)}; `specscope formats --samples` shows them)",
            path=src.display,
        )
    first_year, basis = _finish_rows(
        result, src, source_id, year if not previous else previous.get("year") or year
    )
    runs = _run_rows(result, src.display, source_id, user)
    after = previous["lines"] if previous else 0
    for table in ("spec_decode", "engine_stats", "events", "bench"):
        rows = [r for r in result.tables.get(table, []) if r["line"] > after]
        report.added[table] = writer.add(table, source_id, _clean(rows, table))
    writer.add("runs", source_id, runs)
    report.found = {
        "spec_decode": len(spec_rows),
        "engine_stats": len(result.tables.get("engine_stats", [])),
        "events": len(result.tables.get("events", [])),
        "bench": len(result.tables.get("bench", [])),
        "runs": len(runs),
    }
    report.skipped = _skipped(result)
    report.runs = _summaries(result, runs)
    if previous:
        report.notes.append(f"grew since the last ingest: read on from line {after + 1}")
    row = {
        "source_id": source_id,
        "path": absolute,
        "kind": "log",
        "size": src.size,
        "sha256": src.sha256,
        "content_sha256": src.content_sha256,
        "content_size": src.content_size,
        "head_sha256": src.head_sha256,
        "mtime": src.mtime.replace(tzinfo=None),
        "lines": result.lines,
        "year": first_year,
        "year_basis": basis,
        "spec_records": report.found["spec_decode"],
        "stats_records": report.found["engine_stats"],
        "runs": len(runs),
        "events": report.found["events"],
        "bench_records": report.found["bench"],
        "skipped_lines": report.skipped_lines,
        "ingest_id": writer.ingest_id,
        "ingested_at": datetime.now(UTC).replace(tzinfo=None),
    }
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
    _finish_rows(result, _Named(display, mtime), source_id, year)
    out = {}
    for table in ("spec_decode", "engine_stats", "events", "bench"):
        rows = _clean(result.tables.get(table, []), table)
        out[table] = _frame(rows, table).with_columns(pl.lit(source_id).alias("source_id"))
    runs = _run_rows(result, display, source_id, user or {})
    out["runs"] = _frame(runs, "runs").with_columns(pl.lit(source_id).alias("source_id"))
    return out


@dataclass
class _Named:
    display: str
    mtime: datetime


def _frame(rows: list[dict[str, Any]], table: str) -> pl.DataFrame:
    schema = TABLES[table]
    return pl.from_arrow(pa.Table.from_pylist(rows, schema=schema))  # type: ignore[return-value]


def _grown_from(src: Source, absolute: str, known: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The stored source whose text this one starts with: the same file grown, or a log
    rotated away and found under its new name (``server.log.1``, ``server.log.2.gz``)."""
    for k in known:
        size = k.get("content_size")
        if not size or size >= src.content_size:
            continue
        if (
            k.get("head_sha256")
            and min(size, 65536) == 65536
            and k["head_sha256"] != src.head_sha256
        ):
            continue  # cheap: the first 64 KiB differ
        if src.prefix_sha256(size) == k["content_sha256"]:
            return k
    return None


def _finish_rows(
    result: ParseResult, src: Source | _Named, source_id: str, year: int | None
) -> tuple[int | None, str]:
    """Run ids, timestamps with years, and k for records that only the config tells."""
    everything = sorted(
        (r for rows in result.tables.values() for r in rows), key=lambda r: r["line"]
    )
    stamps = [r.get("_ts") for r in everything]
    datetimes, first_year, basis = resolve(stamps, year=year, mtime=src.mtime)
    run_k = {run.ordinal: run.config.get("k") for run in result.runs}
    for r, ts in zip(everything, datetimes, strict=True):
        r["ts"] = ts
        r["source"] = src.display
        r["run_id"] = f"{source_id}-{r['_run']}"
        if r.get("k") is None and run_k.get(r["_run"]) and "draft_tokens" in r:
            r["k"] = run_k[r["_run"]]
            fill_drafts(r)
    return first_year, basis


def _clean(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    names = set(TABLES[table].names)
    out = []
    for r in rows:
        row = {k: v for k, v in r.items() if k in names}
        if table == "spec_decode":
            row.setdefault("counts", "interval")
            row.setdefault("partial", False)
        out.append(row)
    return out


def _run_rows(
    result: ParseResult, source: str, source_id: str, user: dict[str, Any]
) -> list[dict[str, Any]]:
    rows = []
    by_run: dict[int, list[dict[str, Any]]] = {}
    for table_rows in result.tables.values():
        for r in table_rows:
            by_run.setdefault(r["_run"], []).append(r)
    for run in result.runs:
        records = by_run.get(run.ordinal, [])
        rows.append(_run_row(run, records, source, source_id, user))
    return rows


def _run_row(
    run: Run, records: list[dict[str, Any]], source: str, source_id: str, user: dict[str, Any]
) -> dict[str, Any]:
    config = {k: v for k, v in run.config.items() if not k.startswith("_")}
    row: dict[str, Any] = {c: config.get(c) for c in CONFIG_COLUMNS}
    if row["k"] is None:
        ks = Counter(r["k"] for r in records if r.get("k") is not None and "draft_tokens" in r)
        row["k"] = ks.most_common(1)[0][0] if ks else None
    if row["quantization"] is not None:
        row["quantization_source"] = "config"
    elif (guess := quantization_from_model_name(row["model"])) is not None:
        row["quantization"], row["quantization_source"] = guess, "model_name"
    for key, value in user.items():
        row[key] = value
        if key == "quantization":
            row["quantization_source"] = "user"
    row["drafter_kind"] = DRAFTER_KINDS.get(row["spec_method"] or "")
    stamps = [r["ts"] for r in records if r.get("ts") is not None]
    row.update(
        run_id=f"{source_id}-{run.ordinal}",
        source=source,
        ordinal=run.ordinal,
        first_line=run.first_line,
        last_line=run.last_line,
        first_ts=min(stamps) if stamps else None,
        last_ts=max(stamps) if stamps else None,
        server=config.get("server") or "vllm",
        pids=json.dumps(
            {
                name: [pid, *run.side_pids[name]] if name in run.side_pids else pid
                for name, pid in run.procs.items()
            }
        )
        if run.procs
        else None,
        spec_records=run.counts.get("spec_decode", 0),
        stats_records=run.counts.get("engine_stats", 0),
        events=run.counts.get("events", 0),
        config=json.dumps({**config, "lines": run.config.get("_config_lines", [])}, default=str),
        overrides=json.dumps(user) if user else None,
    )
    return row


def _skipped(result: ParseResult) -> list[SkippedLines]:
    groups: dict[str, SkippedLines] = {}
    for s in result.skipped:
        g = groups.setdefault(s.reason, SkippedLines(s.reason, 0, []))
        g.count += 1
        if len(g.lines) < SKIP_EXAMPLES:
            g.lines.append(s.line)
    return sorted(groups.values(), key=lambda g: -g.count)


def _summaries(result: ParseResult, runs: list[dict[str, Any]]) -> list[RunSummary]:
    spec = result.tables.get("spec_decode", [])
    names = TABLES["spec_decode"].names
    frame = pl.DataFrame(
        [{k: r.get(k) for k in names} for r in spec],
        schema=pl.from_arrow(TABLES["spec_decode"].empty_table()).schema,  # type: ignore[union-attr]
    )
    agg = {r["run_id"]: r for r in weighted_acceptance(frame, ["run_id"]).to_dicts()}
    out = []
    for run in runs:
        a = agg.get(run["run_id"], {})
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


__all__ = [
    "IngestReport",
    "RunSummary",
    "SkippedLines",
    "SourceReport",
    "ingest",
    "parse_overrides",
]
