"""From lines of text to typed rows, runs and skipped lines, driven by the definitions.

Lines are cleaned of their wrappings, cut where a log envelope or a record anchor starts
(records glued on one line), and a record whose line ended early takes the next line
when it reads as the rest of it (records wrapped by a terminal or a paste).
No I/O here: ``parse_lines`` takes ``(line number, text)`` pairs.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import regex

from specscope.logs.clean import clean_line
from specscope.logs.definitions import Definition, EventSpec, load_definitions
from specscope.logs.derive import CONFIG_DERIVATIONS, RECORD_DERIVATIONS
from specscope.logs.fields import (
    Reading,
    is_list_continuation,
    read_block,
    read_fields,
    read_json,
)
from specscope.logs.pyrepr import is_open, parse_key_values, parse_python_dict

MAX_WRAPPED_LINES = 32  # a record wrapped at 40 columns takes about ten
_HOLD_MAX = 4096  # a held line longer than this is fed as it is
_UNFINISHED_HEADER = regex.compile(
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d[-\d\s:]*(?:\[?[\w./-]*(?::\d*)?)?$"
)
# The rest of a one-word value cut by a line end (a version, a model path), not a word.
_TOKEN_TAIL = regex.compile(r"[a-z0-9._/-]|\S*[0-9./-]")
# More of a repr cut by a line end: white space only after commas (prose has it elsewhere).
_REPR_LIKE = regex.compile(r"\S*(?:,\s+\S*)*$")
_LABEL_HEAD = regex.compile(r"\s*([A-Za-z][A-Za-z0-9 _/()%.-]{0,60}?)\s*:")


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


@dataclass(slots=True)
class Skip:
    line: int
    reason: str
    text: str


@dataclass
class Run:
    """One server run: from a server start (or a new process id) to the next."""

    ordinal: int
    first_line: int
    last_line: int
    config: dict[str, Any] = field(default_factory=dict)
    procs: dict[str, int] = field(default_factory=dict)
    # More pids under one singleton name, side by side (several API servers of one server).
    side_pids: dict[str, list[int]] = field(default_factory=dict)
    starts_seen: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    last_seen: Envelope | None = None  # the last envelope with a timestamp
    from_block: bool = False  # opened by a result block (bench output), not a server log
    # The last telemetry record of each process: the spec line follows its engine's line.
    last_record: dict[tuple[str | None, int | None], tuple[str, Row]] = field(default_factory=dict)

    @property
    def used(self) -> bool:
        return bool(self.config or self.counts)

    @property
    def has_records(self) -> bool:
        """Telemetry seen (events alone, such as a start-up warning, do not count)."""
        return any(n for table, n in self.counts.items() if table != "events")

    def update_config(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            if value is not None:
                self.config.setdefault(key, value)


Row = dict[str, Any]


class BulkRow(dict[str, Any]):
    """What the line parser keeps of a record read in bulk (its line, its engine): the
    record before a later one of the same process. What a later line adds to it (a
    prefix-cache line) is kept in ``LineParser.patches`` for the bulk reader to apply."""


@dataclass
class ParseResult:
    tables: dict[str, list[Row]]
    runs: list[Run]
    skipped: list[Skip]
    lines: int
    telemetry_lines: int = 0  # lines that held a record of any table
    # Records read in bulk that a later line completed (see BulkRow).
    patches: list[tuple[str, BulkRow]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Anchor:
    pattern: regex.Pattern[str]
    literals: tuple[str, ...]
    definitions: tuple[Definition, ...]

    @property
    def fragment(self) -> bool:
        return all(d.fragment for d in self.definitions)


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
            _Anchor(ds[0].anchor, tuple(lit for d in ds for lit in d.literals), tuple(ds))  # type: ignore[arg-type]
            for ds in by_anchor.values()
        ]
        self.blocks = [d for d in defs if d.kind == "block"]
        self.json_docs = [d for d in defs if d.kind == "json"]
        self.configs = [d for d in defs if d.kind == "config"]
        self.events = [e for d in defs if d.kind == "event" for e in d.events]
        literals = {lit for d in defs for lit in d.literals}
        literals |= {lit for e in self.events for lit in e.literals}
        self.always = any(not a.literals for a in self.anchors) or any(
            not d.literals for d in self.configs
        )
        self.literals = tuple(sorted(literals))
        self.anchor_literals = tuple(
            sorted(
                {lit for a in self.anchors for lit in a.literals}
                | {lit for d in self.configs for lit in d.literals}
            )
        )
        self.definitions = defs
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
            + [m for d in self.configs if d.anchor is not None for m in d.anchor.finditer(text)]
        )

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
        for literal in self.anchor_literals:
            at = tail.rfind(literal)
            if at < 0:
                continue
            rest = tail[at + len(literal) :]
            if ":" in rest and not rest.rstrip().endswith(":"):
                continue  # the record's opening is all there (the common case: no regex)
            if not any(m.start() <= offset + at < m.end() for m in self._marks(text)):
                return True  # the opening words of a record, the rest on the next line
        return self.ends_in_literal(tail)

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

    def anchors_in(self, text: str) -> list[tuple[regex.Match[str], _Anchor]]:
        found = []
        for anchor in self.anchors:
            if anchor.literals and not any(lit in text for lit in anchor.literals):
                continue
            found.extend((m, anchor) for m in anchor.pattern.finditer(text))
        found.sort(key=lambda x: (x[0].start(), -x[0].end()))
        out: list[tuple[regex.Match[str], _Anchor]] = []
        for m, a in found:
            if a.fragment and any(not b.fragment for _, b in out):
                continue  # a label inside a whole record, not a pasted fragment
            if (
                not out
                or m.start() >= out[-1][0].end()
                or (m.start() == m.end() and m.start() > out[-1][0].start())
            ):
                out.append((m, a))
        return out

    def block_start(self, text: str) -> tuple[Definition, regex.Match[str]] | None:
        for defn in self.blocks:
            if defn.literals and not any(lit in text for lit in defn.literals):
                continue
            assert defn.anchor is not None
            m = defn.anchor.search(text)
            if m is not None:
                return defn, m
        return None


def _envelope(m: regex.Match[str], year: int | None) -> Envelope:
    g = m.groupdict()

    def num(name: str) -> int | None:
        v = g.get(name)
        return int(v) if v else None

    proc = g.get("proc")
    month, day, clock = num("month"), num("day"), g.get("time")
    if not (month and 1 <= month <= 12 and day and 1 <= day <= 31) or not _CLOCK.fullmatch(
        clock or ""
    ):
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
    )


_CLOCK = regex.compile(r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d")


@dataclass(slots=True)
class _Piece:
    text: str
    env: Envelope | None
    has_env: bool  # the envelope starts this piece (rather than an earlier one on the line)
    anchor: tuple[regex.Match[str], _Anchor] | None
    headless: bool
    start: int = 0  # where the piece is in its logical line
    end: int = 0


class _Pending:
    """A record whose text may still go on on the next line."""

    def __init__(self, piece: _Piece, line: int) -> None:
        assert piece.anchor is not None
        self.match, self.anchor = piece.anchor
        self.text = piece.text
        self.env = piece.env
        self.line = line
        self.end_line = line
        self.in_prose = False  # the record starts after other text on its line

    @property
    def body(self) -> str:
        return self.text[self.match.end() - self.match.start() :]

    def _quality(self, text: str) -> tuple[int, int, int, int, int, int]:
        """(-problems, fields, fields not cut short, fields shown whole, values and list
        items), leaving out a last label cut short."""
        d = self.anchor.definitions[0]
        body = text[self.match.end() - self.match.start() :]
        head, sep, last = body.rpartition(",")
        if sep and ":" not in last and not is_list_continuation(last):
            body = head
        reading = read_fields(d, body)
        return (
            -len(reading.problems),
            len(reading.values) + (reading.dropped is not None),
            len(reading.values),
            reading.whole,
            reading.items,
            reading.chars,  # a number whose last digits came on the next line
        )

    def closed(self) -> bool:
        """Complete: its terminal field is there (and nothing trails it)."""
        d = self.anchor.definitions[0]
        body = self.body.rstrip()
        if body.endswith((",", ":")):
            return False
        return d.terminal is not None and d.terminal.search(body) is not None

    def take(self, text: str, line: int) -> bool:
        """Append ``text`` (the next physical line) when it reads as the rest of this record:
        more of its list, or more of its fields (or fields made whole), and no new problem."""
        d = self.anchor.definitions[0]
        if self.end_line - self.line + 1 >= MAX_WRAPPED_LINES or self.closed():
            return False
        if self.anchor.fragment and self.in_prose:
            return False  # a value quoted in a sentence, not a record's first line
        stripped = text.strip()
        if not stripped:
            return False
        if stripped == ",":  # the separator before a field that comes next
            self.text = self.text.rstrip() + ", "
            self.end_line = line
            return True
        base = self.text.rstrip()
        candidates = [base + stripped]
        head = _LABEL_HEAD.match(stripped)
        if head and d.field_for(head.group(1)) and not base.endswith(","):
            candidates.append(base + ", " + stripped)  # a fragment's next line: a new field
        after, joined = max((self._quality(c), c) for c in candidates)
        before = self._quality(self.text)
        if after[0] < before[0] or after[1:] <= before[1:]:
            return False
        self.text = joined
        self.end_line = line
        return True


class _PendingConfig:
    """A config line whose dict or repr is still open at the end of the physical line."""

    def __init__(
        self, defn: Definition, match: regex.Match[str], text: str, piece: _Piece, line: int
    ) -> None:
        self.defn, self.match, self.text, self.piece = defn, match, text, piece
        self.line = line
        self.lines = 1

    def open(self) -> bool:
        """A dict or repr still open, or a value that the line end may have cut."""
        if self.defn.parse:
            return True  # whether the next line is more of it, its keys tell
        return self.lines == 1 and self.match.end() >= len(self.match.string.rstrip())

    def _keys(self, text: str) -> int:
        read = parse_python_dict if self.defn.parse == "python_dict" else parse_key_values
        return len(read(text))

    def take(self, text: str) -> bool:
        if self.lines >= MAX_WRAPPED_LINES * 4 or not self.open():
            return False
        stripped = text.strip()
        if self.defn.parse:
            joined = self.text.rstrip() + stripped
            if (
                not is_open(self.match.group(0) + self.text)
                and not _REPR_LIKE.match(stripped)
                and self._keys(joined) <= self._keys(self.text)
            ):
                return False
        else:
            if (
                not stripped
                or len(stripped) > 80
                or any(c.isspace() for c in stripped)
                or not _TOKEN_TAIL.match(stripped)
            ):
                return False
            assert self.defn.anchor is not None
            longer = self.defn.anchor.match(
                self.match.string.rstrip() + stripped, self.match.start()
            )
            if longer is None:
                return False
            self.match = longer
        self.text = self.text.rstrip() + stripped
        self.lines += 1
        return True


@dataclass(slots=True)
class _Origin:
    line: int
    end_line: int
    env: Envelope | None


class _Block:
    """A multi-line block (bench results, the offline example's summary) being collected."""

    MAX_LINES = 120

    def __init__(self, defn: Definition, text: str, line: int) -> None:
        self.defn = defn
        self.lines = [text]
        self.line = line
        self.end_line = line
        self.ended = False

    def repeats(self, text: str) -> bool:
        """Does ``text`` say again what the block already said (the next block)?"""
        said = read_block(self.defn, "\n".join(self.lines)).values
        return bool(said.keys() & read_block(self.defn, text).values.keys())

    def take(self, text: str, line: int) -> bool:
        d = self.defn
        if self.ended or len(self.lines) >= self.MAX_LINES:
            return False
        if d.end is not None and d.end.search(text):
            self.ended = True
        elif not (read_block(d, text).values or (d.continues and d.continues.search(text))):
            return False
        self.lines.append(text)
        self.end_line = line
        return True


class LineParser:
    """Feeds lines through the grammar, keeping the state that spans lines."""

    def __init__(self, grammar: Grammar | None = None) -> None:
        self.grammar = grammar or Grammar(load_definitions())
        self.tables: dict[str, list[Row]] = {}
        self.runs: list[Run] = []
        self.skipped: list[Skip] = []
        self.lines = 0
        self.telemetry_lines = 0
        self._pending: _Pending | None = None
        # A line that may go on on the next one: (line, text, year, where lines begin).
        self._held: tuple[int, str, int | None, Breaks] | None = None
        self._block: _Block | None = None
        self._config_pending: _PendingConfig | None = None
        self._cumulative: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._run: Run | None = None
        self.patches: list[tuple[str, BulkRow]] = []  # bulk records a later line completed

    # -- runs ------------------------------------------------------------------------------

    def _current_run(self, line: int, block: bool = False) -> Run:
        """The run a record at ``line`` belongs to. A run that a result block opened
        (bench output) takes no server log lines after it: those are another source."""
        if self._run is None or (self._run.from_block and not block):
            self._new_run(line)
        assert self._run is not None
        self._run.last_line = max(self._run.last_line, line)
        return self._run

    def _new_run(self, line: int) -> Run:
        self._run = Run(ordinal=len(self.runs) + 1, first_line=line, last_line=line)
        self.runs.append(self._run)
        return self._run

    def _see_process(self, env: Envelope, line: int) -> None:
        if env.proc is None or env.pid is None:
            return
        run = self._run
        # Workers (TP ranks) share a name and differ by pid within one server.
        singleton = "Worker" not in env.proc
        other_pid = (
            run is not None
            and singleton
            and run.procs.get(env.proc, env.pid) != env.pid
            and env.pid not in run.side_pids.get(env.proc, ())
        )
        if other_pid and run is not None and _side_by_side(run.last_seen, env):
            # A restart takes at least a model load; a new pid logging within seconds of
            # the run's last line is a sibling (`--api-server-count N` gives N API servers
            # that log side by side, each for its engines).
            run.side_pids.setdefault(env.proc, []).append(env.pid)
            other_pid = False
        if run is not None and (
            other_pid
            or (env.proc not in run.procs and run.procs and _far_apart(run.last_seen, env))
        ):
            # The same process name with another pid is a restart; a process the run has
            # not seen, hours after the run's last line, is another server in the paste.
            self._finish_pending()
            run = self._new_run(line)
        run = self._current_run(line)
        run.procs.setdefault(env.proc, env.pid)
        if env.month is not None:
            run.last_seen = env

    # -- lines read in bulk (specscope.logs.bulk) ------------------------------------------------

    @property
    def quiet(self) -> bool:
        """Nothing carried over from earlier lines: the next line is read on its own."""
        return (
            self._pending is None
            and self._held is None
            and self._block is None
            and self._config_pending is None
        )

    def open_line(self) -> int | None:
        """The first line of what is still held (a record, a wrapped line, a block, a
        config), whose rows are yet to come; None when nothing is."""
        held = (self._pending, self._block, self._config_pending)
        lines = [h.line for h in held if h is not None]
        if self._held is not None:
            lines.append(self._held[0])
        return min(lines, default=None)

    def close_record(self) -> None:
        """End a record that may still go on, when the next line is known to start with a
        log header of its own (so it would end the record the same way)."""
        if self._held is None and self._block is None and self._config_pending is None:
            self._finish_pending()

    def steady(self, proc: str, pid: int) -> bool:
        """Would a line from this process leave the runs as they are (its pid is the run's)?"""
        run = self._run
        if run is None or run.from_block or proc not in run.procs:
            return False
        return run.procs[proc] == pid or pid in run.side_pids.get(proc, ()) or "Worker" in proc

    def take_bulk(
        self,
        *,
        last_line: int,
        envelope_line: int,
        last_seen: Envelope | None,
        counts: Mapping[str, int],
        last_records: Mapping[tuple[str | None, int | None], tuple[str, Row]],
        server: str | None,
    ) -> int:
        """Account for lines read in bulk while the parser was quiet and every process in
        them was steady: what feeding them one by one would have done to the run. Returns
        the run's ordinal, which their records take."""
        run = self._run
        assert run is not None and self.quiet
        run.last_line = max(run.last_line, envelope_line)
        if last_seen is not None:
            run.last_seen = last_seen
        for table, n in counts.items():
            if n:
                run.counts[table] = run.counts.get(table, 0) + n
                self.telemetry_lines += n
                if server:
                    run.config.setdefault("server", server)
        run.last_record.update(last_records)
        self.lines = max(self.lines, last_line)
        return run.ordinal

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, line: int, raw: str) -> None:
        self.lines = max(self.lines, line)
        if raw.startswith("{") and self.grammar.json_docs and self.feed_json(line, raw):
            return
        for part in raw.split("\r"):
            if (
                self._pending is None
                and self._held is None
                and self._block is None
                and self._config_pending is None
                and not self.grammar.interesting(part)
            ):
                continue
            cleaned = clean_line(part)
            if not cleaned.text.strip():
                continue
            self._feed_clean(line, cleaned.text, cleaned.year)

    def feed_json(self, line: int, text: str, end_line: int | None = None) -> bool:
        """A JSON document (a saved benchmark result) read as one record; False when
        ``text`` is not one that a definition knows."""
        try:
            obj = json.loads(text)
        except ValueError:
            return False
        if not isinstance(obj, dict):
            return False
        for defn in self.grammar.json_docs:
            if all(key in obj for key in defn.match_keys):
                self._finish_pending()
                self._finish_block()
                origin = _Origin(line, end_line or line, None)
                reason = self._accept(defn, origin, read_json(defn, obj), {})
                if reason:
                    self.skipped.append(Skip(line, reason, text[:300]))
                return True
        return False

    def _feed_clean(self, line: int, text: str, year: int | None) -> None:
        """Hold a line that ends inside a log header or a record's opening words until the
        next line shows whether the two are one line wrapped (a narrow terminal)."""
        if self._block is not None:
            start = self.grammar.block_start(text)
            if (start is None or not self._block.repeats(text)) and self._block.take(text, line):
                if self._block.ended:
                    self._finish_block()
                return
            self._finish_block()
        start = self.grammar.block_start(text)
        if self._held is not None:
            held_line, held_text, held_year, breaks = self._held
            self._held = None
            joined = None if start else self.grammar.join_if_wrapped(held_text, text)
            if joined is not None:
                breaks = (*breaks, (len(joined) - len(text.lstrip()), line))
                # The joined line may still stop inside the next envelope or anchor.
                if len(joined) < _HOLD_MAX and self.grammar.unfinished(joined):
                    self._held = (held_line, joined, held_year or year, breaks)
                else:
                    self._feed_part(held_line, joined, held_year or year, breaks)
                return
            self._feed_part(held_line, held_text, held_year, breaks)
        if start is not None:
            self._finish_pending()
            defn, m = start
            self._block = _Block(defn, text[m.start() :], line)
            return
        if self.grammar.unfinished(text):
            self._held = (line, text, year, ((0, line),))
            return
        self._feed_part(line, text, year)

    def _pieces(self, text: str, year: int | None) -> Iterator[_Piece]:
        envs = self.grammar.envelopes_in(text)
        starts = [m.start() for m in envs]
        segments: list[tuple[Envelope | None, int, int, int]] = []
        if not envs or starts[0] > 0:
            segments.append((None, 0, 0, starts[0] if envs else len(text)))
        for i, m in enumerate(envs):
            end = starts[i + 1] if i + 1 < len(envs) else len(text)
            segments.append((_envelope(m, year), m.start(), m.end(), end))
        first = True
        for env, head, start, end in segments:
            body = text[start:end]
            anchors = self.grammar.anchors_in(body)
            cuts = [m.start() for m, _ in anchors]
            if not anchors or cuts[0] > 0:
                lead = body[: cuts[0]] if anchors else body
                yield _Piece(
                    lead,
                    env,
                    env is not None,
                    None,
                    first and env is None,
                    head,
                    start + len(lead),
                )
            for i, (m, a) in enumerate(anchors):
                stop = cuts[i + 1] if i + 1 < len(anchors) else len(body)
                # Re-match on the piece so that the match positions are relative to it.
                piece_text = body[m.start() : stop]
                rm = a.pattern.match(piece_text)
                yield _Piece(
                    piece_text,
                    env,
                    env is not None and i == 0 and cuts[0] == 0,
                    (rm or m, a),
                    False,
                    head if i == 0 and cuts[0] == 0 else start + m.start(),
                    start + stop,
                )
            first = False

    def _feed_part(
        self, line: int, text: str, year: int | None, breaks: Breaks | None = None
    ) -> None:
        """Feed one logical line; ``breaks`` says at which offsets physical lines began
        when it was joined from several."""
        breaks = breaks or ((0, line),)
        for piece in self._pieces(text, year):
            last = _line_at(breaks, max(piece.start, piece.end - 1))
            line = _line_at(breaks, piece.start)
            if piece.has_env and piece.env is not None:
                self._see_process(piece.env, line)
            if piece.anchor is None and not piece.has_env and not piece.text.strip():
                continue  # white space before a record on the same line
            headless = piece.headless and piece.anchor is None
            if headless and self._config_pending is not None:
                if self._config_pending.take(piece.text):
                    continue
                self._finish_config()
            elif self._config_pending is not None:
                self._finish_config()
            fragment = piece.anchor is not None and piece.anchor[1].fragment
            if (
                (headless or fragment)
                and self._pending is not None
                and self._pending.take(piece.text, last)
            ):
                continue
            if piece.anchor is not None:
                self._finish_pending()
                self._pending = _Pending(piece, line)
                self._pending.end_line = last
                self._pending.in_prose = not piece.has_env and bool(
                    text[: piece.start].strip(" \t>-*`")
                )
                continue
            self._finish_pending()
            self._other(piece, line)

    def snapshot(self) -> ParseResult:
        """What has been read so far (for following a log): a record whose last field is
        there is complete and counts; one that may go on waits for the next line."""
        if self._pending is not None and self._pending.closed():
            self._finish_pending()
        return ParseResult(
            self.tables,
            [r for r in self.runs if r.used],
            self.skipped,
            self.lines,
            self.telemetry_lines,
        )

    def finish(self) -> ParseResult:
        if self._held is not None:
            self._feed_part(*self._held)
            self._held = None
        self._finish_pending()
        self._finish_block()
        self._finish_config()
        runs = [r for r in self.runs if r.used]
        return ParseResult(
            self.tables, runs, self.skipped, self.lines, self.telemetry_lines, self.patches
        )

    # -- records ---------------------------------------------------------------------------

    def _emit(self, table: str, row: Row) -> None:
        self.tables.setdefault(table, []).append(row)

    def _stamp(self, row: Row, env: Envelope | None) -> None:
        if env is not None:
            row["_ts"] = (env.year, env.month, env.day, env.time)

    def _finish_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        origin = _Origin(pending.line, pending.end_line, pending.env)
        groups = {k: v for k, v in pending.match.groupdict().items() if v is not None}
        reasons: list[str] = []
        for defn in pending.anchor.definitions:
            reason = self._accept(defn, origin, read_fields(defn, pending.body), groups)
            if reason is None:
                return
            reasons.append(reason)
        if any(reasons):
            reason = next(r for r in reasons if r)
            self.skipped.append(Skip(pending.line, reason, pending.text[:300]))

    def _finish_block(self) -> None:
        block, self._block = self._block, None
        if block is None:
            return
        text = "\n".join(block.lines)
        origin = _Origin(block.line, block.end_line, None)
        reading = read_block(block.defn, text)
        if not reading.values:
            return  # a title line and nothing under it
        reason = self._accept(block.defn, origin, reading, {})
        if reason is not None:
            self.skipped.append(Skip(block.line, reason, text[:300]))

    def _accept(
        self, defn: Definition, origin: _Origin, reading: Reading, groups: Mapping[str, Any]
    ) -> str | None:
        """Store what a record said; the reason it cannot be stored otherwise."""
        values: Row = {**groups, **reading.values}
        if len(reading.values) < defn.min_fields:
            return ""  # a label or two in prose, not a record: nothing to report
        missing = [c for c in defn.required if values.get(c) is None]
        if missing:
            # A field that is there but unreadable is a different fault from one not printed.
            labels = _labels_of(defn, missing)
            names = {label.strip("'") for label in labels}
            bad = [p for p in reading.problems if p.split(":", 1)[0] in names]
            if bad:
                return f"{defn.title} with an unreadable value: {'; '.join(bad)}"
            return f"{defn.title} without {', '.join(labels)}"
        tables = defn.tables
        rows: dict[str, Row] = {t: {} for t in tables}
        column_table = {f.column: f.table or tables[0] for f in defn.fields.values()}
        also = {f.column: f.also for f in defn.fields.values() if f.also}
        for column, value in values.items():
            rows[column_table.get(column, tables[0])][column] = value
            if column in also:
                rows[tables[0]].setdefault(also[column], value)
        for table in tables[1:]:
            needed = defn.required_for.get(table, ())
            if not rows[table] or any(rows[table].get(c) is None for c in needed):
                del rows[table]
        for column, table in defn.has_row.items():
            rows[tables[0]][column] = table in rows
        if defn.starts_run and self._run is not None and self._run.has_records:
            self._new_run(origin.line)
        run = self._current_run(origin.line, block=defn.kind in ("block", "json"))
        run.from_block = run.from_block or (defn.kind in ("block", "json") and not run.procs)
        run.last_line = max(run.last_line, origin.end_line)
        key = (origin.env.proc, origin.env.pid) if origin.env else (None, None)
        if defn.attach_to:
            target = run.last_record.get(key)
            if target is None or target[0] != defn.attach_to:
                return f"{defn.title} with no {defn.attach_to} record before it"
            for column, value in rows[tables[0]].items():
                target[1].setdefault(column, value)
            if isinstance(target[1], BulkRow) and all(p is not target[1] for _, p in self.patches):
                self.patches.append((target[0], target[1]))
            return None
        if defn.starts_run:
            run.starts_seen.add(defn.name)
        if defn.engine:
            run.config.setdefault("server", defn.engine)
        # Stats before spec: a line that is both (SGLang) is its own engine-stats record.
        for table in sorted(rows, key=lambda t: t == "spec_decode"):
            row: Row = {
                "line": origin.line,
                "end_line": origin.end_line,
                "format": defn.name,
                "_run": run.ordinal,
                **rows[table],
            }
            if table == tables[0]:
                if reading.extra:
                    row["extra"] = json.dumps(reading.extra, ensure_ascii=False)
                if reading.notes:
                    row["problems"] = "; ".join(reading.notes)
            if table == "spec_decode" and (reading.cut or defn.fragment):
                row["partial"] = True
            if origin.env is not None:
                row["_ts"] = (origin.env.year, origin.env.month, origin.env.day, origin.env.time)
                if row.get("engine") is None and origin.env.engine is not None:
                    row["engine"] = origin.env.engine
            if defn.counts == "cumulative" and table == tables[0]:
                self._to_deltas(defn, run, key, row)
            if defn.derive.get(table):
                row = RECORD_DERIVATIONS[defn.derive[table]](row)
            if table == "spec_decode":
                previous = run.last_record.get(key)
                if previous is not None and previous[0] == "engine_stats":
                    row.setdefault("engine", previous[1].get("engine"))
                    row["stats_line"] = previous[1]["line"]
            run.last_record[key] = (table, row)
            run.counts[table] = run.counts.get(table, 0) + 1
            self._emit(table, row)
        self.telemetry_lines += origin.end_line - origin.line + 1
        return None

    def _to_deltas(self, defn: Definition, run: Run, key: tuple[Any, ...], row: Row) -> None:
        """Counts printed since the engine started become counts since the last record.
        The first record of an engine keeps its totals (``counts = since_engine_start``);
        a total that drops means the engine restarted (``since_restart``)."""
        state = (run.ordinal, key, defn.name)
        now = {c: row.get(c) for c in defn.cumulative}
        before = self._cumulative.get(state)
        self._cumulative[state] = now
        if before is None:
            row["counts"] = "since_engine_start"
        elif any(
            now[c] is not None and before.get(c) is not None and now[c] < before[c] for c in now
        ):
            row["counts"] = "since_restart"
        else:
            row["counts"] = "delta"
            for c, value in now.items():
                if value is not None and before.get(c) is not None:
                    row[c] = value - before[c]

    def _other(self, piece: _Piece, line: int) -> None:
        text = piece.text
        for defn in self.grammar.configs:
            if defn.literals and not any(lit in text for lit in defn.literals):
                continue
            assert defn.anchor is not None
            m = defn.anchor.search(text)
            if m is None:
                continue
            pending = _PendingConfig(defn, m, text[m.end() :], piece, line)
            if pending.open():
                self._config_pending = pending  # a dict wrapped over several lines
            else:
                self._config(defn, m, pending.text, piece, line)
            break
        for event in self.grammar.events:
            if event.literals and not any(lit in text for lit in event.literals):
                continue
            m = event.anchor.search(text)
            if m is not None:
                self._event(event, m, piece, line)

    def _finish_config(self) -> None:
        pending, self._config_pending = self._config_pending, None
        if pending is not None:
            rest = pending.text if pending.defn.parse else ""
            self._config(pending.defn, pending.match, rest, pending.piece, pending.line)

    def _config(
        self, defn: Definition, m: regex.Match[str], rest: str, piece: _Piece, line: int
    ) -> None:
        said: dict[str, Any] = {k: v for k, v in m.groupdict().items() if v is not None}
        if defn.parse:
            parsed = (
                parse_python_dict(rest) if defn.parse == "python_dict" else parse_key_values(rest)
            )
            for key, column in defn.keys.items():
                if key in parsed:
                    said.setdefault(column, parsed[key])
        if not said:
            return
        run = self._current_run(line)
        if defn.starts_run == "after_records":
            starts = run.has_records  # engines print their config before they serve
        else:
            starts = defn.starts_run and (defn.name in run.starts_seen or run.has_records)
        if starts:
            run = self._new_run(line)
            if piece.env is not None and piece.env.proc and piece.env.pid is not None:
                run.procs[piece.env.proc] = piece.env.pid
        if defn.starts_run is True:
            run.starts_seen.add(defn.name)
        for derivation in defn.derive.values():
            said = CONFIG_DERIVATIONS[derivation](said, run.config)
        run.update_config(said)
        if "_config_lines" not in run.config:
            run.config["_config_lines"] = []
        run.config["_config_lines"].append(line)
        self.telemetry_lines += 1

    def _event(self, event: EventSpec, m: regex.Match[str], piece: _Piece, line: int) -> None:
        run = self._current_run(line)
        detail = {k: v for k, v in m.groupdict().items() if v is not None}
        row: Row = {
            "line": line,
            "_run": run.ordinal,
            "code": event.code,
            "level": piece.env.level if piece.env else None,
            "message": piece.text.strip()[:500],
            "detail": json.dumps(detail) if detail else None,
        }
        self._stamp(row, piece.env)
        run.counts["events"] = run.counts.get("events", 0) + 1
        self._emit("events", row)


