"""What an author's label says of the run it names, where nothing else says it (issue 16,
world 371: rows 'ngram D=4', 'ngram D=12 adapt+strict' under '### Qwen3.5-9B-4bit ...').

- The depth: a setting of the draft depth with its value ('D=4', 'k=3', 'depth 6',
  'n-max 8', 'draft_n=5', 'num_speculative_tokens=2', 'steps=3') is the run's k.
- The heading: the nearest markdown heading above a table is the context of its rows
  ('### Qwen3.6-27B-4bit (recipe-bulk, 1000 tokens)'): kept in the run's configuration
  (``heading``), so that rows under headings that name different targets are not set
  against each other as arms of one comparison (``analysis.detectors.sibling_change``).

The depth applies only where the run's own lines say nothing (``apply``), and only where
every label of the run agrees. The method a label names is not taken (yet): n-gram has no
scale of its own at most k (the reference holds it at k=5 only), so a lookup named in a
label would go unjudged where the floor of a learned drafter now calls it low (world 185:
'ordinary prose, n-gram default' at 11.2%, which its reader calls low).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from specscope.logs.results import Run
from specscope.logs.source import Source

_KEYS = ("row", "column", "label", "setup")  # as analysis.siblings reads a record's labels

# A setting of the draft depth and its value. 'D' only in capitals ('D=4'): a lower-case
# 'd' is too many other things.
_DEPTH = re.compile(
    r"(?:(?<![\w-])D|(?<![\w-])(?i:k|depth|n[-_ ]?max|draft[-_ ]?n|n[-_ ]?draft|draft[-_ ]?max|"
    r"num[-_]speculative[-_]tokens|spec(?:ulative)?[-_ ]tokens|num[-_]steps|steps?|nst))"
    r"\s*[=:]?\s*(?P<n>\d{1,2})(?![\d.%x×])"
)
MAX_K = 16  # the deepest draft a label's number is read as (DFlash drafts 15-16)
HEADING_LINES = 80  # how far above a labelled run its heading is looked for
HEADING_MAX_BYTES = 16 << 20  # a source larger than this is a server's log, not a paste
_HEADING = re.compile(r"^[ \t>]*#{1,6}[ \t]+(?P<text>\S.*?)[ \t#]*$")


def depth_of(label: str) -> int | None:
    """The one depth a label sets, or None."""
    found = {int(m["n"]) for m in _DEPTH.finditer(label)}
    if len(found) != 1:
        return None
    k = found.pop()
    return k if 1 <= k <= MAX_K else None


def note(run: Run, extra: Mapping[str, Any]) -> None:
    """Keep what a spec record's label says of its run (``Records.keep``)."""
    label = " ".join(v for key in _KEYS if isinstance(v := extra.get(key), str)).strip()
    if label:
        run.labelled.append(depth_of(label))


def apply(run: Run, row: dict[str, Any]) -> None:
    """A run row's k from its labels, where its lines gave none (before the user's
    ``--set``, which overrides it)."""
    if row.get("k") is None:
        row["k"] = label_k(run)


def label_k(run: Run) -> int | None:
    """The k every label of the run agrees on, or None."""
    ks = {k for k in run.labelled if k is not None}
    return next(iter(ks)) if len(ks) == 1 else None


def add_headings(src: Source, runs: Iterable[Run]) -> None:
    """Each labelled run's nearest markdown heading above its first line, in its config."""
    labelled = [r for r in runs if r.labelled and "heading" not in r.config]
    if not labelled or len(labelled) > 256 or src.size > HEADING_MAX_BYTES:
        return
    starts = {r.ordinal: max(1, r.first_line - HEADING_LINES) for r in labelled}
    read = src.lines_at(starts.values(), HEADING_LINES)
    for run in labelled:
        start = starts[run.ordinal]
        above = read.get(start, [])[: run.first_line - start]
        for text in reversed(above):
            m = _HEADING.match(text)
            if m is not None:
                run.config["heading"] = m["text"].replace("*", "").strip()
                break


__all__ = ["add_headings", "apply", "depth_of", "label_k", "note"]
