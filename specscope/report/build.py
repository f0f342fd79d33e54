"""``report``: a triage report to attach to a GitHub issue, as Markdown (with PNG charts
beside it) or as one self-contained HTML file (charts interactive, scripts inlined).

Top to bottom: a verdict, the runs, the findings with a few redacted log lines of
evidence, the per-position acceptance and the k advice, the charts, and what moves
acceptance across the runs of the store. Every string from a log or a store goes through
the redactor and is escaped for the target format: text never becomes markup.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from specscope.analysis.advise import advice_of
from specscope.analysis.detectors import findings_of
from specscope.analysis.evidence import gather
from specscope.analysis.findings import Finding, Severity
from specscope.errors import SpecscopeError, UsageError
from specscope.logs.source import unhashed
from specscope.report import charts
from specscope.report.redact import Redactor
from specscope.stats import newcombe, wilson
from specscope.store.reading import Store
from specscope.thresholds import load_config

GITHUB_COMMENT_LIMIT = 65_536
EVIDENCE_LINES = 3
FACTORS = (
    "enable_prefix_caching",
    "quantization",
    "hardware",
    "spec_method",
    "k",
    "vllm_version",
    "kv_cache_dtype",
    "attention_backend",
)
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
) -> Report:
    red = redactor or Redactor()
    ids = list(run_ids or [])
    ev = gather(store, run_ids=ids or None, config=load_config())
    found = findings_of(ev)
    paths = {r["source_id"]: r["path"] for r in store.sources.collect().to_dicts()}
    runs = []
    for run_id, run in ev.runs.items():
        agg = ev.per_run.get(run_id, {})
        runs.append(
            {
                **{k: _plain(v) for k, v in run.items()},
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
        verdict=_verdict(runs, found),
        runs=runs,
        findings=findings,
        per_position=per_position,
        advice=advice,
        moves=what_moves(ev.spec.select(_COUNTS), ev.runs),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
    if with_charts:
        report.charts = _charts(ev.spec.select(charts.READS), per_position, runs, red)
    report.redaction = red.summary()
    return report


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


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
            found = unhashed(path).lines_at(starts, EVIDENCE_LINES)
        except (OSError, SpecscopeError):
            continue
        for start, lines in found.items():
            starts[start].extend(line.rstrip("\r")[:400] for line in lines)
    return [wanted[k[0]][k[1]] if k else [] for k in keys]


def _verdict(runs: list[dict[str, Any]], found: list[Finding]) -> str:
    n_runs = len(runs)
    drafts = sum(r.get("drafts") or 0 for r in runs)
    worst = [f for f in found if f.severity == Severity.CRITICAL] or [
        f for f in found if f.severity == Severity.WARNING
    ]
    head = f"{n_runs} run{'s' if n_runs != 1 else ''}, {drafts:,} drafts observed."
    if not worst:
        return (
            head + " No warning or critical finding: speculative decoding behaves as its "
            "method and configuration lead one to expect."
        )
    kinds = sorted({f.kind for f in worst})
    first = worst[0]
    return (
        f"{head} {len(worst)} {first.severity!s} finding{'s' if len(worst) != 1 else ''} "
        f"({', '.join(kinds)}). The most serious: {first.kind} in run {first.run_id}. "
        f"{first.explanation.split('. ')[0]}."
    )


def what_moves(spec: pl.DataFrame, runs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per factor: weighted acceptance per value, and the effect where two runs differ in
    that factor alone (matched pairs); where no such pair exists, what it is confounded with."""
    per_run: dict[str, dict[str, float]] = {}
    for row in (
        spec.filter(pl.col("drafts").is_not_null())
        .group_by("run_id")
        .agg(pl.col("accepted_tokens").sum(), pl.col("draft_tokens").sum(), pl.col("drafts").sum())
        .to_dicts()
    ):
        if row["draft_tokens"]:
            per_run[row["run_id"]] = row
    out = []
    for factor in FACTORS:
        values: dict[Any, list[str]] = {}
        for run_id in per_run:
            value = runs.get(run_id, {}).get(factor)
            if value is not None:
                values.setdefault(value, []).append(run_id)
        if len(values) < 2:
            continue
        groups = []
        for value, ids in sorted(values.items(), key=lambda kv: str(kv[0])):
            acc = sum(per_run[i]["accepted_tokens"] for i in ids)
            tokens = sum(per_run[i]["draft_tokens"] for i in ids)
            drafts = sum(per_run[i]["drafts"] for i in ids)
            low, high = wilson(acc / (tokens / drafts), drafts)
            groups.append(
                {
                    "value": _plain(value),
                    "runs": len(ids),
                    "drafts": drafts,
                    "acceptance_rate": acc / tokens,
                    "interval": [low, high],
                }
            )
        pairs = []
        others = [f for f in FACTORS if f != factor]
        # Only runs alike in everything else can pair: bucket them first rather than try
        # every pair (thousands of runs would make that quadratic).
        alike: dict[str, list[str]] = {}
        for run_id in sorted(per_run):
            run = runs.get(run_id, {})
            if run.get(factor) is not None:
                key = repr([run.get("model"), *(run.get(o) for o in others)])
                alike.setdefault(key, []).append(run_id)
        for ids in alike.values():
            for a, b in itertools.combinations(ids, 2):
                va, vb = runs[a].get(factor), runs[b].get(factor)
                if va != vb:
                    pairs.append(_pair(per_run[a], per_run[b], a, b, va, vb))
        pairs.sort(key=lambda p: (p["run_a"], p["run_b"]))
        confounded = (
            sorted(
                {
                    o
                    for o in others
                    if len({str(runs.get(i, {}).get(o)) for ids in values.values() for i in ids})
                    > 1
                }
            )
            if not pairs
            else []
        )
        out.append(
            {
                "factor": factor,
                "groups": groups,
                "matched_pairs": pairs,
                "confounded_with": confounded,
            }
        )
    return out