Breaks = tuple[tuple[int, int], ...]  # (offset in a joined line, physical line number)


def _line_at(breaks: Breaks, offset: int) -> int:
    line = breaks[0][1]
    for start, number in breaks:
        if start > offset:
            break
        line = number
    return line


_GAP_S = 6 * 3600


def _seconds_apart(before: Envelope | None, after: Envelope) -> float | None:
    """Seconds between two envelopes (infinite across years); None without dates."""
    if before is None or before.month is None or after.month is None:
        return None
    if before.year and after.year and before.year != after.year:
        return math.inf
    return abs(_seconds_in_year(after) - _seconds_in_year(before))


def _far_apart(before: Envelope | None, after: Envelope) -> bool:
    """More than six hours between two envelopes (or the clock went back a month)."""
    apart = _seconds_apart(before, after)
    return apart is not None and apart > _GAP_S


def _side_by_side(before: Envelope | None, after: Envelope) -> bool:
    """Two envelopes close enough in time that their processes ran at once: within one
    logging interval (10 s) and a little."""
    apart = _seconds_apart(before, after)
    return apart is not None and apart <= _SIDE_BY_SIDE_S


_SIDE_BY_SIDE_S = 15


def _seconds_in_year(env: Envelope) -> int:
    h, m, s = (int(x) for x in (env.time or "0:0:0").split(":"))
    days_before = (0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335)[(env.month or 1) - 1]
    return ((days_before + (env.day or 1) - 1) * 24 + h) * 3600 + m * 60 + s


