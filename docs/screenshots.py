"""Screenshots of the report as a reader sees it, one per kind, kept in docs/ so that a
change that makes a chart worse shows in review. Made from the seeds, never by hand:

    python docs/screenshots.py            # needs Debian's chromium on PATH

The HTML report is shot as it is; the Markdown report is rendered as GitHub renders a
comment (CommonMark with tables, raw HTML as GitHub allows it) and shot the same way.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
SEEDS = [
    ROOT / "fixtures" / "seeds" / n
    for n in ("003_83783f5568908b19.txt", "002_2dcac71f91935498.txt")
]
# Enough of GitHub's look that what would be wrong there is wrong here.
GITHUB_CSS = (
    "body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:14px;"
    "max-width:1000px;margin:16px auto;color:#1f2328;line-height:1.5}"
    "table{border-collapse:collapse;display:block;overflow:auto}"
    "td,th{border:1px solid #d0d7de;padding:4px 10px}img{max-width:100%}"
    "pre{background:#f6f8fa;padding:12px;overflow:auto;font-size:12px}"
    "code{font-size:12px}h1,h2{border-bottom:1px solid #d0d7de}"
)


def markdown_page(markdown: str) -> str:
    """A Markdown report as an HTML page, rendered the way GitHub renders a comment."""
    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    return f"<!doctype html><meta charset='utf-8'><style>{GITHUB_CSS}</style>{body}"


def shoot(chromium: str, page: Path, png: Path, height: int) -> None:
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--virtual-time-budget=15000",
            f"--window-size=1100,{height}",
            f"--screenshot={png}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )


def main() -> int:
    chromium = shutil.which("chromium")
    if chromium is None:
        print("needs Debian's chromium on PATH", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for kind in ("html", "md"):
            out = work / f"triage.{kind}"
            subprocess.run(
                [sys.executable, "-m", "specscope", "triage", *map(str, SEEDS), "--out", str(out)],
                check=True,
                capture_output=True,
                cwd=work,
            )
        page = work / "triage-md.html"
        page.write_text(markdown_page((work / "triage.md").read_text(encoding="utf-8")))
        shoot(chromium, work / "triage.html", ROOT / "docs" / "report-html.png", 5200)
        shoot(chromium, page, ROOT / "docs" / "report-markdown.png", 5200)
    print("wrote docs/report-html.png and docs/report-markdown.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
