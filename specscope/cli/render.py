"""Plain-text renderings of what ingest found, of the runs in a store, of a pull and of
findings. Every public renderer returns ``safe`` text: whatever it prints went through the
redactor (secrets, credentials, e-mail addresses, home folders; not hosts) and has no
terminal control sequence left (a log's text can hold an OSC hyperlink or a title)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, ParamSpec

from specscope.analysis.findings import Finding
from specscope.cli.output import safe
from specscope.logs.ingest import IngestReport, RunSummary, SourceReport
from specscope.prometheus.pull import PullReport

P = ParamSpec("P")


def _safe_text(render: Callable[P, str]) -> Callable[P, str]:
    """The one place a renderer's text is made safe: every public renderer wears this (or
    ``_safe_lines``), and a test checks that each does."""

    @functools.wraps(render)
    def rendered(*args: P.args, **kwargs: P.kwargs) -> str:
        return safe(render(*args, **kwargs))

    rendered.safe_output = True  # type: ignore[attr-defined]
    return rendered


def _safe_lines(render: Callable[P, list[str]]) -> Callable[P, list[str]]:
    @functools.wraps(render)
    def rendered(*args: P.args, **kwargs: P.kwargs) -> list[str]:
        return safe("\n".join(render(*args, **kwargs))).split("\n")

    rendered.safe_output = True  # type: ignore[attr-defined]
    return rendered


# The configuration a summary always mentions, in this order, and how it names them.
_SHOWN = (
    ("vllm_version", "vLLM"),
    ("model", "model"),
    ("spec_method", "method"),
    ("k", "k"),
    ("quantization", "quantization"),
    ("enable_prefix_caching", "prefix caching"),
    ("tensor_parallel_size", "TP"),
    ("data_parallel_size", "DP"),
)


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _of(value: int | None, word: str) -> str:
    """A count and its noun, singular for one: ``1 event``, ``2 events``."""
    return f"{_n(value)} {word if value == 1 else word + 's'}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _when(first: datetime | None, last: datetime | None) -> str:
    if first is None:
        return ""
    if last is None or last == first:
        return f"  {first:%Y-%m-%d %H:%M:%S}"
    end = f"{last:%H:%M:%S}" if last.date() == first.date() else f"{last:%Y-%m-%d %H:%M:%S}"
    return f"  {first:%Y-%m-%d %H:%M:%S} -> {end}"


@_safe_text
def config_line(config: Mapping[str, Any]) -> str:
    parts = []
    missing = []
    for key, name in _SHOWN:
        value = config.get(key)
        if value is None:
            missing.append(name)
            continue
        if key == "enable_prefix_caching":
            value = "on" if value else "off"
        if key == "quantization" and config.get("quantization_source") == "model_name":
            value = f"{value} (from the model name)"
        parts.append(f"{name} {value}" if key != "k" else f"k={value}")
    for key in ("hardware", "label"):
        if config.get(key):
            parts.append(f"{key} {config[key]}")
    line = ", ".join(parts) if parts else "configuration not in the log"
    if missing and parts:
        line += f"; not in the log: {', '.join(missing)}"
    return line


@_safe_lines
def run_lines(run: RunSummary) -> list[str]:
    out = [
        f"  run {run.run_id}  lines {run.first_line}-{run.last_line}"
        f"{_when(run.first_ts, run.last_ts)}",
        f"    {config_line(run.config)}",
    ]
    if run.spec_records:
        if run.draft_tokens is None:
            out.append(f"    {_n(run.spec_records)} spec-decode records (no counts printed)")
        else:
            out.append(
                f"    {_n(run.spec_records)} spec-decode records: {_n(run.drafts)} drafts, "
                f"{_n(run.draft_tokens)} draft tokens, {_n(run.accepted_tokens)} accepted"
            )
        tau = "n/a" if run.mean_acceptance_length is None else f"{run.mean_acceptance_length:.2f}"
        if run.estimated:
            tau += " (estimated: the mean of the printed interval means)"
        line = f"    acceptance rate {_pct(run.acceptance_rate)}, mean acceptance length {tau}"
        out.append(line)
        if run.per_position:
            curve = " ".join("n/a" if a is None else f"{a:.3f}" for a in run.per_position)
            out.append(f"    per-position acceptance {curve}")
    else:
        out.append(f"    no spec-decode records ({_n(run.stats_records)} engine-stats records)")
    return out


@_safe_lines
def source_lines(report: SourceReport) -> list[str]:
    if report.error is not None:
        return [f"error: {report.error.one_line()}"]
    if report.status == "reconfigured":  # settings on runs of a log it did not name
        return [f"{report.path}: source {report.source_id}"] + [
            f"  note: {note}" for note in report.notes
        ]
    f = report.found
    head = f"{report.path}: {report.status}, source {report.source_id}, {_n(report.lines)} lines"
    out = [head]
    bench = f", {_n(f['bench'])} benchmark results" if f.get("bench") else ""
    out.append(
        f"  found {_n(f.get('spec_decode'))} spec-decode records, "
        f"{_n(f.get('engine_stats'))} engine-stats records{bench}, "
        f"{_of(f.get('events', 0), 'event')}, {_of(f.get('runs'), 'run')}"
    )
    if report.status in ("new", "grown"):
        a = report.added
        added_bench = f", {_n(a['bench'])} benchmark" if a.get("bench") else ""
        out.append(
            f"  added {_n(a.get('spec_decode', 0))} spec-decode, {_n(a.get('engine_stats', 0))} "
            f"engine-stats{added_bench}, {_n(a.get('events', 0))} event rows"
        )
    if report.skipped:
        out.append(f"  skipped {report.skipped_lines} lines:")
        for s in report.skipped:
            where = ", ".join(str(n) for n in s.lines)
            more = " ..." if s.count > len(s.lines) else ""
            out.append(f"    {s.count} x {s.reason} (line {where}{more})")
    elif report.status in ("new", "grown"):
        out.append("  skipped 0 lines")
    for note in report.notes:
        out.append(f"  note: {note}")
    shown = report.runs
    if len(shown) > MAX_RUNS_SHOWN:
        # A long log can hold thousands of runs; the busiest tell the story.
        busiest = sorted(shown, key=lambda r: -(r.spec_records or 0))[:MAX_RUNS_SHOWN]
        keep = {id(r) for r in busiest}
        shown = [r for r in shown if id(r) in keep]
    for run in shown:
        out.extend(run_lines(run))
    if len(shown) < len(report.runs):
        out.append(
            f"  ... {len(report.runs) - len(shown):,} more runs with fewer records "
            "(`specscope runs` lists them all)"
        )
    return out


MAX_RUNS_SHOWN = 10


@_safe_text
def ingest_text(report: IngestReport) -> str:
    lines: list[str] = []
    for source in report.sources:
        if source.error is None:  # (an error is said once, on stderr)
            lines.extend(source_lines(source))
    if any(s.error is None for s in report.sources):
        lines.append(f"store: {report.store}")
    return "\n".join(lines)


@_safe_text
def pull_text(report: PullReport) -> str:
    """What a pull or a scrape stored (a scrape has no next pull to announce)."""
    a = report.added
    lines = [
        f"{report.url}: {report.start:%Y-%m-%d %H:%M:%S} -> {report.end:%Y-%m-%d %H:%M:%S} UTC, "
        f"{_n(report.requests)} requests, {_n(report.samples)} samples",
        f"  added {_n(a.get('spec_decode', 0))} spec-decode and "
        f"{_n(a.get('engine_stats', 0))} engine-stats intervals, {_of(report.runs, 'run')}",
    ]
    if report.watermark is not None and report.kind != "scrape":
        lines.append(f"  next pull starts after {report.watermark:%Y-%m-%d %H:%M:%S} UTC")
    lines.extend(f"  note: {note}" for note in report.notes)
    return "\n".join(lines)


@_safe_text
def runs_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """The table `specscope runs` prints."""
    header = ("run", "source", "records", "method", "k", "rate", "tau", "model", "vLLM")
    table: list[tuple[str, ...]] = [header]
    for r in rows:
        tau = r.get("mean_acceptance_length")
        table.append(
            tuple(
                safe(cell)  # before the widths: what is hidden is shorter
                for cell in (
                    str(r["run_id"]),
                    str(r.get("source") or ""),
                    _n(r.get("spec_records")),
                    str(r.get("spec_method") or "?"),
                    str(r.get("k") or "?"),
                    _pct(r.get("acceptance_rate")),
                    "n/a" if tau is None else f"{tau:.2f}",
                    str(r.get("model") or "?"),
                    str(r.get("vllm_version") or "?"),
                )
            )
        )
    if len(table) == 1:
        return "no runs in the store"
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    )


__all__ = [
    "config_line",
    "finding_text",
    "ingest_text",
    "pull_text",
    "run_lines",
    "runs_text",
    "safe",
    "source_lines",
]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


@_safe_text
def finding_text(f: Finding) -> str:
    where = f.source or ""
    if f.lines[0] is not None:
        where += f":{f.lines[0]}" + (
            f"-{f.lines[1]}" if f.lines[1] not in (None, f.lines[0]) else ""
        )
    when = ""
    if f.window[0] is not None:
        when = f"  {f.window[0]:%Y-%m-%d %H:%M:%S}"
        if f.window[1] is not None and f.window[1] != f.window[0]:
            when += f" -> {f.window[1]:%H:%M:%S}"
    lines = [f"{str(f.severity).upper():8} {f.kind}  run {f.run_id or '-'}  {where}{when}"]
    measured = ", ".join(f"{k} {_fmt(v)}" for k, v in f.measured.items() if v is not None)
    if measured:
        lines.append(f"  measured: {measured}")
    expected = ", ".join(f"{k} {_fmt(v)}" for k, v in f.expected.items() if v is not None)
    if expected:  # (a method nobody named is no expectation: 'method None' said nothing)
        lines.append(f"  expected: {expected}")
    if f.sample:
        lines.append("  evidence: " + ", ".join(f"{k} {_fmt(v)}" for k, v in f.sample.items()))
    if f.confidence is not None:
        lines.append(f"  confidence: {f.confidence.phrase()}")
    lines.append(f"  {f.explanation}")
    lines.append(f"  next: {f.next_step}")
    return "\n".join(lines)
