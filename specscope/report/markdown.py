"""A report as Markdown for a GitHub comment, with PNG charts in a folder beside it. Every
string is escaped: text from a log never becomes markup, never pings anyone (``@user``),
never cross-links an issue (``#123``) and never becomes a link; terminal controls are
dropped. A report too long for one comment loses whole blocks, never part of one."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import regex

from specscope.report.advice import advice_said
from specscope.report.build import Report
from specscope.report.png import draw_into
from specscope.report.redact import strip_controls
from specscope.report.requests import requests_markdown
from specscope.report.setups import severity_said

GITHUB_COMMENT_LIMIT = 65_536
QUIET_NAMED = 10  # launches without records named; the rest counted


# Characters that Markdown could read as markup (html.escape has taken care of < > &).
_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]|~"})
# What GitHub turns into a ping, a cross-reference or a link in a comment's text: a zero-
# width joiner after the sign breaks each (invisible, and the text still reads the same).
_ZWJ = "\u200d"
_REFERENCES = regex.compile(
    r"@(?=[A-Za-z0-9_-])"  # @user, @org/team, owner/repo@sha
    r"|#(?=\d)"  # #123, owner/repo#123
    r"|(?i:\bGH)-(?=\d)"  # GH-123
    r"|(?i:\b(?:https?|ftp|mailto|file|data|javascript)):(?=[/\w])"  # autolinked URLs
    r"|(?i:\bwww)\.(?=\w)"  # autolinked www.
)
# What would open a block if a text starts a line: a heading, a list, a rule, a quote.
_LINE_START = regex.compile(r"^(?:(?=[#+=>-])|\d+(?=[.)]))")


def neutral(text: str) -> str:
    """``text`` without terminal controls, with mentions, issue references and autolinks
    broken (for any Markdown GitHub renders, code included)."""
    return _REFERENCES.sub(lambda m: m.group(0) + _ZWJ, strip_controls(text))


def md(value: Any) -> str:
    """A value as Markdown text that renders as itself (no markup, no HTML, no ping, no
    reference, no link)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list | tuple):  # a curve: each value as a value, not a repr
        return "[" + ", ".join(md(v) for v in value) + "]"
    text = (
        html.escape(strip_controls(str(value)), quote=False)
        .translate(_MD_SPECIAL)
        .replace("\n", " ")
    )
    return _LINE_START.sub(lambda m: m.group(0) + "\\", neutral(text), count=1)


def _fence(lines: list[str]) -> str:
    text = neutral("\n".join(lines))
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
    text, charts = markdown_and_charts(report, out, images=images)
    draw_into(charts)
    return text


