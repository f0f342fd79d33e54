"""``report``: a triage report to attach to a GitHub issue, as Markdown (with PNG charts
beside it) or as one self-contained HTML file (charts interactive, scripts inlined).

Top to bottom: a verdict, the runs, the findings with a few redacted log lines of
evidence, the per-position acceptance and the k advice, the charts, and what moves
acceptance across the runs of the store. Every string from a log or a store goes through
the redactor and is escaped for the target format: text never becomes markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from specscope.analysis.advise import advice_of
from specscope.analysis.detectors import findings_of
from specscope.analysis.evidence import gather
from specscope.analysis.factors import what_moves
from specscope.analysis.findings import Finding, json_safe
from specscope.analysis.verdict import verdict_of
from specscope.errors import SpecscopeError
from specscope.logs.source import unhashed
from specscope.report import charts
from specscope.report.redact import Redactor
from specscope.store.reading import Store
from specscope.thresholds import Config, load_config

EVIDENCE_LINES = 3
RUN_COLUMNS = (
    ("run", "run"),
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
)


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "runs": self.runs,
            "findings": self.findings,
            "per_position": self.per_position,
            "advice": self.advice,
            "what_moves_acceptance": self.moves,
            "charts": [{"name": n, "title": t} for n, t, _ in self.charts],
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
) -> Report:
    red = redactor or Redactor()
    ids = list(run_ids or [])
    ev = gather(store, run_ids=ids or None, config=config or load_config(), reference=reference)
    found = findings_of(ev)
    paths = {r["source_id"]: r["path"] for r in store.sources.collect().to_dicts()}
    runs = []
    for run_id, run in ev.runs.items():
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
                    "run": run_id,
                    "label": _label(run),
                },
            }
        )
    for row in runs:
        for key in (
            "model",
            "served_model_name",
            "draft_model",
            "source",
            "label",
            "hardware",
            "config",
            "pids",
            "overrides",
        ):
            if isinstance(row.get(key), str):
                row[key] = red(row[key])
    evidence = _evidence_lines(found, ev.runs, paths)
    findings = [_finding_dict(f, red, lines) for f, lines in zip(found, evidence, strict=True)]
    per_position = []
    for run_id, agg in ev.per_run.items():
        if agg.get("per_position"):
            per_position.append(
                {
                    "run": run_id,
                    "label": red(_label(ev.runs.get(run_id, {}))),
                    "drafts": agg.get("drafts"),
                    "k": agg.get("k"),
                    "accepted_per_pos": agg.get("accepted_per_pos"),
                    "per_position": agg.get("per_position"),
                    "acceptance_rate": agg.get("acceptance_rate"),
                }
            )
    advice = [a.to_dict() for a in advice_of(ev)]
    report = Report(
        verdict=verdict_of(ev, found),
        runs=runs,
        findings=findings,
        per_position=per_position,
        advice=advice,
        moves=what_moves(ev.spec.select(_COUNTS), ev.runs, z=ev.config["evidence"]["z"]),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
    if with_charts:
        report.charts = _charts(
            ev.spec.select(charts.READS), per_position, runs, red, z=ev.config["evidence"]["z"]
        )
    report.redaction = red.summary()
    return report


def _label(run: Mapping[str, Any]) -> str:
    bits = [str(run.get("run_id", "?"))]
    for key in ("spec_method", "quantization", "label"):
        if run.get(key):
            bits.append(str(run[key]))
    if run.get("k"):
        bits.append(f"k={run['k']}")
    return " ".join(bits)


def _finding_dict(f: Finding, red: Redactor, evidence: list[str]) -> dict[str, Any]:
    d = f.to_dict()
    d["explanation"] = red(f.explanation)
    d["next_step"] = red(f.next_step)
    d["source"] = red(f.source)
    d["evidence"] = [red(line) for line in evidence]
    return d


def _evidence_lines(
    found: list[Finding], runs: Mapping[str, Mapping[str, Any]], paths: Mapping[str, str]
) -> list[list[str]]:
    """Per finding, a few verbatim lines of the log where its evidence starts (when the file
    is there). Each file is read once, however many findings point into it."""
    wanted: dict[str, dict[int, list[str]]] = {}
    keys: list[tuple[str, int] | None] = []
    for f in found:
        first = f.lines[0]
        run = runs.get((f.run_id or "").split(",")[0], {})
        path = paths.get(run.get("source_id", ""))
        if first is None or not path:
            keys.append(None)
            continue
        wanted.setdefault(path, {})[first] = []
        keys.append((path, first))
    for path, starts in wanted.items():
        if not Path(path).is_file():
            continue
        try:
            read = unhashed(path).lines_at(starts, EVIDENCE_LINES)
        except (OSError, SpecscopeError):
            continue
        for start, lines in read.items():
            starts[start].extend(line.rstrip("\r")[:400] for line in lines)
    return [wanted[k[0]][k[1]] if k else [] for k in keys]


# The columns what_moves reads: filters over millions of rows copy only these.
_COUNTS = ("run_id", "drafts", "draft_tokens", "accepted_tokens")


def _charts(
    spec: pl.DataFrame,
    per_position: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    red: Redactor,
    *,
    z: float,
) -> list[tuple[str, str, dict[str, Any]]]:
    built = [
        ("per_position", charts.per_position(per_position, red, z=z)),
        ("over_time", charts.over_time(spec, red)),
        ("running", charts.against_running(spec, z=z)),
        ("prefix_cache", charts.against_prefix_cache(spec, red)),
        ("across_runs", charts.across_runs(runs, red, z=z)),
    ]
    out = []
    for name, chart in built:
        if chart is not None:
            spec_dict = chart.to_dict(validate=False)  # our own specs: tests validate them
            title = spec_dict.get("title") or name
            out.append((name, title if isinstance(title, str) else name, spec_dict))
    return out


# -- Markdown -------------------------------------------------------------------------------------


# -- HTML -----------------------------------------------------------------------------------------


__all__ = ["RUN_COLUMNS", "Report", "build_report"]
