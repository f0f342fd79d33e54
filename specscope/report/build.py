"""``report``: a triage report to attach to a GitHub issue, as Markdown (with PNG charts
beside it) or as one self-contained HTML file (charts interactive, scripts inlined).

Top to bottom: a verdict, the runs, the findings with a few redacted log lines of
evidence, the per-position acceptance and the k advice, the charts, and what moves
acceptance across the runs of the store. Every string from a log or a store goes through
the redactor and is escaped for the target format: text never becomes markup.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from specscope.analysis.advise import advice_of
from specscope.analysis.detectors import NEEDED_OVER_ROWS, findings_of
from specscope.analysis.detectors.needed import gather_needed
from specscope.analysis.evidence import Evidence, gather
from specscope.analysis.factors import what_moves
from specscope.analysis.findings import Finding, json_safe
from specscope.analysis.verdict import verdict_of
from specscope.errors import SpecscopeError
from specscope.logs.source import unhashed
from specscope.report import charts, setups
from specscope.report.redact import Redactor
from specscope.report.streamed import Streamed, streamed
from specscope.store.reading import Store
from specscope.thresholds import Config, load_config

EVIDENCE_LINES = 3
EVIDENCE_WIDTH = 400  # characters of a quoted line
RUN_COLUMNS = (
    ("run", "run"),  # the human label: file, lines, method and k, --label
    ("server", "server"),
    ("version", "vllm_version"),
    ("model", "model"),
    ("method", "spec_method"),
    ("k", "k"),
    ("quantization", "quantization"),
    ("prefix caching", "enable_prefix_caching"),
    ("hardware", "hardware"),
    ("TP", "tensor_parallel_size"),
    ("DP", "data_parallel_size"),
    ("drafts", "drafts"),
    ("acceptance", "acceptance_rate"),
    ("τ", "mean_acceptance_length"),
    ("id (for --run)", "run_id"),
)
# Shown whether the log filled them or not: what a run is and what it measured.
_ALWAYS = ("run", "drafts", "acceptance_rate", "mean_acceptance_length", "run_id")


@dataclass
class Report:
    verdict: str
    runs: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    per_position: list[dict[str, Any]]
    advice: list[dict[str, Any]]
    moves: list[dict[str, Any]]
    charts: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    redaction: str = ""
    generated: str = ""
    columns: list[tuple[str, str]] = field(default_factory=lambda: list(RUN_COLUMNS))
    not_in_log: list[str] = field(default_factory=list)  # run columns no run filled
    quiet: list[str] = field(default_factory=list)  # launches with no spec-decode record
    captions: dict[str, str] = field(default_factory=dict)  # chart name: what to look at
    chart_notes: list[str] = field(default_factory=list)  # charts not drawn, and why
    # Over many runs (``setups``): the runs by setup, the outliers, what is not shown.
    grouped: bool = False
    setups: list[dict[str, Any]] = field(default_factory=list)
    outliers: list[dict[str, Any]] = field(default_factory=list)
    findings_left: list[dict[str, Any]] = field(default_factory=list)  # counted, not shown
    runs_left: int = 0  # runs with records not listed (``--per-run`` lists them)
    runs_total: int = 0
    setups_left: dict[str, int] = field(default_factory=dict)  # setups not listed: sums
    outliers_total: int = 0

    def to_dict(self) -> dict[str, Any]:
        grouped = (
            {
                "setups": self.setups,
                "setups_not_listed": self.setups_left,
                "outliers": self.outliers,
                "outliers_total": self.outliers_total,
                "findings_not_shown": self.findings_left,
                "runs_not_listed": self.runs_left,
            }
            if self.grouped
            else {}
        )
        return {
            **grouped,
            "verdict": self.verdict,
            "runs": self.runs,
            "findings": self.findings,
            "per_position": self.per_position,
            "advice": self.advice,
            "what_moves_acceptance": self.moves,
            "charts": [
                {"name": n, "title": t, "caption": self.captions.get(n)} for n, t, _ in self.charts
            ],
            "chart_notes": self.chart_notes,
            "not_in_log": self.not_in_log,
            "launches_without_records": self.quiet,
            "redaction": self.redaction,
            "generated": self.generated,
        }


# -- building -----------------------------------------------------------------------------------


def build_report(
    store: Store,
    *,
    run_ids: Iterable[str] | None = None,
    redactor: Redactor | None = None,
    with_charts: bool = True,
    config: Config | None = None,
    reference: list[dict[str, Any]] | None = None,
    per_run: bool = False,
) -> Report:
    """The report of the store's runs (or of ``run_ids``). Over more than
    ``setups.LIST_RUNS_UP_TO`` runs it summarises unless ``per_run``: the runs grouped by
    setup, the worst findings of each kind in full and the rest counted, the outliers and
    the runs those name listed, charts by setup."""
    red = redactor or Redactor()
    ids = list(run_ids or [])
    config = config or load_config()
    ev, fleet = _evidence(store, ids, config, reference, per_run=per_run)
    found = findings_of(ev)
    z = ev.config["evidence"]["z"]
    grouped = not per_run and len(ev.per_run) > setups.LIST_RUNS_UP_TO
    listed: set[str] | None = None
    left: list[dict[str, Any]] = []
    if grouped:
        setup_of, table, outliers = setups.setups_of(ev.runs, ev.per_run, found, z=z)
        found, left = setups.worst_findings(found)
        listed = set(setups.runs_named(found, outliers))
    sources = {r["source_id"]: r for r in store.sources.collect().to_dicts()}
    paths = {sid: r["path"] for sid, r in sources.items()}
    shown = {p: display_path(p) if red.enabled else p for p in paths.values()}
    red.known_paths.update(shown)
    with_records = set(ev.per_run) | set(ev.bench["run_id"].to_list())
    runs, quiet = [], []
    for run_id, run in ev.runs.items():
        if run_id not in with_records:
            quiet.append(_label(run, shown) or run_id)
            continue
        if listed is not None and run_id not in listed:
            continue
        agg = ev.per_run.get(run_id, {})
        runs.append(
            {
                **{k: json_safe(v) for k, v in run.items()},
                **{
                    "drafts": agg.get("drafts"),
                    "draft_tokens": agg.get("draft_tokens"),
                    "accepted_tokens": agg.get("accepted_tokens"),
                    "acceptance_rate": agg.get("acceptance_rate"),
                    "mean_acceptance_length": agg.get("mean_acceptance_length"),
                    "run": _label(run, shown),
                    "label": _label(run, shown),
                },
            }
        )
    columns = [
        (head, key)
        for head, key in RUN_COLUMNS
        if key in _ALWAYS or any(r.get(key) is not None for r in runs)
    ]
    not_in_log = [head for head, key in RUN_COLUMNS if (head, key) not in columns] if runs else []
    evidence = _evidence_lines(found, ev.runs, sources)
    findings = [_finding_dict(f, red, lines) for f, lines in zip(found, evidence, strict=True)]
    per_position = []
    for run_id, agg in ev.per_run.items():
        if listed is not None:
            break  # by setup, below
        if agg.get("per_position"):
            per_position.append(
                {
                    "run": run_id,
                    "label": _label(ev.runs.get(run_id, {}), shown),
                    "drafts": agg.get("drafts"),
                    "k": agg.get("k"),
                    "accepted_per_pos": agg.get("accepted_per_pos"),
                    "per_position": agg.get("per_position"),
                    "acceptance_rate": agg.get("acceptance_rate"),
                }
            )
    if grouped:
        per_position = _setup_curves(ev.per_run, setup_of, table)
    advice = [a.to_dict() for a in advice_of(_only(ev, listed))]
    rows: pl.DataFrame | Streamed = ev.spec
    if fleet:  # the rows are not all held: their sums, a batch of sources at a time
        names = setups.chart_names(setup_of, table) if grouped else {r: r for r in ev.per_run}
        rows = streamed(store, names, config, run_ids=ids)
    moves = what_moves(
        rows.select(_COUNTS) if isinstance(rows, pl.DataFrame) else None,
        {
            r: {**run, "source": shown.get(run.get("source") or "", run.get("source"))}
            for r, run in ev.runs.items()
        },
        z=ev.config["evidence"]["z"],
        sums=None if isinstance(rows, pl.DataFrame) else rows.factor_sums,
        # Over a fleet's runs alike by the hundred every matched pair is some 300 MB.
        keep_pairs=setups.PAIRS_KEPT if grouped or fleet else None,
    )
    # The one choke point: every string the report holds goes through the redactor here,
    # whatever field it sits in (what the renderers print, and what --json prints).
    report = Report(
        verdict=red.text(verdict_of(ev, found)),
        runs=red.walk(runs),
        findings=red.walk(findings),
        per_position=red.walk(per_position),
        advice=red.walk(advice),
        moves=red.walk(moves),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
    report.columns, report.not_in_log, report.quiet = columns, not_in_log, red.walk(quiet)
    report.runs_total = len(ev.per_run)
    if grouped:
        report.grouped, report.findings_left = True, left
        listed_setups, report.setups_left = setups.shown_setups(table)
        report.setups = red.walk(listed_setups)
        report.outliers = red.walk(outliers[: setups.MAX_OUTLIERS])
        report.outliers_total = len(outliers)
        report.runs_left = sum(1 for r in with_records if r in ev.runs) - len(report.runs)
    bars = table[: setups.MAX_SETUP_BARS] if grouped else []
    if with_charts:
        drawn = rows
        if isinstance(drawn, pl.DataFrame):
            drawn = drawn.select(charts.READS)
            if grouped:
                drawn = setups.named_rows(drawn, setups.chart_names(setup_of, table))
        report.charts, report.captions, report.chart_notes = _charts(
            drawn,
            report.per_position,
            [{**s, "run_id": s["setup"], "label": s["setup"]} for s in red.walk(bars)]
            if grouped
            else report.runs,
            red,
            z=z,
            grouped=grouped,
        )
    report.redaction = red.summary()
    return report


def _evidence(
    store: Store,
    ids: list[str],
    config: Config,
    reference: list[dict[str, Any]] | None,
    *,
    per_run: bool,
) -> tuple[Evidence, bool]:
    """The evidence, and whether its rows are only those the detectors need (``detect``'s
    way over a fleet's rows: then the charts and factors sum the rows a batch at a time,
    under each run's name where every run is listed, ``per_run``). A report of a few runs
    holds every row as before."""
    if store.sums_cover_rows() and _spec_rows(store) > NEEDED_OVER_ROWS:
        ev = gather_needed(store, run_ids=ids or None, config=config, reference=reference)
        if per_run or len(ev.per_run) > setups.LIST_RUNS_UP_TO:
            return ev, True
    return gather(store, run_ids=ids or None, config=config, reference=reference), False


def _spec_rows(store: Store) -> int:
    return int(store.spec_decode.select(pl.len()).collect().item())


def _setup_curves(
    per_run: Mapping[str, Mapping[str, Any]],
    setup_of: Mapping[str, str],
    table: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Per setup, the per-position counts of its runs summed and divided (the setups with
    most drafts, as many as a chart keeps apart)."""
    counts: dict[str, list[int]] = {}
    drafted: dict[str, list[int]] = {}
    for run_id, agg in per_run.items():
        setup = setup_of.get(run_id)
        got, of = agg.get("accepted_per_pos") or [], agg.get("drafted_per_pos") or []
        if setup is None or not got or len(got) != len(of):
            continue
        mine, theirs = counts.setdefault(setup, []), drafted.setdefault(setup, [])
        for i, (c, d) in enumerate(zip(got, of, strict=True)):
            if i == len(mine):
                mine.append(0)
                theirs.append(0)
            mine[i] += int(c or 0)
            theirs[i] += int(d or 0)
    out = []
    for s in table[: setups.CHART_SETUPS]:
        setup = s["setup"]
        if setup not in counts:
            continue
        out.append(
            {
                "run": setup,
                "label": setup,
                "drafts": s["drafts"],
                "k": len(counts[setup]),
                "accepted_per_pos": counts[setup],
                "per_position": [
                    c / d if d else None for c, d in zip(counts[setup], drafted[setup], strict=True)
                ],
                "acceptance_rate": s["acceptance_rate"],
            }
        )
    return out


def _only(ev: Evidence, listed: set[str] | None) -> Evidence:
    """``ev`` with the per-run sums of the listed runs only (all when None)."""
    if listed is None:
        return ev
    return replace(ev, per_run={r: a for r, a in ev.per_run.items() if r in listed})


def display_path(path: str) -> str:
    """A source path as a public report shows it: under the current folder, the path from
    there; elsewhere, the file name alone (a CI workspace or a home folder says too much)."""
    if "://" in path:
        return path  # a Prometheus or /metrics source: its URL holds no credentials
    here = Path.cwd().resolve()
    try:
        return str(Path(path).resolve().relative_to(here))
    except ValueError:
        return Path(path).name


def _label(run: Mapping[str, Any], shown: Mapping[str, str]) -> str:
    """Who a run is, for a reader: its file and lines, its method and k, its --label."""
    source = str(run.get("source") or "?")
    where = shown.get(source, source)
    if run.get("first_line") is not None:
        where += f":{run['first_line']}-{run.get('last_line') or run['first_line']}"
    bits = [where]
    if run.get("spec_method"):
        bits.append(str(run["spec_method"]))
    if run.get("k"):
        bits.append(f"k={run['k']}")
    if run.get("quantization"):
        bits.append(str(run["quantization"]))
    if run.get("label"):
        bits.append(f"({run['label']})")
    return " ".join(bits)


def _finding_dict(f: Finding, red: Redactor, evidence: list[str]) -> dict[str, Any]:
    d = red.walk(f.to_dict())
    # The quoted lines are redacted together (a private key spans lines), then cut: a
    # secret cut in two would no longer look like one.
    quoted = red.text("\n".join(evidence)).split("\n") if evidence else []
    d["evidence"] = [line[:EVIDENCE_WIDTH] for line in quoted]
    return d


LOG_CHANGED = "the log changed since it was ingested"


def _evidence_lines(
    found: list[Finding],
    runs: Mapping[str, Mapping[str, Any]],
    sources: Mapping[str, Mapping[str, Any]],
) -> list[list[str]]:
    """Per finding, a few verbatim lines of the log where its evidence starts: only from the
    very file that was ingested (its size and sha256 as the store recorded them). A log that
    changed or is gone is not quoted, and the finding says so once. Each file is read once,
    however many findings point into it."""
    wanted: dict[str, dict[int, list[str]]] = {}
    keys: list[tuple[str, int] | None] = []
    for f in found:
        first = f.lines[0]
        run = runs.get((f.run_id or "").split(",")[0], {})
        sid = str(run.get("source_id") or "")
        source = sources.get(sid) or {}
        path = source.get("path")
        if first is None or not path or path == "-" or source.get("kind") not in (None, "log"):
            keys.append(None)  # a paste or a Prometheus source: nothing to read again
            continue
        wanted.setdefault(sid, {})[first] = []
        keys.append((sid, first))
    changed = set()
    for sid, starts in wanted.items():
        path = str(sources[sid]["path"])
        if not _as_ingested(path, sources[sid].get("size"), sources[sid].get("sha256")):
            changed.add(sid)
            continue
        try:
            read = unhashed(path).lines_at(starts, EVIDENCE_LINES)
        except (OSError, SpecscopeError):
            changed.add(sid)
            continue
        for start, lines in read.items():
            starts[start].extend(line.rstrip("\r") for line in lines)
    return [
        ([f"({LOG_CHANGED}: nothing quoted)"] if k[0] in changed else wanted[k[0]][k[1]])
        if k
        else []
        for k in keys
    ]


def _as_ingested(path: str, size: Any, sha256: Any) -> bool:
    """Whether ``path`` is a regular file of the recorded size and sha256 (before and after
    hashing, so a file rewritten meanwhile does not pass)."""
    if not isinstance(size, int) or not isinstance(sha256, str) or not sha256:
        return False
    try:
        before = os.stat(path)
        if not stat.S_ISREG(before.st_mode) or before.st_size != size:
            return False
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        after = os.stat(path)
    except OSError:
        return False
    same = (before.st_size, before.st_mtime_ns) == (after.st_size, after.st_mtime_ns)
    return same and hmac.compare_digest(digest.hexdigest(), sha256)


# The columns what_moves reads: filters over millions of rows copy only these.
_COUNTS = ("run_id", "drafts", "draft_tokens", "accepted_tokens", "running_reqs")


# What each chart is for, told under it: a reader should know where to look.
CAPTIONS = {
    "per_position": "Each line is a run: the share of drafts whose position i was accepted "
    "(unconditional, so it can only fall). A line that drops to zero at one position is a "
    "cliff; a long tail near zero is drafting that does not pay.",
    "over_time": "Acceptance of each logging interval (lines) and the requests running "
    "(bars). Look for a level that changes mid-run, or that falls as more requests run.",
    "running": "Acceptance by requests running, from summed counts with 95% intervals: a "
    "drop from one request to two or more is a concurrency collapse.",
    "prefix_cache": "Acceptance by prefix-cache hit rate: a trend down means cached prefixes "
    "hurt the drafter.",
    "across_runs": "Each run's acceptance with its 95% interval: runs whose intervals do not "
    "overlap accept differently.",
}
# Over many runs, the charts whose lines or bars are setups: their titles and captions.
_BY_SETUP = {
    "per_position": (
        "Per-position acceptance by setup",
        "Each line is a setup (the runs of one model, method, k and hardware, counts summed): "
        "the share of drafts whose position i was accepted. A line that drops to zero at one "
        "position is a cliff; a long tail near zero is drafting that does not pay.",
    ),
    "over_time": (
        "Acceptance over time by setup, with requests running",
        "Acceptance of each setup's runs summed over time buckets (lines), and the requests "
        "running (bars). Look for a level that changes, or that falls as more requests run.",
    ),
    "prefix_cache": (
        "Acceptance against prefix cache hit rate by setup",
        "Acceptance by prefix-cache hit rate, each setup's runs together: a trend down means "
        "cached prefixes hurt the drafter.",
    ),
    "across_runs": (
        "Acceptance across setups",
        "Each setup's acceptance (its runs' counts summed) with its 95% interval: setups whose "
        "intervals do not overlap accept differently. Runs far below their own setup are "
        "listed as outliers.",
    ),
}
# Why a chart is not drawn, when it is not: said in a sentence instead.
_NOT_DRAWN = {
    "per_position": "no run prints per-position counts",
    "over_time": "fewer than two intervals with timestamps",
    "running": "acceptance was seen at only one number of requests running",
    "prefix_cache": "no prefix-cache hit rate beside the spec-decode records",
    "across_runs": "only one run",
}


def _charts(
    spec: pl.DataFrame | Streamed,
    per_position: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    red: Redactor,
    *,
    z: float,
    grouped: bool = False,
) -> tuple[list[tuple[str, str, dict[str, Any]]], dict[str, str], list[str]]:
    """The charts that have something to show, what each shows, and a sentence for each
    one left out. ``grouped``: ``spec``'s run ids and ``runs`` are setups."""
    labels = {r["run_id"]: r["label"] for r in runs}
    if isinstance(spec, Streamed):  # summed already, over every row
        timed, running = spec.over_time, spec.running
        binned = spec.prefix_cache
        prefix = charts.prefix_cache_chart(binned, red, labels) if binned is not None else None
    else:
        timed = setups.over_time_rows(spec, points=setups.OVER_TIME_POINTS) if grouped else spec
        running, prefix = spec, charts.against_prefix_cache(spec, red, labels)
    runs = runs[: setups.MAX_SETUP_BARS] if grouped else runs
    built = [
        ("per_position", charts.per_position(per_position, red, z=z)),
        ("over_time", charts.over_time(timed, red, labels)),
        ("running", charts.against_running(running, z=z)),
        ("prefix_cache", prefix),
        ("across_runs", charts.across_runs(runs, red, z=z)),
    ]
    out, captions, notes = [], {}, []
    for name, chart in built:
        if chart is None:
            notes.append(f"No {name.replace('_', ' ')} chart: {_NOT_DRAWN[name]}.")
            continue
        spec_dict = chart  # our own specs: tests validate them against the schema
        if grouped and name in _BY_SETUP:
            spec_dict["title"] = _BY_SETUP[name][0]
        title = spec_dict.get("title") or name
        out.append((name, title if isinstance(title, str) else name, spec_dict))
        caption = _BY_SETUP[name][1] if grouped and name in _BY_SETUP else CAPTIONS[name]
        captions[name] = red.text(caption + str(spec_dict.get("usermeta", {}).get("note", "")))
    return out, captions, notes


# -- Markdown -------------------------------------------------------------------------------------


# -- HTML -----------------------------------------------------------------------------------------


__all__ = ["RUN_COLUMNS", "Report", "build_report"]