def markdown_and_charts(
    report: Report, out: Path, *, images: bool = True
) -> tuple[str, list[tuple[Path, dict[str, Any]]]]:
    """The report as Markdown, and each chart it links to (``images``): the PNG's path and
    its Vega-Lite spec, to draw with ``png.draw_into`` (here, or in another process:
    ``report.apart``)."""
    charts: list[tuple[Path, dict[str, Any]]] = []
    parts = [f"# Speculative decoding triage\n\n{md(report.verdict)}\n"]
    # Blocks that may go, whole, when the report is too long: evidence first, then the table
    # of tau for every k'.
    evidence_blocks: list[int] = []
    other_blocks: list[int] = []
    if report.grouped:
        parts.extend(_setups(report))
    parts.append("## Runs\n")
    if report.grouped:
        parts.append(
            f"The {len(report.runs):,} runs the findings shown name, and the outliers; "
            f"{report.runs_left:,} more are not listed (`specscope report --per-run` lists "
            "every run).\n"
        )
    if report.runs:
        parts.append("| " + " | ".join(h for h, _ in report.columns) + " |")
        parts.append("|" + "---|" * len(report.columns))
        for r in report.runs:
            cells = []
            for _, key in report.columns:
                value = r.get(key)
                cells.append(
                    f"{value:.1%}" if key == "acceptance_rate" and value is not None else md(value)
                )
            parts.append("| " + " | ".join(cells) + " |")
    else:
        parts.append("No run with speculative-decoding records.")
    if report.not_in_log:
        parts.append(f"\nNot in the log: {', '.join(md(h) for h in report.not_in_log)}.")
    if report.quiet:
        n = len(report.quiet)
        named = report.quiet[:QUIET_NAMED]
        more = f"; and {n - len(named):,} more" if n > len(named) else ""
        parts.append(
            f"\n{n:,} launch{'es' if n != 1 else ''} without spec-decode records: "
            + "; ".join(md(q) for q in named)
            + more
            + "."
        )
    parts.append("\n## Findings\n")
    if not report.findings:
        parts.append("No findings.\n")
    for f in report.findings:
        where = md(f["source"]) if f["source"] else "–"
        if f["lines"][0] is not None:
            where += f":{f['lines'][0]}" + (
                f"-{f['lines'][1]}" if f["lines"][1] not in (None, f["lines"][0]) else ""
            )
        parts.append(f"### {md(f['severity'])}: {md(f['kind'])} (run {md(f['run_id'])})\n")
        sure = f.get("confidence") or {}
        sure_text = f"**Confidence:** {md(sure['phrase'])}\n\n" if sure else ""
        parts.append(f"{md(f['explanation'])}\n\n{sure_text}**Next:** {md(f['next_step'])}\n")
        numbers = ", ".join(f"{md(k)} {md(v)}" for k, v in f["measured"].items() if v is not None)
        expected = ", ".join(f"{md(k)} {md(v)}" for k, v in f["expected"].items() if v is not None)
        evidence = ", ".join(f"{md(k)} {md(v)}" for k, v in f["sample"].items())
        body = [f"- where: {where}"]
        if numbers:  # a rate stated in prose may carry no measure of its own
            body.append(f"- measured: {numbers}")
        if expected:
            body.append(f"- expected: {expected}")
        if evidence:
            body.append(f"- evidence: {evidence}")
        detail = "\n".join(body)
        if f["evidence"]:
            detail += "\n\n" + _fence(f["evidence"])
        evidence_blocks.append(len(parts))
        parts.append(f"<details><summary>Evidence</summary>\n\n{detail}\n\n</details>\n")
    if report.findings_left:
        n = sum(e["findings"] for e in report.findings_left)
        parts.append(
            f"{n:,} more finding{'s' if n != 1 else ''}, not shown (`specscope detect` lists "
            "each): "
            + "; ".join(
                f"{e['findings']:,} {md(e['kind'])} ({md(e['severity'])}, {e['runs']:,} runs)"
                for e in report.findings_left
            )
            + ".\n"
        )
    parts.extend(requests_markdown(report.findings, md))
    if report.per_position:
        parts.append(
            "## Per-position acceptance by setup\n"
            if report.grouped
            else "## Per-position acceptance and k advice\n"
        )
    for p in report.per_position:
        rates = " ".join(f"{a:.3f}" if a is not None else "–" for a in p["per_position"])
        advice = next((a for a in report.advice if a["run_id"] == p["run"]), None)
        hint = _advice_hint(advice) if advice else ""
        parts.append(f"- **{md(p['label'])}** ({md(p['drafts'])} drafts): {rates}.{hint}")
    curved = {p["run"] for p in report.per_position}
    for a in report.advice:
        # Advised on its own k (no curve: TensorRT-LLM costed by its overhead), a run has no
        # line above; advice to stop is said all the same.
        if a["run_id"] not in curved and a.get("off"):
            parts.append(f"- **run {md(a['run_id'])}** (k={a['k']}):{_advice_hint(a)}")
    if report.advice:
        table = ["| run | k′ | τ(k′) | speedup |", "|---|---|---|---|"]
        for a in report.advice:
            for point in a["curve"]:
                mark = " ←" if point["k"] == a["best_k"] else ""
                table.append(
                    f"| {md(a['run_id'])} | {point['k']}{mark} | {point['tau']:.2f} | "
                    f"{point['speedup']:.3f} |"
                )
        other_blocks.append(len(parts))
        parts.append(
            "\n<details><summary>τ and speedup for every k′</summary>\n\n"
            + "\n".join(table)
            + "\n\n</details>\n"
        )
    if report.charts or report.chart_notes:
        parts.append("## Charts\n")
        files = out.parent / f"{out.stem}_files"
        for name, title, spec in report.charts:
            if images:
                png = files / f"{name}.png"
                charts.append((png, spec))
                parts.append(f"![{md(title)}]({files.name}/{png.name})\n")
            if report.captions.get(name):
                parts.append(f"*{md(report.captions[name])}*\n")
        if report.chart_notes:
            parts.append(" ".join(md(n) for n in report.chart_notes) + "\n")
    parts.append("## What moves acceptance\n")
    parts.extend(_moves_table(report.moves))
    parts.append(
        f"\n<sub>{md(report.redaction)} Generated by specscope"
        + (f", {md(report.generated)}" if report.generated else "")
        + ".</sub>\n"
    )
    return _fit(parts, evidence_blocks, other_blocks), charts


def _advice_hint(advice: dict[str, Any]) -> str:
    before, head, after = advice_said(advice)
    return f" {md(before)}**{md(head)}**{md(after)}"


