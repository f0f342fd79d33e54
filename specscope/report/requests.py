"""The report's section on acceptance request by request: for each run whose requests'
distribution is a finding (``request_acceptance``), its quantiles, a histogram as a line of
bars, the least accepted requests and what they share. Markdown and HTML from the same
finding dicts (``measured`` as ``analysis.requests.Distribution.to_dict`` gives it)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

BARS = " ▁▂▃▄▅▆▇█"
TRAITS = {"prompt_tokens": "prompt", "output_tokens": "output", "cached_tokens": "cached"}


def sparkline(counts: list[int]) -> str:
    """One bar per bin, as high as its count against the largest (an empty bin blank)."""
    top = max(counts, default=0)
    if not top:
        return ""
    return "".join(BARS[0] if not c else BARS[max(1, round(c / top * 8))] for c in counts)


def _distributions(findings: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [f for f in findings if f.get("kind") == "request_acceptance" and f.get("measured")]


def _rows(m: Mapping[str, Any]) -> list[list[str]]:
    out = []
    for r in m.get("lowest") or []:
        traits = ", ".join(f"{TRAITS[t]} {r[t]:,}" for t in TRAITS if r.get(t) is not None)
        counts = f"{r['accepted']:,} / {r['drafted']:,}"
        out.append([str(r.get("line") or "–"), counts, f"{r['rate']:.1%}", traits or "–"])
    return out


def _summary(m: Mapping[str, Any]) -> str:
    q = m.get("quantiles") or {}
    interval = m.get("median_interval")
    said = (
        f"{m['requests']:,} requests: p10 {q['p10']:.1%}, median {q['p50']:.1%}"
        + (f" (95% {interval[0]:.1%}-{interval[1]:.1%})" if interval else "")
        + f", p90 {q['p90']:.1%}"
    )
    if m.get("few_drafts"):
        said += (
            f"; {m['few_drafts']:,} more drafted under {m['min_draft_tokens']} tokens (left out)"
        )
    shared = "; ".join(
        f"Median {TRAITS.get(t, t)} {v['lowest']:,.0f} among the least accepted, "
        f"{v['rest']:,.0f} for the rest"
        for t, v in (m.get("shared") or {}).items()
    )
    return said + (f". {shared}" if shared else "")


def requests_markdown(findings: Iterable[Mapping[str, Any]], md: Any = str) -> list[str]:
    """The section's Markdown parts (none when no run has a distribution)."""
    found = _distributions(findings)
    if not found:
        return []
    parts = [
        "## Acceptance request by request\n",
        "Each request's accepted draft tokens over its drafted tokens; the histogram's bars "
        "are tenths from 0 to 100%.\n",
    ]
    for f in found:
        m = f["measured"]
        parts.append(
            f"- **run {md(f['run_id'])}**: {md(_summary(m))}. "
            f"Histogram `|{sparkline(m.get('histogram') or [])}|`"
        )
        rows = _rows(m)
        if rows:
            parts.append("\n  | line | accepted / drafted | rate | request |\n  |---|---|---|---|")
            parts.extend("  | " + " | ".join(md(c) for c in row) + " |" for row in rows)
        parts.append("")
    return parts


def requests_html(findings: Iterable[Mapping[str, Any]]) -> str:
    """The section as HTML ('' when no run has a distribution)."""
    e = html.escape
    found = _distributions(findings)
    if not found:
        return ""
    out = ["<h2>Acceptance request by request</h2>"]
    for f in found:
        m = f["measured"]
        rows = "".join(
            "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in _rows(m)
        )
        out.append(
            f"<p><b>run {e(str(f['run_id']))}</b>: {e(_summary(m))}. Histogram "
            f"<code>|{e(sparkline(m.get('histogram') or []))}|</code> (tenths, 0-100%)</p>"
            + (
                "<table><tr><th>line</th><th>accepted / drafted</th><th>rate</th>"
                f"<th>request</th></tr>{rows}</table>"
                if rows
                else ""
            )
        )
    return "".join(out)


__all__ = ["requests_html", "requests_markdown", "sparkline"]
