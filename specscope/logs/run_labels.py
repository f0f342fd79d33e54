"""The author's label above a result: which run a benchmark's line or block is. SGLang's
MT-bench script prints the same line for a server with and without speculation, the
latter as ``Acceptance length: 1.00``; only the author's label says which is which::

    w/o spec:
    ```
    #questions: 80, Throughput: 88.61 token/s, Acceptance length: 1.00
    ```

A label is a short line the definition of labelled results (``label``) reads as one,
outside a fence or in one; it names the baseline when that definition's ``baseline``
words are in it, speculation when its ``speculative`` ones are (``labelled.label_side``;
one without a colon is a few words, not a sentence of prose). The first line after it
that is neither blank, a fence nor another label is the line it labels, if it comes
within ``MAX_GAP`` lines: a record starting there whose definition says what it prints
without speculation (``baseline_prints``) is the run without it (``Records.keep``). A
label naming the baseline over a record that prints more (SGLang's length 2.25 under
'baseline:', the main branch of a PR) is a speculative run the author compares against.

The lines come as the line parser gets them. A label naming the baseline holds one of the
definition's literals (its words), so the bulk reader feeds it to the parser; while a
label is held the parser is not quiet, so the lines up to the one it labels are fed one
by one too. Both readers see the same lines, and a label without those words (``EAGLE3:``)
counts only where a held label has the parser watch it, the same in both.

A sentence that introduces a block (it ends in ':', or is a heading or a bold line) and
names the build it was measured on ('With the vllm-ascend **v0.18.0rc2** and
**v0.19.1rc1** images, MTP acceptance rates are relatively low:', world 137) labels the
record starting on the line it labels with those names alone (the definition's
``version``: 'v0.18.0rc2 v0.19.1rc1'), so two blocks under two builds are arms of one
change of code (``analysis.detectors.sibling_change``); the rest of the sentence would
name other changes. Prose between the sentence and the block lets it go, as any label.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from specscope.logs.definitions import Definition
from specscope.logs.labelled import MAX_LINE, label_side

MAX_GAP = 4  # label, blank, fence, blank, result: a label further up names something else
MAX_WORDS = 4  # a label without a colon is a few words ('Baseline (no spec)'), not prose
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)*")
_HEADING = re.compile(r"^#{1,6}[ \t]+")
_EMPHASIS = re.compile(r"\*\*|__")
_BOLD = re.compile(r"^(?:\*\*|__)[^*_]+(?:\*\*|__)[ \t]*:?$")
# The last sentence of a line: the one that introduces what follows it.
_SENTENCE_END = re.compile(r"(?<=[.!?])[ \t]+(?=[A-Z])")


class _Label(NamedTuple):
    line: int
    name: str
    side: str | None  # 'baseline', 'speculative' or neither
    build: str | None = None  # the versions, commits or fix it names ('v0.17.0rc1')


class RunLabels:
    """Watches for a label naming a run and the line it labels (the definition whose
    ``parse`` is ``labelled`` gives its keys and its literals)."""

    def __init__(self, definitions: Iterable[Definition]) -> None:
        defn = next((d for d in definitions if d.kind == "block" and d.parse == "labelled"), None)
        keys = defn.keys if defn is not None else {}
        self.fence = defn.anchor if defn is not None else None
        self.label_key = re.compile(keys["label"], re.I) if "label" in keys else None
        self.spec_key = re.compile(keys.get("speculative") or "(?!)", re.I)
        self.base_key = re.compile(keys.get("baseline") or "(?!)", re.I)
        self.build_key = re.compile(keys["version"]) if "version" in keys else None
        literals = defn.literals if defn is not None and self.label_key is not None else ()
        self.words = re.compile("|".join(map(re.escape, literals))) if literals else None
        self.label: _Label | None = None  # a label held
        self.labelled: _Label | None = None  # the last one, at the line it labels

    @property
    def held(self) -> bool:
        return self.label is not None

    def lines_held(self) -> list[int]:
        """The line of a label whose run is yet to come, if one is held."""
        return [self.label.line] if self.label is not None else []

    def wants(self, raw: str) -> bool:
        """Could the line be a label, or the line a held one labels (a cheap test)?"""
        return self.label is not None or (self.words is not None and bool(self.words.search(raw)))

    def see(self, line: int, raw: str) -> None:
        """Watch one non-blank line."""
        if self.label is not None and line - self.label.line > MAX_GAP:
            self.label = None
        if self.fence is not None and self.fence.match(raw.rstrip("\r\n")):
            return  # the fence around the result a label names
        name = self._label(raw)
        build = self._build(raw)
        if name is not None:
            side = label_side(name, self.spec_key, self.base_key)
            self.label = _Label(line, name, side, build)
        elif build is not None:
            self.label = _Label(line, build, None, build)
        elif self.label is not None:
            self.labelled, self.label = self.label._replace(line=line), None

    def under_baseline(self, line: int) -> str | None:
        """The label naming the baseline that labels ``line``, if one does."""
        held = self.labelled
        return held.name if held and held.line == line and held.side == "baseline" else None

    def built_on(self, line: int) -> str | None:
        """The build the label over ``line`` names ('v0.18.0rc2 v0.19.1rc1'), if one does."""
        held = self.labelled
        return held.build if held and held.line == line else None

    def _build(self, raw: str) -> str | None:
        """The builds a line introducing a block names, as one label; None if it names none."""
        if self.build_key is None or len(raw) > MAX_LINE:
            return None
        text = _QUOTE.sub("", raw, count=1).strip()
        framed = _HEADING.match(text) is not None or _BOLD.match(text) is not None
        text = _EMPHASIS.sub("", _HEADING.sub("", text)).strip(" \t*_")
        if not framed and not text.endswith(":"):
            return None
        said = _SENTENCE_END.split(text)[-1]
        names = dict.fromkeys(" ".join(m.group(0).split()) for m in self.build_key.finditer(said))
        return " ".join(names) or None

    def _label(self, raw: str) -> str | None:
        text = _QUOTE.sub("", raw, count=1).strip()
        text = _EMPHASIS.sub("", _HEADING.sub("", text)).strip(" \t*_")
        if self.label_key is None or not text or len(text) > MAX_LINE:
            return None
        m = self.label_key.fullmatch(text)
        if m is None:
            return None
        name = m.group("label").strip()
        return name if text.endswith(":") or len(name.split()) <= MAX_WORDS else None


__all__ = ["MAX_GAP", "RunLabels"]