def _setups(report: Report) -> list[str]:
    """The setups table and the outliers of a report over many runs."""
    n = len(report.setups) + report.setups_left.get("setups", 0)
    parts = [
        "## Setups\n",
        f"{report.runs_total:,} runs in {n:,} setup{'s' if n != 1 else ''} (server, model, "
        "method, k, quantization, hardware, TP), each setup's counts summed.\n",
        "| setup | runs | drafts | acceptance (95%) | τ | findings | outliers | worst run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in report.setups:
        rate = (
            f"{s['acceptance_rate']:.1%} [{s['interval'][0]:.1%}, {s['interval'][1]:.1%}]"
            if s["acceptance_rate"] is not None
            else "–"
        )
        worst = (
            f"{md(s['worst_run'])} ({s['worst_rate']:.1%})" if s["worst_run"] is not None else "–"
        )
        parts.append(
            f"| {md(s['setup'])} | {s['runs']:,} | {s['drafts']:,} | {rate} | "
            f"{md(s['mean_acceptance_length'])} | {md(severity_said(s['findings']))} | "
            f"{s['outliers']:,} | {worst} |"
        )
    left = report.setups_left
    if left.get("setups"):
        parts.append(
            f"\n{left['setups']:,} more setups ({left['runs']:,} runs, {left['drafts']:,} "
            f"drafts, {left['outliers']:,} outliers) are not listed: those with the most drafts "
            "and those that accept least are."
        )
    total = report.outliers_total
    if total:
        parts.append(
            f"\n**Outliers**: {total:,} run{'s' if total != 1 else ''} accept less than the "
            "rest of their setup (the run's 95% upper bound under the rest's lower bound)"
            + (f"; the {len(report.outliers)} furthest below:" if total > 1 else ":")
            + "\n"
        )
        parts.extend(
            f"- {md(o['run_id'])} ({md(o['setup'])}): {o['acceptance_rate']:.1%} "
            f"[{o['interval'][0]:.1%}, {o['interval'][1]:.1%}] against "
            f"{o['setup_rest_rate']:.1%}, {o['drafts']:,} drafts"
            for o in report.outliers
        )
    else:
        parts.append("\nNo run accepts less than the rest of its setup.")
    parts.append("")
    return parts


def _moves_table(moves: list[dict[str, Any]]) -> list[str]:
    """One row per factor that differs between runs: its values with their acceptance, and
    the effect where two runs differ in it alone, or what it is confounded with."""
    if not moves:
        return ["The runs do not differ in any factor with counts on both sides.\n"]
    rows = [
        "| factor | acceptance by value (95% interval, runs) | effect |",
        "|---|---|---|",
    ]
    for m in moves:
        values = "<br>".join(
            f"{md(g['value'])}: {g['acceptance_rate']:.1%} [{g['interval'][0]:.1%}, "
            f"{g['interval'][1]:.1%}] ({g['runs']})"
            for g in m["groups"]
        )
        pairs = m["matched_pairs"]
        if len(pairs) == 1:
            p = pairs[0]
            effect = (
                f"runs alike but for it: {md(p['value_a'])} → {md(p['value_b'])} "
                f"{p['difference']:+.1%} [{p['interval'][0]:+.1%}, {p['interval'][1]:+.1%}]"
            )
        elif pairs:
            diffs = [p["difference"] for p in pairs]
            effect = (
                f"{m.get('matched_pairs_total', len(pairs)):,} pairs of runs alike but for it: "
                f"{min(diffs):+.1%} to "
                f"{max(diffs):+.1%}"
            )
        elif m["confounded_with"]:
            effect = "no pair differs in this alone: confounded with " + ", ".join(
                md(c) for c in m["confounded_with"]
            )
        else:
            effect = "–"
        rows.append(f"| {md(m['factor'])} | {values} | {effect} |")
    return [*rows, ""]


_LEFT_OUT = "<sub>(evidence left out to fit one GitHub comment)</sub>\n"
_TABLE_LEFT_OUT = "<sub>(the table of τ for every k′ left out to fit one GitHub comment)</sub>\n"
_CUT = "<sub>(the rest is left out to fit one GitHub comment)</sub>\n"


def _fit(parts: list[str], evidence: list[int], others: list[int]) -> str:
    """The parts joined, within one GitHub comment. Each part is a whole block (a heading,
    a paragraph, a table row, a ``<details>`` with its fenced lines), so cutting between
    parts never leaves a fence or a ``<details>`` open. Too long: drop evidence blocks,
    longest first, then the other droppable blocks; still too long: keep the parts that fit
    from the top, and the footer."""
    parts = list(parts)
    size = sum(len(p) for p in parts) + len(parts) - 1
    for group, placeholder in ((evidence, _LEFT_OUT), (others, _TABLE_LEFT_OUT)):
        for i in sorted(group, key=lambda i: -len(parts[i])):
            if size <= GITHUB_COMMENT_LIMIT:
                break
            size -= len(parts[i]) - len(placeholder)
            parts[i] = placeholder
    if size > GITHUB_COMMENT_LIMIT:
        footer, kept = parts[-1], []
        room = GITHUB_COMMENT_LIMIT - len(footer) - len(_CUT) - 2
        for part in parts[:-1]:
            if len(part) + 1 > room:
                break
            kept.append(part)
            room -= len(part) + 1
        parts = [*kept, _CUT, footer]
    return "\n".join(parts)


__all__ = ["GITHUB_COMMENT_LIMIT", "markdown_and_charts", "md", "render_markdown"]