def _pair(
    a: Mapping[str, float], b: Mapping[str, float], id_a: str, id_b: str, va: Any, vb: Any
) -> dict[str, Any]:
    pa = a["accepted_tokens"] / a["draft_tokens"]
    pb = b["accepted_tokens"] / b["draft_tokens"]
    low, high = newcombe(a, b)
    return {
        "run_a": id_a,
        "value_a": _plain(va),
        "run_b": id_b,
        "value_b": _plain(vb),
        "rate_a": pa,
        "rate_b": pb,
        "difference": pb - pa,
        "interval": [low, high],
    }


# The columns what_moves reads: filters over millions of rows copy only these.
_COUNTS = ("run_id", "drafts", "draft_tokens", "accepted_tokens")


def _charts(
    spec: pl.DataFrame,
    per_position: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    red: Redactor,
) -> list[tuple[str, str, dict[str, Any]]]:
    built = [
        ("per_position", charts.per_position(per_position, red)),
        ("over_time", charts.over_time(spec, red)),
        ("running", charts.against_running(spec)),
        ("prefix_cache", charts.against_prefix_cache(spec, red)),
        ("across_runs", charts.across_runs(runs, red)),
    ]
    out = []
    for name, chart in built:
        if chart is not None:
            spec_dict = chart.to_dict(validate=False)  # our own specs: tests validate them
            title = spec_dict.get("title") or name
            out.append((name, title if isinstance(title, str) else name, spec_dict))
    return out


# -- Markdown -------------------------------------------------------------------------------------


# Characters that Markdown could read as markup (html.escape has taken care of < > &).
_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]|~"})


