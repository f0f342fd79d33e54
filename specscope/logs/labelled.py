"""Result blocks under a label, inside a fence of a paste: a client's or a script's
measurements of two runs, each under a line that names its run, one measure a line::

    ```text
    7b:
    decode speed:  69.78935823702163 token/s

    spec 7b
    decode speed:  61.794836902788866 token/s
    ```

A label that names speculation (its definition's ``speculative`` key) against one that
names its absence (``baseline``), or against the same label without the words of
speculation (``spec 7b`` against ``7b``), is a comparison the author measured: one
``bench`` row, as the stated comparisons are (``derive.stated_comparison``). A measure
is compared only when both runs print it under the same name, as a rate (tokens or
requests a second) or a time a token: a duration is of the run's own output, which two
runs rarely share (1000 tokens against 947).

Outside a fence a run may be named by the command that launched its server, its results
under it (a heading, ``tpot: 14.4647 ms``): a server's launch (the definition's
``command``) opens such a block, its continuation lines and one heading are its label, and
the flags of speculation (``command_speculative``) or their absence say its side; a line
that is neither a launch, a label nor a measure ends the block.

The lines are watched as they go by, not taken from the line parser: while a fence is
open the parser holds it (``open_line``), so the bulk reader feeds the lines after it one
by one, label lines without any literal included. A fence is watched for at most
``MAX_LINES`` non-blank lines; one not closed by then is let go unread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from specscope.logs.definitions import Definition
from specscope.logs.derive import TIMES, stated_measure
from specscope.logs.reading import Reading

MAX_LINES = 80
MAX_LINE = 240  # a label or a measure is short; a longer line (a command) ends a group
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)*")
# Measures a comparison of two runs may use: rates, and the time of a token.
_COMPARED = frozenset({"output_throughput", "request_throughput", "mean_tpot_ms"})

Keep = Callable[[Definition, int, int, Reading], None]


Measure = tuple[float, str, int, str]  # value, unit, line, the line as printed


@dataclass
class _Group:
    label: str
    line: int
    measures: dict[str, Measure] = field(default_factory=dict)
    side: str | None = None  # a launch command's, by its flags
    command: bool = False
    headed: bool = False  # a launch's one heading seen ('Metrics:')

    @property
    def last(self) -> int:
        return max([self.line, *(m[2] for m in self.measures.values())])


def _key(defn: Definition, role: str) -> re.Pattern[str] | None:
    raw = defn.keys.get(role)
    return re.compile(raw, re.I) if raw else None


def _name(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def _launch(defn: Definition, text: str, group: _Group | None) -> _Group | None:
    """A server's launch, or a line that goes on the one before it (a continuation after
    a backslash, a flag): the group it names, its side by its flags of speculation."""
    command, flags = _key(defn, "command"), _key(defn, "command_speculative")
    if command is None or flags is None:
        return None
    if command.match(text) is None:
        if group is None or not group.command or group.measures:
            return None
        if not (group.label.endswith("\\") or text.startswith("-")):
            return None
        group.label = f"{group.label} {text}"
    else:
        group = _Group(text, 0, command=True)
    group.side = "speculative" if flags.search(group.label) else "baseline"
    return group


_FLAG = re.compile(r"(?<![\w-])--[\w-]+(?:[ =](?!-)\S+)?")


def _shown(group: _Group) -> str:
    """A group's label as quoted: a launch command by its side and its first flag of
    speculation ('launch with --speculative-model "[ngram]"'), not its whole text."""
    if not group.command:
        return group.label
    if group.side != "speculative":
        return "launch without speculation"
    flag = next(
        (m[0] for m in _FLAG.finditer(group.label) if "spec" in m[0] or "draft" in m[0]), ""
    )
    return f"launch with {flag}".strip()


def read_labelled(
    defn: Definition, lines: Iterable[tuple[int, str]], commands: bool = False
) -> list[Any]:
    """The comparison the fenced ``lines`` hold, as ``[line, end_line, Reading]``; [] when
    they hold none (no speculative group, or none with a baseline to compare it with).
    ``commands``: runs are named by the launch commands above them (no fence)."""
    label_key, measure_key = _key(defn, "label"), _key(defn, "measure")
    spec_key, base_key = _key(defn, "speculative"), _key(defn, "baseline")
    if label_key is None or measure_key is None or spec_key is None or base_key is None:
        return []
    groups: list[_Group] = []
    group: _Group | None = None
    for line, raw in lines:
        text = _QUOTE.sub("", raw, count=1).strip()
        if not text:
            continue
        launched = _launch(defn, text, group) if commands else None
        if launched is not None:
            if launched is not group:
                launched.line = line
                group = launched
                groups.append(group)
            continue
        m = measure_key.fullmatch(text) if len(text) <= MAX_LINE else None
        if m is not None:
            what = _name(m.group("what"))
            if group is not None and what and what not in group.measures:
                value = float(m.group("num").replace(",", ""))
                group.measures[what] = (value, m.group("unit") or "", line, text)
            continue
        label = label_key.fullmatch(text) if len(text) <= MAX_LINE else None
        if commands:
            # One heading of a launch's results ('Metrics', a full-width colon after it);
            # outside a fence only launches name runs: the results under another label
            # are no launch's.
            heading = group is not None and group.command and not group.measures
            if heading and label is not None and group is not None and not group.headed:
                group.headed = True
            else:
                group = None
            continue
        group = _Group(label.group("label").strip(), line) if label is not None else None
        if group is not None:
            groups.append(group)
    return _compared(groups, spec_key, base_key)


def label_side(label: str, spec_key: re.Pattern[str], base_key: re.Pattern[str]) -> str | None:
    """Which run a label names: 'baseline', 'speculative', or None (neither)."""
    if base_key.search(label):  # 'no spec', 'w/o MTP': the words of its absence first
        return "baseline"
    return "speculative" if spec_key.search(label) else None


@dataclass
class _Pair:
    spec: _Group
    base: _Group
    what: str  # the measure's name, as both print it
    measure: str  # the bench column
    said: Measure  # the speculative side's
    against: Measure  # the baseline's

    def ratio(self) -> float:
        """Speculative over baseline as a speed (above 1: faster)."""
        if self.measure in TIMES:
            return self.against[0] / self.said[0]
        return self.said[0] / self.against[0]


def _baseline(
    spec: _Group, labelled: list[tuple[_Group, str | None]], spec_key: re.Pattern[str]
) -> _Group | None:
    """The same label without its words of speculation ('spec 7b' and '7b'), else the one
    group the author labelled as a baseline."""
    bare = _name(spec_key.sub(" ", spec.label))
    same = [g for g, side in labelled if side is None and _name(g.label) == bare]
    if same:
        return same[0] if len(same) == 1 else None
    bases = [g for g, side in labelled if side == "baseline"]
    return bases[0] if len(bases) == 1 else None


def _compared(
    groups: list[_Group], spec_key: re.Pattern[str], base_key: re.Pattern[str]
) -> list[Any]:
    labelled = [
        (g, g.side if g.command else label_side(g.label, spec_key, base_key))
        for g in groups
        if g.measures
    ]
    pairs: list[_Pair] = []
    for spec, side in labelled:
        base = _baseline(spec, labelled, spec_key) if side == "speculative" else None
        if base is None:
            continue
        for what, said in spec.measures.items():  # the first measure both print decides
            against = base.measures.get(what)
            measure = stated_measure(said[1], what)
            if against is not None and measure in _COMPARED:
                if stated_measure(against[1], what) == measure:
                    pairs.append(_Pair(spec, base, what, measure, said, against))
                    break
    if not pairs:
        return []
    decide = min(pairs, key=_Pair.ratio)  # the slowest pair, as for a table's conditions
    first = min(decide.spec.line, decide.base.line)
    spec, base = decide.spec, decide.base
    reading = Reading()
    reading.values = {
        "stated": f"{_shown(spec)}: {decide.said[3]} / {_shown(base)}: {decide.against[3]}",
        "stated_offset": decide.said[2] - first,
        "stated_spec": decide.said[0],
        "stated_base": decide.against[0],
        "stated_unit": decide.said[1],
        "stated_unit2": decide.against[1],
        "stated_what": decide.what,
    }
    if len(pairs) > 1:
        reading.values["stated_rows"] = [
            {
                "offset": p.said[2] - first,
                "row": _shown(p.spec),
                "speculative": p.said[0],
                "baseline": p.against[0],
            }
            for p in pairs
        ]
    return [[first, max(spec.last, base.last), reading]]


class LabelledResults:
    """Watches a text's fences for result blocks under labels (the definition whose
    ``parse`` is ``labelled``: its anchor is the fence)."""

    def __init__(self, definitions: Iterable[Definition], keep: Keep) -> None:
        self.defn = next(
            (d for d in definitions if d.kind == "block" and d.parse == "labelled"), None
        )
        self.keep = keep
        self.first = 0
        self.open = False
        self.unfenced = False  # opened by a launch command, not a fence
        self.lines: list[tuple[int, str]] = []
        raw = self.defn.keys.get("command") if self.defn is not None else None
        self._command = re.compile(raw, re.I) if raw else None
        self._measure = _key(self.defn, "measure") if self.defn is not None else None
        self._label = _key(self.defn, "label") if self.defn is not None else None

    def lines_held(self) -> list[int]:
        """The first line of a fence still watched, if one is."""
        return [self.first] if self.open else []

    def wants(self, raw: str) -> bool:
        """Could the line open a fence or a launch's block, or go on in one (a cheap test)?"""
        if self.open or self.defn is None:
            return self.open
        return "```" in raw or "~~~" in raw or self._launches(raw)

    def _launches(self, raw: str) -> bool:
        if self._command is None or not ("vllm" in raw or "sglang" in raw):
            return False  # (a cheap look first: every line the parser reads comes here)
        return self._command.match(raw.strip()) is not None

    def _goes_on(self, raw: str) -> bool:
        """A line of a launch's block: a launch or its continuation, a label, a measure."""
        text = _QUOTE.sub("", raw, count=1).strip()
        if len(text) > MAX_LINE:
            return False
        if len(text) <= 8 and not any(c.isalpha() for c in text):
            return True  # a number of the list the runs are in ('2、', '(2)')
        if (
            text.startswith("-")
            or self._launches(text)
            or self.lines[-1][1].rstrip().endswith("\\")
        ):
            return True
        return any(k is not None and k.fullmatch(text) for k in (self._measure, self._label))

    def see(self, line: int, raw: str) -> None:
        """Watch one non-blank line; a fence it closes is read, and a launch's block the
        first line that is none of its."""
        assert self.defn is not None and self.defn.anchor is not None
        fence = self.defn.anchor.match(raw.rstrip("\r\n")) if self.defn.reads(raw) else None
        if self.open and self.unfenced and (fence is not None or not self._goes_on(raw)):
            self.close()
        if not self.open:
            if fence is not None:
                self.open, self.unfenced, self.first, self.lines = True, False, line, []
            elif self._launches(raw):
                self.open, self.unfenced, self.first = True, True, line
                self.lines = [(line, raw)]
            return
        if fence is not None:
            self.close()
            return
        self.lines.append((line, raw))
        if len(self.lines) >= MAX_LINES:
            self.open, self.lines = False, []  # too long for a block of results: let go

    def close(self) -> None:
        """Read the fence being watched (closed, or cut off by the end of the text)."""
        if not self.open or self.defn is None:
            return
        lines, self.open, self.lines = self.lines, False, []
        for first, last, reading in read_labelled(self.defn, lines, commands=self.unfenced):
            self.keep(self.defn, first, last, reading)


__all__ = ["MAX_LINE", "MAX_LINES", "LabelledResults", "label_side", "read_labelled"]
