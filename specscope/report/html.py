"""A report as one self-contained HTML file: charts interactive, scripts inlined, every
string escaped (and without terminal controls)."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from specscope.report.advice import advice_said
from specscope.report.build import Report
from specscope.report.markdown import QUIET_NAMED
from specscope.report.redact import strip_controls
from specscope.report.requests import requests_html
from specscope.report.setups import severity_said


def _e(value: Any) -> str:
    """Text as HTML text: escaped, without terminal controls."""
    return html.escape(strip_controls(str(value)))


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
    # vl_convert's stub wrongly requires ``snippet``: it defaults to None (the default snippet).
    text = vl_convert.javascript_bundle()  # type: ignore[call-arg]
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, cached)  # never a half-written bundle under the name
    except OSError:
        pass
    return text


def render_html(report: Report) -> str:
    e = _e
    rows = "".join(
        "<tr>" + "".join(f"<td>{e(_cell(r.get(k), k))}</td>" for _, k in report.columns) + "</tr>"
        for r in report.runs
    )
    head = "".join(f"<th>{e(h)}</th>" for h, _ in report.columns)
    runs_note = ""
    if report.not_in_log:
        runs_note += f"<p>Not in the log: {e(', '.join(report.not_in_log))}.</p>"
    if report.quiet:
        named = report.quiet[:QUIET_NAMED]
        left = len(report.quiet) - len(named)
        more = f"; and {left:,} more" if left else ""
        runs_note += (
            f"<p>{len(report.quiet):,} launch(es) without spec-decode records: "
            f"{e('; '.join(named))}{more}.</p>"
        )
    if report.grouped:
        runs_note = (
            f"<p>The {len(report.runs):,} runs the findings shown name, and the outliers; "
            f"{report.runs_left:,} more are not listed (<code>specscope report --per-run</code> "
            "lists every run).</p>" + runs_note
        )
    runs_html = (
        f"<table><tr>{head}</tr>{rows}</table>"
        if report.runs
        else "<p>No run with speculative-decoding records.</p>"
    ) + runs_note
    findings = []
    for f in report.findings:
        evidence = "".join(f"{e(line)}\n" for line in f["evidence"])
        numbers = ", ".join(f"{k} {_cell(v, k)}" for k, v in f["measured"].items() if v is not None)
        findings.append(
            f'<section class="finding {e(f["severity"])}"><h3>{e(f["severity"])}: '
            f"{e(f['kind'])} <small>run {e(str(f['run_id']))}</small></h3>"
            f"<p>{e(f['explanation'])}</p><p><b>Next:</b> {e(f['next_step'])}</p>"
            + (f"<p>measured: {e(numbers)}</p>" if numbers else "")
            + (
                f"<p><b>Confidence:</b> {e(f['confidence']['phrase'])}</p>"
                if f.get("confidence")
                else ""
            )
            + (f"<pre>{evidence}</pre>" if evidence else "")
            + "</section>"
        )
    if report.findings_left:
        n = sum(x["findings"] for x in report.findings_left)
        findings.append(
            f"<p>{n:,} more finding(s), not shown (<code>specscope detect</code> lists each): "
            + e(
                "; ".join(
                    f"{x['findings']:,} {x['kind']} ({x['severity']}, {x['runs']:,} runs)"
                    for x in report.findings_left
                )
            )
            + ".</p>"
        )
    chart_divs = "".join(
        f'<figure><div id="chart-{i}" class="chart" data-name="{e(name)}"></div>'
        f'<script type="application/json" id="spec-{i}">{_script_json(spec)}</script>'
        f"<figcaption>{e(report.captions.get(name, ''))}</figcaption></figure>"
        for i, (name, _, spec) in enumerate(report.charts)
    ) + "".join(f"<p>{e(n)}</p>" for n in report.chart_notes)
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
        f"<p>{e(report.verdict)}</p>{_setups(report)}<h2>Runs</h2>{runs_html}"
        f"<h2>Findings</h2>{''.join(findings) or '<p>No findings.</p>'}"
        f"{requests_html(report.findings)}{_advice(report)}"
        f"<h2>Charts</h2>{chart_divs}<h2>What moves acceptance</h2><ul>{moves}</ul>"
        f"<p><small>{e(report.redaction)} Generated by specscope"
        f"{', ' + e(report.generated) if report.generated else ''}."
        f"</small></p><script>{bundle}</script><script>{embed}</script></body></html>"
    )


def _advice(report: Report) -> str:
    """Each advised run's word from the cost model (``advise``): its best k, or off."""
    if not report.advice:
        return ""
    items = "".join(
        f"<li>run {_e(a['run_id'])}: {_e(before)}<b>{_e(head)}</b>{_e(after)}</li>"
        for a in report.advice
        for before, head, after in [advice_said(a)]
    )
    return f"<h2>k advice</h2><ul>{items}</ul>"


def _setups(report: Report) -> str:
    """The setups table and the outliers of a report over many runs ('' for a few runs)."""
    if not report.grouped:
        return ""
    e = _e
    rows = []
    for s in report.setups:
        rate = (
            f"{s['acceptance_rate']:.1%} [{s['interval'][0]:.1%}, {s['interval'][1]:.1%}]"
            if s["acceptance_rate"] is not None
            else "–"
        )
        worst = f"{s['worst_run']} ({s['worst_rate']:.1%})" if s["worst_run"] is not None else "–"
        cells = (
            s["setup"],
            f"{s['runs']:,}",
            f"{s['drafts']:,}",
            rate,
            _cell(s["mean_acceptance_length"]),
            severity_said(s["findings"]),
            f"{s['outliers']:,}",
            worst,
        )
        rows.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>")
    head = "".join(
        f"<th>{h}</th>"
        for h in ("setup", "runs", "drafts", "acceptance (95%)", "τ", "findings", "outliers")
    )
    outliers = "".join(
        f"<li>{e(o['run_id'])} ({e(o['setup'])}): {o['acceptance_rate']:.1%} "
        f"[{o['interval'][0]:.1%}, {o['interval'][1]:.1%}] against "
        f"{o['setup_rest_rate']:.1%}, {o['drafts']:,} drafts</li>"
        for o in report.outliers
    )
    total = report.outliers_total
    left = report.setups_left
    more = (
        f"<p>{left['setups']:,} more setups ({left['runs']:,} runs, {left['drafts']:,} "
        f"drafts, {left['outliers']:,} outliers) are not listed: those with the most drafts "
        "and those that accept least are.</p>"
        if left.get("setups")
        else ""
    )
    said = more + (
        f"<p><b>Outliers</b>: {total:,} run(s) accept less than the rest of their setup (the "
        f"run's 95% upper bound under the rest's lower bound); the furthest below:</p>"
        f"<ul>{outliers}</ul>"
        if total
        else "<p>No run accepts less than the rest of its setup.</p>"
    )
    return (
        f"<h2>Setups</h2><p>{report.runs_total:,} runs in "
        f"{len(report.setups) + left.get('setups', 0):,} setups "
        "(server, model, method, k, quantization, hardware, TP), each setup's counts "
        f"summed.</p><table><tr>{head}<th>worst run</th></tr>{''.join(rows)}</table>{said}"
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


__all__ = ["render_html", "vega_bundle"]