def _labels_of(defn: Definition, columns: Iterable[str]) -> list[str]:
    wanted = list(columns)
    labels = []
    for column in wanted:
        names = [f.label for f in defn.fields.values() if f.column == column]
        labels.append(f"'{names[-1]}'" if names else column)
    return labels


_JSON_DOC_LINES = 100_000


def parse_lines(lines: Iterable[tuple[int, str]], grammar: Grammar | None = None) -> ParseResult:
    """Parse numbered lines of one source."""
    parser = LineParser(grammar)
    numbered = iter(lines)
    first = next(numbered, None)
    if first is None:
        return parser.finish()
    head: list[tuple[int, str]] = [first]
    if first[1].strip() == "{" and parser.grammar.json_docs:
        # A pretty-printed JSON document (`--save-result` with indent): read it whole.
        head.extend(itertools.islice(numbered, _JSON_DOC_LINES))
        text = "\n".join(t for _, t in head)
        if parser.feed_json(head[0][0], text, head[-1][0]):
            head = []
    for number, text in itertools.chain(head, numbered):
        parser.feed(number, text)
    return parser.finish()


def parse_text(text: str, grammar: Grammar | None = None) -> ParseResult:
    """Parse a string holding a log (or a paste of one)."""
    return parse_lines(enumerate(text.split("\n"), start=1), grammar)


__all__ = [
    "BulkRow",
    "Envelope",
    "Grammar",
    "LineParser",
    "ParseResult",
    "Run",
    "Skip",
    "parse_lines",
    "parse_text",
]
