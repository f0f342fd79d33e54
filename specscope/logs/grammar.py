"""The definitions compiled for reading: where envelopes and record anchors are in a
line, whether a line was cut inside one, and what an envelope says (process, level, time).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import regex

from specscope.logs.definitions import Definition, load_definitions

_UNFINISHED_HEADER = regex.compile(
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d[-\d\s:]*(?:\[?[\w./-]*(?::\d*)?)?$"
)

_RECENT = 4  # texts whose anchors are kept (Grammar.anchors_in)
_CUT_EVENT = 8  # characters of an event's phrase before a line's end that make it cut


@dataclass(frozen=True, slots=True)
class Envelope:
    proc: str | None = None
    pid: int | None = None
    level: str | None = None
    month: int | None = None
    day: int | None = None
    time: str | None = None
    year: int | None = None  # when the envelope (or a container timestamp) carries one
    engine: int | None = None  # when the header names it (SGLang's DP rank)
    flaw: str | None = None  # what the header said that cannot be (its records say so)


@dataclass(frozen=True, slots=True)
class Anchor:
    pattern: regex.Pattern[str]
    literals: tuple[str, ...]
    definitions: tuple[Definition, ...]
    fragment: bool  # every definition on it reads a fragment of a record
    max_line: int | None  # the longest text it is run on (None: any its definitions read)

    def reads(self, text: str) -> bool:
        return self.max_line is None or len(text) <= self.max_line


class Grammar:
    """The definitions compiled for reading."""

    def __init__(self, definitions: Iterable[Definition]) -> None:
        defs = tuple(definitions)
        self.envelopes = [d.pattern for d in defs if d.kind == "envelope" and d.pattern]
        by_anchor: dict[str, list[Definition]] = {}
        for d in defs:
            if d.kind == "fields" and d.anchor is not None:
                by_anchor.setdefault(d.anchor.pattern, []).append(d)
        self.anchors = [
            Anchor(
                anchor,
                tuple(lit for d in ds for lit in d.literals),
                tuple(ds),
                all(d.fragment for d in ds),
                _widest(ds),
            )
            for ds in by_anchor.values()
            if (anchor := ds[0].anchor) is not None  # always: by_anchor holds only these
        ]
        # (A block of labelled results is watched over a fence: logs.labelled; a claim in
        # a sentence is read by logs.claims.)
        self.blocks = [
            d for d in defs if d.kind == "block" and d.parse not in ("labelled", "claims")
        ]
        self.json_docs = [d for d in defs if d.kind == "json"]
        self.configs = [d for d in defs if d.kind == "config"]
        self.events = [e for d in defs if d.kind == "event" for e in d.events]
        literals = {lit for d in defs for lit in d.literals}
        literals |= {lit for e in self.events for lit in e.literals}
        self.always = any(not a.literals for a in self.anchors) or any(
            not d.literals for d in self.configs
        )
        self.literals = tuple(sorted(literals))
        self._event_literals = tuple(sorted({lit for e in self.events for lit in e.literals}))
        self.anchor_literals = tuple(
            sorted(
                {lit for a in self.anchors for lit in a.literals}
                | {lit for d in self.configs for lit in d.literals}
            )
        )
        self.definitions = defs
        self._recent: list[tuple[str, list[tuple[regex.Match[str], Anchor]]]] = []
        # Proper prefixes of the literals (one letter only for capitals: words end in
        # small letters all the time).
        self.literal_prefixes = {
            lit[:j] for lit in self.literals for j in range(1 if lit[:1].isupper() else 2, len(lit))
        }
        ordered = sorted(self.literal_prefixes, key=len, reverse=True)
        self._prefix_at_end = (
            regex.compile("(?r)(?:" + "|".join(regex.escape(p) for p in ordered) + ")$")
            if ordered
            else None
        )

    def interesting(self, line: str) -> bool:
        """Could this line hold anything? (A cheap test before any regex runs.)"""
        if self.always or "pid=" in line:
            return True
        return any(lit in line for lit in self.literals) or self.ends_in_literal(line)

    def ends_in_literal(self, line: str) -> bool:
        """Does the line stop in the middle of a literal (a narrow terminal's wrap)?"""
        return self._prefix_at_end is not None and bool(self._prefix_at_end.search(line))

    def _marks(self, text: str) -> list[regex.Match[str]]:
        return (
            self.envelopes_in(text)
            + [m for m, _ in self.anchors_in(text)]
            + [
                m
                for d in self.configs
                if d.anchor is not None and d.reads(text)
                for m in d.anchor.finditer(text)
            ]
            + [
                m
                for e in self.events
                if e.reads(text) and any(lit in text for lit in e.literals)
                for m in e.anchor.finditer(text)
            ]
        )

    def cut_event(self, text: str) -> bool:
        """Does ``text`` stop inside an event's phrase ('EngineCore encountere' of a
        terminal 80 wide)? Only where the line holds the event's literal, so that the bulk
        reader, which hands the parser lines with a literal, holds the same lines."""
        if not any(lit in text for lit in self._event_literals):
            return False  # (most lines: one pass over the literals, not one per event)
        for event in self.events:
            if not event.reads(text) or not any(lit in text for lit in event.literals):
                continue
            m = event.anchor.search(text, pos=max(0, len(text) - 200), partial=True)
            # A few letters are the start of too many words; a phrase cut is a longer one.
            if m is not None and m.partial and m.end() - m.start() >= _CUT_EVENT:
                return True
        return False

    def join_if_wrapped(self, held: str, text: str) -> str | None:
        """``held + text`` when the two are one line that a narrow terminal broke: an
        envelope or anchor runs across the break, or an envelope ends the first and an
        anchor starts the second."""
        head = self.envelopes_in(text[:80])
        envs = self.envelopes_in(held)
        ends_in_envelope = bool(envs) and envs[-1].end() >= len(held.rstrip())
        if head and head[0].start() == 0 and not ends_in_envelope:
            return None  # the next line is a line of its own
        joined = held + text
        spans = {m.span() for m in self._marks(held)}
        if any(m.start() < len(held) and m.span() not in spans for m in self._marks(joined)):
            return joined
        starts_with_envelope = bool(head) and head[0].start() == 0
        if ends_in_envelope and not starts_with_envelope and self._marks(text.lstrip()[:80]):
            return held.rstrip() + " " + text.lstrip()  # a header, then its message
        if envs or head or not text[:1].isalpha():
            return None
        # Prose wrapped at a space ('43.7 vs 61.2 tok/s' / 'baseline, 8-way ...'): the
        # space the wrap took is put back, and only a record that runs across it joins.
        spaced = held.rstrip() + " " + text
        cut = len(held.rstrip())
        if any(m.start() < cut < m.end() for m in self._marks(spaced)):
            return spaced
        return None

    def unfinished(self, text: str) -> bool:
        """Does ``text`` end inside an envelope or the opening words of a record? (Cheap,
        generous: the caller checks that joining the next line really completes one.)"""
        tail = text[-64:]
        if tail.rfind("(") > tail.rfind(")"):
            return True
        if tail[-1:].isdigit() and _UNFINISHED_HEADER.search(tail):
            return True
        if tail.rstrip()[-1:] in ("]", ")"):
            envs = self.envelopes_in(tail)
            if envs and envs[-1].end() >= len(tail.rstrip()):
                return True  # a header with its message on the next line
        offset = len(text) - len(tail)
        marks: list[regex.Match[str]] | None = None  # (found once: a prose line has many literals)
        for literal in self.anchor_literals:
            at = tail.rfind(literal)
            if at < 0:
                continue
            rest = tail[at + len(literal) :]
            if ":" in rest and not rest.rstrip().endswith(":"):
                continue  # the record's opening is all there (the common case: no regex)
            marks = self._marks(text) if marks is None else marks
            if not any(m.start() <= offset + at < m.end() for m in marks):
                return True  # the opening words of a record, the rest on the next line
        return self.ends_in_literal(tail) or (bool(self.events) and self.cut_event(text))

    def envelopes_in(self, text: str) -> list[regex.Match[str]]:
        found: list[regex.Match[str]] = []
        for pattern in self.envelopes:
            found.extend(m for m in pattern.finditer(text) if m.end() > m.start())
        found.sort(key=lambda m: (m.start(), -m.end()))
        out: list[regex.Match[str]] = []
        for m in found:
            if not out or m.start() >= out[-1].end():
                out.append(m)
        return out

    def anchors_in(self, text: str) -> list[tuple[regex.Match[str], Anchor]]:
        # A line is asked again and again (held, joined to the next, cut in pieces): the
        # last few answers are kept, half the time of a long line of prose.
        for seen, out in self._recent:
            if seen == text:
                return list(out)
        out = self._anchors_in(text)
        self._recent = [*self._recent[-(_RECENT - 1) :], (text, out)]
        return list(out)

    def _anchors_in(self, text: str) -> list[tuple[regex.Match[str], Anchor]]:
        found: list[tuple[regex.Match[str], Anchor]] = []
        for anchor in self.anchors:
            if not anchor.reads(text):
                continue
            if anchor.literals and not any(lit in text for lit in anchor.literals):
                continue
            found.extend((m, anchor) for m in anchor.pattern.finditer(text))
        found.sort(key=lambda x: (x[0].start(), -x[0].end()))
        out: list[tuple[regex.Match[str], Anchor]] = []
        whole = False  # a whole record's anchor is in ``out``
        for m, a in found:
            if a.fragment and whole:
                continue  # a label inside a whole record, not a pasted fragment
            # Two anchors at one place (two definitions that look for the same label) are
            # one record, not an empty one and then the record.
            if not out or (
                m.start() > out[-1][0].start()
                and (m.start() >= out[-1][0].end() or m.start() == m.end())
            ):
                out.append((m, a))
                whole = whole or not a.fragment
        return out

    def block_start(self, text: str) -> tuple[Definition, regex.Match[str]] | None:
        return next(self.block_starts(text), None)

    def block_starts(self, text: str) -> Iterator[tuple[Definition, regex.Match[str]]]:
        """Each block definition whose opening ``text`` has, in the grammar's order."""
        for defn in self.blocks:
            if not defn.reads(text):
                continue
            if defn.literals and not any(lit in text for lit in defn.literals):
                continue
            assert defn.anchor is not None
            m = defn.anchor.search(text)
            if m is not None:
                yield defn, m


def _widest(defs: Iterable[Definition]) -> int | None:
    """The longest text an anchor shared by ``defs`` is run on: the widest of their caps,
    none where one of them has none."""
    caps = [d.max_line for d in defs]
    return None if any(c is None for c in caps) else max(c for c in caps if c is not None)


_DEFAULT: list[Grammar] = []  # the grammar of the definitions in use, once built


def default_grammar() -> Grammar:
    """The grammar of ``load_definitions()``, built once a process (~0.013 s a build, paid
    by every paste's ingest before issue 17)."""
    defs = load_definitions()
    if not _DEFAULT or _DEFAULT[0].definitions is not defs:
        _DEFAULT[:] = [Grammar(defs)]
    return _DEFAULT[0]


def envelope_of(m: regex.Match[str], year: int | None) -> Envelope:
    g = m.groupdict()
    flaws = []

    def num(name: str) -> int | None:
        v = g.get(name)
        if v and len(v) > 12:  # no pid, date or rank is this long
            flaws.append(f"a {name} of {len(v)} digits in the log header")
            return None
        return int(v) if v else None

    proc = g.get("proc")
    month, day, clock = num("month"), num("day"), g.get("time")
    if not (month and 1 <= month <= 12 and day and 1 <= day <= 31) or not _CLOCK.fullmatch(
        clock or ""
    ):
        if g.get("month") or clock:
            said = f"{g.get('month')}-{g.get('day')} {clock}"
            flaws.append(f"no timestamp: {said[:40]!r} in the log header is not a date")
        month = day = clock = None  # digits where a date was expected: no timestamp
    return Envelope(
        proc=" ".join(proc.split()) if proc else None,
        pid=num("pid"),
        level=g.get("level"),
        month=month,
        day=day,
        time=clock,
        year=num("year") or year,
        engine=num("engine"),
        flaw="; ".join(flaws) or None,
    )


_CLOCK = regex.compile(r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d")


_GAP_S = 6 * 3600


def seconds_apart(before: Envelope | None, after: Envelope) -> float | None:
    """Seconds between two envelopes (infinite across years); None without dates."""
    if before is None or before.month is None or after.month is None:
        return None
    if before.year and after.year and before.year != after.year:
        return math.inf
    return abs(seconds_in_year(after) - seconds_in_year(before))


def far_apart(before: Envelope | None, after: Envelope) -> bool:
    """More than six hours between two envelopes (or the clock went back a month)."""
    apart = seconds_apart(before, after)
    return apart is not None and apart > _GAP_S


def side_by_side(before: Envelope | None, after: Envelope) -> bool:
    """Two envelopes close enough in time that their processes ran at once: within one
    logging interval (10 s) and a little."""
    apart = seconds_apart(before, after)
    return apart is not None and apart <= _SIDE_BY_SIDE_S


_SIDE_BY_SIDE_S = 15


def seconds_in_year(env: Envelope) -> int:
    h, m, s = (int(x) for x in (env.time or "0:0:0").split(":"))
    days_before = (0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335)[(env.month or 1) - 1]
    return ((days_before + (env.day or 1) - 1) * 24 + h) * 3600 + m * 60 + s