def md(value: Any) -> str:
    """A value as Markdown text that renders as itself (no markup, no HTML)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value), quote=False).translate(_MD_SPECIAL).replace("\n", " ")


def _fence(lines: list[str]) -> str:
    text = "\n".join(lines)
    longest = max((len(m) for m in _backtick_runs(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _backtick_runs(text: str) -> list[str]:
    runs, current = [], ""
    for c in text:
        if c == "`":
            current += c
        elif current:
            runs.append(current)
            current = ""
    return [*runs, current] if current else runs


def render_markdown(report: Report, out: Path, *, images: bool = True) -> str:
    """The report as Markdown; chart PNGs go to ``<out stem>_files/`` beside it."""
    parts = [f"# Speculative decoding triage\n\n{md(report.verdict)}\n"]
    parts.append("## Runs\n")
    parts.append("| " + " | ".join(h for h, _ in RUN_COLUMNS) + " |")
    parts.append("|" + "---|" * len(RUN_COLUMNS))
    for r in report.runs:
        cells = []
        for _, key in RUN_COLUMNS:
            value = r.get(key)
            cells.append(
                f"{value:.1%}" if key == "acceptance_rate" and value is not None else md(value)
            )
        parts.append("| " + " | ".join(cells) + " |")
    parts.append("\n## Findings\n")
    if not report.findings:
        parts.append("No findings.\n")
    for f in report.findings:
        where = md(f["source"]) if f["source"] else "–"
        if f["lines"][0] is not None:
            where += f":{f['lines'][0]}" + (
                f"-{f['lines'][1]}" if f["lines"][1] not in (None, f["lines"][0]) else ""
            )
        parts.append(f"### {f['severity']}: {f['kind']} (run {md(f['run_id'])})\n")
        parts.append(f"{md(f['explanation'])}\n\n**Next:** {md(f['next_step'])}\n")
        numbers = ", ".join(f"{md(k)} {md(v)}" for k, v in f["measured"].items())
        expected = ", ".join(f"{md(k)} {md(v)}" for k, v in f["expected"].items())
        evidence = ", ".join(f"{md(k)} {md(v)}" for k, v in f["sample"].items())
        body = [f"- where: {where}", f"- measured: {numbers}"]
        if expected:
            body.append(f"- expected: {expected}")
        if evidence:
            body.append(f"- evidence: {evidence}")
        detail = "\n".join(body)
        if f["evidence"]:
            detail += "\n\n" + _fence(f["evidence"])
        parts.append(f"<details><summary>Evidence</summary>\n\n{detail}\n\n</details>\n")
    parts.append("## Per-position acceptance and k advice\n")
    for p in report.per_position:
        rates = " ".join(f"{a:.3f}" if a is not None else "–" for a in p["per_position"])
        advice = next((a for a in report.advice if a["run_id"] == p["run"]), None)
        hint = (
            f" Best k by the cost model: **{advice['best_k']}** "
            f"(c={advice['cost_ratio']}, {md(advice['cost_source'])})."
            if advice
            else ""
        )
        parts.append(f"- **{md(p['run'])}** ({md(p['drafts'])} drafts): {rates}.{hint}")
    if report.advice:
        table = ["| run | k′ | τ(k′) | speedup |", "|---|---|---|---|"]
        for a in report.advice:
            for point in a["curve"]:
                mark = " ←" if point["k"] == a["best_k"] else ""
                table.append(
                    f"| {md(a['run_id'])} | {point['k']}{mark} | {point['tau']:.2f} | "
                    f"{point['speedup']:.3f} |"
                )
        parts.append(
            "\n<details><summary>τ and speedup for every k′</summary>\n\n"
            + "\n".join(table)
            + "\n\n</details>\n"
        )
    if report.charts:
        parts.append("## Charts\n")
        files = out.parent / f"{out.stem}_files"
        for name, title, spec in report.charts:
            if images:
                files.mkdir(parents=True, exist_ok=True)
                png = files / f"{name}.png"
                png.write_bytes(_png(spec))
                parts.append(f"![{md(title)}]({files.name}/{png.name})\n")
    parts.append("## What moves acceptance\n")
    if not report.moves:
        parts.append("The store's runs do not differ in any factor with counts on both sides.\n")
    for m in report.moves:
        groups = "; ".join(
            f"{md(g['value'])}: {g['acceptance_rate']:.1%} [{g['interval'][0]:.1%}, "
            f"{g['interval'][1]:.1%}] over {g['runs']} run(s)"
            for g in m["groups"]
        )
        parts.append(f"- **{md(m['factor'])}**: {groups}.")
        for pair in m["matched_pairs"]:
            parts.append(
                f"  - matched pair {md(pair['run_a'])} ({md(pair['value_a'])}) → "
                f"{md(pair['run_b'])} ({md(pair['value_b'])}): {pair['difference']:+.1%} "
                f"[{pair['interval'][0]:+.1%}, {pair['interval'][1]:+.1%}]"
            )
        if m["confounded_with"]:
            parts.append(
                f"  - no pair of runs differs in this alone: confounded with "
                f"{', '.join(md(c) for c in m['confounded_with'])}."
            )
    parts.append(
        f"\n<sub>{md(report.redaction)} Generated by specscope, {md(report.generated)}.</sub>\n"
    )
    text = "\n".join(parts)
    if len(text) > GITHUB_COMMENT_LIMIT:
        text = _shorten(text)
    return text


def _shorten(text: str) -> str:
    """Drop evidence blocks, longest first, until the report fits one GitHub comment."""
    while len(text) > GITHUB_COMMENT_LIMIT:
        start = text.rfind("<details>")
        end = text.find("</details>", start)
        if start < 0 or end < 0:
            return text[: GITHUB_COMMENT_LIMIT - 200] + "\n\n(cut to fit one GitHub comment)\n"
        text = (
            text[:start]
            + "<sub>(details left out to fit one GitHub comment)</sub>"
            + text[end + len("</details>") :]
        )
    return text


def _png(spec: dict[str, Any]) -> bytes:
    import vl_convert

    return vl_convert.vegalite_to_png(spec, scale=1.5)


# -- HTML -----------------------------------------------------------------------------------------


def _script_json(value: Any) -> str:
    """JSON safe inside <script>: no '</' can close the tag, no '<!--' can open a comment."""
    return json.dumps(value).replace("</", "<\\/").replace("<!--", "<\\!--")


def vega_bundle() -> str:
    """The Vega, Vega-Lite and vega-embed scripts an HTML report inlines. Building them
    takes about a second, so they are kept in ``$SPECSCOPE_CACHE`` (default
    ``~/.cache/specscope``) per vl-convert version; without a writable cache they are built
    each time."""
    import vl_convert

    version = getattr(vl_convert, "__version__", "unknown")
    base = os.environ.get("SPECSCOPE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "specscope"
    )
    cached = Path(base) / f"vega-bundle-{version}.js"
    try:
        text = cached.read_text(encoding="utf-8")
        if "vegaEmbed" in text:
            return text
    except OSError:
        pass
    text = vl_convert.javascript_bundle()
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, cached)  # never a half-written bundle under the name
    except OSError:
        pass
    return text


def render_html(report: Report) -> str:
    e = html.escape
    rows = "".join(
        "<tr>" + "".join(f"<td>{e(_cell(r.get(k), k))}</td>" for _, k in RUN_COLUMNS) + "</tr>"
        for r in report.runs
    )
    head = "".join(f"<th>{e(h)}</th>" for h, _ in RUN_COLUMNS)
    findings = []
    for f in report.findings:
        evidence = "".join(f"{e(line)}\n" for line in f["evidence"])
        numbers = ", ".join(f"{k} {_cell(v, k)}" for k, v in f["measured"].items())
        findings.append(
            f'<section class="finding {e(f["severity"])}"><h3>{e(f["severity"])}: '
            f"{e(f['kind'])} <small>run {e(str(f['run_id']))}</small></h3>"
            f"<p>{e(f['explanation'])}</p><p><b>Next:</b> {e(f['next_step'])}</p>"
            f"<p>measured: {e(numbers)}</p>"
            + (f"<pre>{evidence}</pre>" if evidence else "")
            + "</section>"
        )
    chart_divs = "".join(
        f'<figure><div id="chart-{i}" class="chart" data-name="{e(name)}"></div>'
        f'<script type="application/json" id="spec-{i}">{_script_json(spec)}</script></figure>'
        for i, (name, _, spec) in enumerate(report.charts)
    )
    moves = "".join(
        f"<li><b>{e(m['factor'])}</b>: "
        + "; ".join(f"{e(str(g['value']))}: {g['acceptance_rate']:.1%}" for g in m["groups"])
        + (
            ""
            if m["matched_pairs"]
            else f" (confounded with {e(', '.join(m['confounded_with']))})"
            if m["confounded_with"]
            else ""
        )
        + "</li>"
        for m in report.moves
    )
    bundle = vega_bundle().replace("</script", "<\\/script")
    embed = (
        "document.querySelectorAll('.chart').forEach(function (el, i) {"
        "var spec = JSON.parse(document.getElementById('spec-' + i).textContent);"
        "vegaEmbed(el, spec, {renderer: 'svg', actions: false}).then(function () {"
        "el.setAttribute('data-rendered', 'yes'); });});"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:\">"
        "<title>Speculative decoding triage</title><style>"
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
        ".critical{border-left:4px solid #c00;padding-left:8px}"
        ".warning{border-left:4px solid #e90;padding-left:8px}"
        ".info{border-left:4px solid #39c;padding-left:8px}pre{white-space:pre-wrap}"
        "</style></head><body><h1>Speculative decoding triage</h1>"
        f"<p>{e(report.verdict)}</p><h2>Runs</h2><table><tr>{head}</tr>{rows}</table>"
        f"<h2>Findings</h2>{''.join(findings) or '<p>No findings.</p>'}"
        f"<h2>Charts</h2>{chart_divs}<h2>What moves acceptance</h2><ul>{moves}</ul>"
        f"<p><small>{e(report.redaction)} Generated by specscope, {e(report.generated)}."
        f"</small></p><script>{bundle}</script><script>{embed}</script></body></html>"
    )


def _cell(value: Any, key: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, list):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    if key == "acceptance_rate" and isinstance(value, float):
        return f"{value:.1%}"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def report_kind(out: Path) -> str:
    """``html`` or ``markdown``, from the name the report is to be written under."""
    suffix = out.suffix.lower()
    if suffix in (".html", ".htm"):
        return "html"
    if suffix in (".md", ".markdown"):
        return "markdown"
    raise UsageError(f"--out names a .md or an .html file, not {out.name!r}")


def write_report(report: Report, out: Path) -> Path:
    kind = report_kind(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if kind == "html":
        out.write_text(render_html(report), encoding="utf-8")
    else:
        out.write_text(render_markdown(report, out), encoding="utf-8")
    return out


__all__ = [
    "GITHUB_COMMENT_LIMIT",
    "Report",
    "build_report",
    "md",
    "newcombe",
    "render_html",
    "render_markdown",
    "what_moves",
    "write_report",
]
