"""Paths the tests share, and how a synthetic log's rows are shown when they differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SEEDS = FIXTURES / "seeds"


def _show(text: str, line: int | None) -> str:
    if line is None:
        return ""
    lines = text.split("\n")
    return "\n".join(
        f"  {n}: {lines[n - 1][:300]!r}" for n in range(max(1, line - 1), min(line + 2, len(lines)))
    )


def explain(log: Any, got: list[dict[str, Any]], want: list[dict[str, Any]], what: str) -> str:
    """The first difference between rows read from a synthetic log (``fixtures/synth.py``)
    and its truth, compactly, with the text around it."""
    head = (
        f"{what}: {len(got)} rows read, {len(want)} expected "
        f"(format {log.format}, seed {log.seed}, wrappings {log.wrappings}, width {log.width}, "
        f"versions {log.versions})"
    )
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            diff = {k: (g.get(k), w.get(k)) for k in w if g.get(k) != w.get(k)}
            return f"{head}\nrow {i}: (read, expected) {diff}\n{_show(log.text, w.get('line'))}"
    rest = got[len(want) :] or want[len(got) :]
    extra = "read but not expected" if len(got) > len(want) else "expected but not read"
    return f"{head}\n{extra}: {rest[0]}\n{_show(log.text, rest[0].get('line'))}"
