"""From lines of text to typed rows, runs and skipped lines, driven by the definitions.

Lines are cleaned of their wrappings, cut where a log envelope or a record anchor starts
(records glued on one line), and a record whose line ended early takes the next line
when it reads as the rest of it (records wrapped by a terminal or a paste).
No I/O here: ``parse_lines`` takes ``(line number, text)`` pairs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import regex

from specscope.logs.checks import guarded
from specscope.logs.claims import ClaimWatch
from specscope.logs.clean import clean_line, unquoted
from specscope.logs.config_events import ConfigsAndEvents
from specscope.logs.definitions import Definition
from specscope.logs.fields import read_json, unreadable
from specscope.logs.grammar import Envelope, Grammar, default_grammar, envelope_of
from specscope.logs.groups import holding, typed_groups
from specscope.logs.jsonpaste import OPENS
from specscope.logs.labelled import LabelledResults
from specscope.logs.limits import (
    MAX_JSON_DOC_BYTES,
    LongLines,
    cap_text_lines,
    max_line_bytes,
    refresh,
)
from specscope.logs.pasted import Pastes
from specscope.logs.reading import Reading
from specscope.logs.records import Records
from specscope.logs.results import ParseResult, Row, Run, Skip
from specscope.logs.run_labels import RunLabels
from specscope.logs.runbook import RunBook
from specscope.logs.table_shapes import is_caption
from specscope.logs.wrapped import Block, Breaks, Origin, Pending, Piece, line_at

_HOLD_MAX = 4096  # a held line longer than this is fed as it is
_BULLET = regex.compile(r"[-*+][ \t]++(?=\[?\{)")  # a list item that is a JSON document


class LineParser:
    """Feeds lines through the grammar, keeping the state that spans lines."""

    def __init__(self, grammar: Grammar | None = None) -> None:
        refresh()  # the limits, as the environment sets them now
        self.grammar = grammar or default_grammar()
        # A record still held when a new run opens is the old run's.
        self.book = RunBook(before_new=self._finish_pending)
        self.records = Records(self.book)
        self.tables = self.records.tables
        self.patches = self.records.patches  # bulk records a later line completed
        self.skipped: list[Skip] = []
        self.lines = 0
        self._pending: Pending | None = None
        # A line that may go on on the next one: (line, text, year, where lines begin).
        self._held: tuple[int, str, int | None, Breaks] | None = None
        self._block: Block | None = None
        self.configs = ConfigsAndEvents(self.grammar, self.book, self.records)
        self._pastes = Pastes(self.grammar.definitions, self)  # pasted /metrics text
        # Result blocks under labels in a fence (specscope.logs.labelled).
        self._labelled = LabelledResults(self.grammar.definitions, self._keep_labelled)
        # The author's label above a result ('w/o spec:'): which run it is (logs.run_labels).
        self._labels = RunLabels(self.grammar.definitions)
        # Verdicts stated in sentences (specscope.logs.claims), kept at the end.
        self._claims = ClaimWatch(
            self.grammar.definitions, self._keep_claim, lambda t: bool(self.grammar.envelopes_in(t))
        )

    # -- runs ------------------------------------------------------------------------------

    @property
    def run(self) -> Run | None:
        """The run the next record would belong to (None before any line opened one)."""
        return self.book.run

    @property
    def runs(self) -> list[Run]:
        return self.book.runs

    def paste_run(self, line: int) -> Run:
        """A run for pasted counters, which takes no record of the log around them."""
        return self.book.paste_run(line)

    @property
    def telemetry_lines(self) -> int:
        """Lines that held a record of any table."""
        return self.records.telemetry_lines

    @telemetry_lines.setter
    def telemetry_lines(self, n: int) -> None:
        self.records.telemetry_lines = n

    # -- lines read in bulk (specscope.logs.bulk) ------------------------------------------------

    @property
    def quiet(self) -> bool:
        """Nothing carried over from earlier lines: the next line is read on its own."""
        pastes = self._pastes
        held = (self._pending, self._held, self._block, self.configs.pending, pastes.cut)
        return (
            held.count(None) == 5
            and pastes.last is None
            and not pastes.json.lines
            and not self._labelled.open
            and not self._labels.held
            and not self._claims.holding  # (a sentence wrapped onto the next line)
        )

    def open_line(self) -> int | None:
        """The first line of what is still held (a record, a wrapped line, a block, a
        config), whose rows are yet to come; None when nothing is."""
        held = (self._pending, self._block, self.configs.pending)
        lines = [h.line for h in held if h is not None]
        if self._held is not None:
            lines.append(self._held[0])
        lines.extend(self._pastes.json.lines_held())  # a JSON document pasted over lines
        if self._pastes.cut is not None:
            lines.append(self._pastes.cut[0])  # a sample line that may go on
        lines.extend(self._labelled.lines_held())  # a fence that may hold labelled results
        lines.extend(self._labels.lines_held())  # a label whose result is to come
        return min(lines, default=None)

    def close_record(self) -> None:
        """End a record that may still go on, when the next line is known to start with a
        log header of its own (so it would end the record the same way)."""
        if self._held is None and self._block is None and self.configs.pending is None:
            self._finish_pending()

    def steady(self, proc: str, pid: int) -> bool:
        """Would a line from this process leave the runs as they are (its pid is the run's)?"""
        return self.book.steady(proc, pid)

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
        run = self.book.run
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

    @guarded("a line")
    def feed(self, line: int, raw: str) -> None:
        self.lines = max(self.lines, line)
        # A CRLF line end is the line's end, not a carriage return inside it: split there,
        # it left an empty last part that read as a blank line and ended every table and
        # paragraph of a paste saved on Windows.
        raw = raw.removesuffix("\r")
        if not raw or raw.isspace():
            self._pastes.last = None  # a value's rest comes on the very next line
            self.blank()
            return
        if self._pastes.cut is not None and self._pastes.rest(line, clean_line(raw).text):
            return
        if self._pastes.last is not None and self._pastes.more(line, clean_line(raw).text):
            return
        if self._labelled.wants(raw):  # watched, not taken: the line is read as it would be
            self._labelled.see(line, raw)
        if self._labels.wants(raw):
            self._labels.see(line, raw)
        if self._pastes.wants(raw) and (
            self._pastes.take(line, raw) or self._take_bare_sample(line, raw)
        ):
            return
        if raw.startswith(("{", "[{")) and self.grammar.json_docs and self.feed_json(line, raw):
            return
        for part in raw.split("\r"):
            if (
                self._pending is None
                and self._held is None
                and self._block is None
                and self.configs.pending is None
                and not self.grammar.interesting(part)
            ):
                if self._claims.holding:  # (a sentence wrapped onto a line of no literal)
                    self._claims.more(line, clean_line(part).text)
                else:
                    self._claims.before = (line, part)  # (or its start on one)
                continue
            cleaned = clean_line(part)
            if not cleaned.text.strip():
                self.blank()  # a quote's or a container's empty line ('> ', 'vllm-1  | ')
                self._claims.gap(part)  # (a fence's line too: no paragraph goes on past it)
                continue
            text = cleaned.text
            self._claims.see(line, text)
            doc = text[bullet.end() :] if (bullet := _BULLET.match(text)) else text
            if (
                doc.startswith(("{", "[{"))
                and not OPENS.match(part)  # the JSON watch reads a quoted or indented one
                and self.grammar.json_docs
                and self.feed_json(line, doc)
            ):
                continue  # a response a runtime prefixed, a terminal coloured, a list holds
            if self._block is not None and self._block.defn.parse in _RAW_ROWS:
                # A row's first cell is no service of docker compose ('receipt | 60.08 tok/s'),
                # but a reply's quote is no part of the row.
                text = unquoted(part)
            self._feed_clean(line, text, cleaned.year)
            if self._took_rest(line):
                self._claims.not_prose(line)

    def _took_rest(self, line: int) -> bool:
        """Was ``line`` the rest of a server's record, wrapped behind its envelope (by a
        terminal, or each part behind a container stamp)? Its numbers are no author's: the
        claims reader read them as prose, 28% of the line parser's time on a docker log."""
        pending, held = self._pending, self._held
        if held is not None:
            return held[0] < line == held[3][-1][1] and bool(self.grammar.envelopes_in(held[1]))
        return (
            pending is not None
            and pending.env is not None
            and pending.line < line == pending.end_line
        )

    def _take_bare_sample(self, line: int, raw: str) -> bool:
        """A /metrics sample behind what a container runtime or a terminal put before it
        (``vllm-1  | vllm:spec_decode_...``, a kubectl stamp, colour): read as pasted."""
        bare = clean_line(raw).text
        return (
            bare != raw.strip()
            and not self._pastes.json.wants(bare)
            and self._pastes.take(line, bare)
        )

    def blank(self) -> None:
        """A blank line (or a run of them): it ends a block, as it ends a markdown table,
        unless the block's definition says blank lines are part of it (a result block's
        sections) or the block is a heading that names the table to come. A record held
        goes on after it (a paste double-spaced), and so does a line held."""
        block = self._block
        if block is None or block.goes_on_after_blank():
            if block is not None and block.defn.parse == "joined_tables":
                block.lines.append("")  # its rows are quoted by their line in it
            return
        if len(block.lines) == 1 and is_caption(block.lines[0]):
            return
        self._finish_block()

    @guarded("a JSON document")
    def feed_json(self, line: int, text: str, end_line: int | None = None) -> bool:
        """A JSON document (a result, a response), or an array of them, one record each."""
        try:
            obj = json.loads(text)
        except ValueError:
            return False
        taken = False
        for doc in obj if isinstance(obj, list) else [obj]:  # TensorRT-LLM's /metrics: a list
            ds = self.grammar.json_docs if isinstance(doc, dict) else ()
            # A whole record's definition first; one that keeps a part of it (a mean
            # without counts) only where the whole one finds its counts missing.
            hits = [(d, f) for d in ds if (f := holding(doc, d.match_keys)) is not None]
            hits.sort(key=lambda hit: hit[0].fragment)
            if hits:
                self._finish_pending()
                self._finish_block()
                origin = Origin(line, end_line or line, None)
                reasons = [self.records.keep(d, origin, read_json(d, f), {}) for d, f in hits[:1]]
                for d, f in hits[1:]:
                    if reasons[-1] is None:
                        break
                    reasons.append(self.records.keep(d, origin, read_json(d, f), {}))
                if reasons[-1]:
                    self.skipped.append(Skip(line, reasons[0] or reasons[-1], text[:300]))
                taken = True
        return taken

    def _feed_clean(self, line: int, text: str, year: int | None) -> None:
        """Hold a line that ends inside a log header or a record's opening words until the
        next line shows whether the two are one line wrapped (a narrow terminal)."""
        if self._block is not None:
            start = self._block_start(text)
            held = self._block
            if start is not None and len(held.lines) == 1 and is_caption(held.lines[0]):
                # A heading that gives the table under it its unit ('### Decode tok/s'):
                # the table's block, opened by its header as usual, holds it too.
                others = list(self.grammar.block_starts(text))[1:]
                self._block = Block(start[0], text[start[1].start() :], line, start[1], others)
                self._block.lines[:0] = [held.lines[0], *[""] * (line - held.line - 1)]
                self._block.line = held.line
                return
            if (start is None or not self._block.repeats(text)) and self._block.take(text, line):
                if self._block.ended:
                    self._finish_block()
                return
            self._finish_block()
        start = self._block_start(text)
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
            others = list(self.grammar.block_starts(text))[1:]
            self._block = Block(defn, text[m.start() :], line, m, others)
            return
        if self.grammar.unfinished(text):
            self._held = (line, text, year, ((0, line),))
            return
        self._feed_part(line, text, year)

    def _block_start(self, text: str) -> tuple[Definition, regex.Match[str]] | None:
        start = self.grammar.block_start(text)
        if start is not None and start[0].parse == "json_keys" and self._pastes.json.lines:
            return None  # a key of a document the JSON watch holds is the document's
        return start

    def _pieces(self, text: str, year: int | None) -> Iterator[Piece]:
        envs = self.grammar.envelopes_in(text)
        starts = [m.start() for m in envs]
        segments: list[tuple[Envelope | None, int, int, int]] = []
        if not envs or starts[0] > 0:
            segments.append((None, 0, 0, starts[0] if envs else len(text)))
        for i, m in enumerate(envs):
            end = starts[i + 1] if i + 1 < len(envs) else len(text)
            segments.append((envelope_of(m, year), m.start(), m.end(), end))
        first = True
        for env, head, start, end in segments:
            body = text[start:end]
            anchors = self.grammar.anchors_in(body)
            cuts = [m.start() for m, _ in anchors]
            if not anchors or cuts[0] > 0:
                lead = body[: cuts[0]] if anchors else body
                yield Piece(
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
                yield Piece(
                    piece_text,
                    env,
                    env is not None and i == 0 and cuts[0] == 0,
                    (rm or m, a),
                    False,
                    head if i == 0 and cuts[0] == 0 else start + m.start(),
                    start + stop,
                )
            first = False

    @guarded("a line")
    def _feed_part(
        self, line: int, text: str, year: int | None, breaks: Breaks | None = None
    ) -> None:
        """Feed one logical line; ``breaks`` says at which offsets physical lines began
        when it was joined from several."""
        breaks = breaks or ((0, line),)
        prose_from = len(text) - len(text.lstrip(" \t>-*`"))  # what is before it is markup
        for piece in self._pieces(text, year):
            last = line_at(breaks, max(piece.start, piece.end - 1))
            line = line_at(breaks, piece.start)
            if piece.has_env and piece.env is not None:
                self.book.see_process(piece.env, line)
            if piece.anchor is None and not piece.has_env and not piece.text.strip():
                continue  # white space before a record on the same line
            headless = piece.headless and piece.anchor is None
            if headless and self.configs.pending is not None:
                if self.configs.pending.take(piece.text):
                    continue
                self._finish_config()
            elif self.configs.pending is not None:
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
                self._pending = Pending(piece, line)
                self._pending.end_line = last
                self._pending.in_prose = not piece.has_env and piece.start > prose_from
                continue
            self._finish_pending()
            self.configs.other(piece, line)

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
        while self._held is not None or self._block is not None:  # lines a block gave back
            if self._held is not None:
                self._feed_part(*self._held)
                self._held = None
            self._finish_pending()
            self._finish_block()
        self._finish_pending()
        self._finish_config()
        self._labelled.close()
        self._pastes.close()
        self._claims.note_rows(self.tables)
        stated = self._claims.stated_spec
        counted = sum(r.counts.get("spec_decode", 0) for r in self.runs) > stated
        self._claims.close(counted)
        runs = [r for r in self.runs if r.used]
        return ParseResult(
            self.tables, runs, self.skipped, self.lines, self.telemetry_lines, self.patches
        )

    # -- records ---------------------------------------------------------------------------

    @guarded("a record")
    def _finish_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        origin = Origin(pending.line, pending.end_line, pending.env)
        groups = {k: v for k, v in pending.match.groupdict().items() if v is not None}
        reasons: list[str] = []
        for defn in pending.anchor.definitions:
            reading = pending.reading(defn)
            reading.alone = not pending.in_prose
            reading.under_baseline = self._labels.under_baseline(pending.line)
            self._built_on(reading, pending.line)
            reason = self.records.keep(
                defn, origin, reading, typed_groups(defn, groups, reading.extra)
            )
            if reason is None:
                return
            reasons.append(reason)
            if reading.refused or unreadable(defn, reading, defn.required):
                # A record of this format whose value is there but does not read is a
                # fault to report, not one for a looser definition (a trimmed or pasted
                # form tried after it) to keep without that value.
                break
        if any(reasons):
            reason = next(r for r in reasons if r)
            self.skipped.append(Skip(pending.line, reason, pending.text[:300]))

    def _built_on(self, reading: Reading, line: int) -> None:
        build = self._labels.built_on(line)
        if build is not None and reading.under_baseline is None:
            reading.extra.setdefault("label", build)  # the build the author says it ran on

    def _keep_labelled(self, defn: Definition, first: int, last: int, reading: Reading) -> None:
        reason = self.records.keep(defn, Origin(first, last, None), reading, {})
        if reason:
            self.skipped.append(Skip(first, reason, str(reading.values.get("stated", ""))[:300]))

    def read_elsewhere(
        self, tables: Mapping[str, list[dict[str, Any]]], frames: Mapping[str, list[Any]]
    ) -> None:
        """Rows about to leave for the stage (the parser's and the bulk reader's frames):
        a claim in words on a line they read is not kept beside them."""
        self._claims.note_rows(tables)
        for table, parts in frames.items():
            for frame in parts:
                self._claims.note_frame(table, frame)

    def _keep_claim(self, defn: Definition, line: int, reading: Reading) -> None:
        reason = self.records.keep(defn, Origin(line, line, None), reading, {})
        if reason:
            self.skipped.append(Skip(line, reason, str(reading.extra.get("stated", ""))[:300]))

    @guarded("a block")
    def _finish_block(self) -> None:
        block, self._block = self._block, None
        if block is None:
            return
        said = "\n".join(block.lines)[:300]
        readings = block.readings()
        if not readings and block.defn.parse == "joined_tables":
            self._replay(block)
            return
        for defn, reading in readings:
            reading.under_baseline = self._labels.under_baseline(block.line)
            self._built_on(reading, block.line)
            for part in (reading, *reading.more):  # a table of records: one a row, its line
                at = None if part.offset is None else block.line + part.offset
                reason = self.records.keep(
                    defn, Origin(at or block.line, at or block.end_line, None), part, {}
                )
                if reason is not None:
                    self.skipped.append(Skip(at or block.line, reason, said))

    def _replay(self, block: Block) -> None:
        """A caption's tables that join nowhere (parsers/stated_speedup_tables_joined.toml):
        the lines after the caption read as they would have been without it, so that a
        table of counts or a comparison under 'Baseline vs EAGLE:' is read as ever."""
        for n, text in enumerate(block.lines[1:], start=1):
            if not text.strip():
                self.blank()
                continue
            opened = self._block
            raw = opened is not None and opened.defn.parse in _RAW_ROWS
            self._feed_clean(block.line + n, unquoted(text) if raw else clean_line(text).text, None)

    @guarded("a configuration line")
    def _finish_config(self) -> None:
        self.configs.finish()


_JSON_DOC_LINES = 100_000
# Tables without outer pipes: a row is read as pasted (see ``feed``).
_RAW_ROWS = ("bare_table", "joined_tables")


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
        size = len(first[1])
        for item in itertools.islice(numbered, _JSON_DOC_LINES):
            head.append(item)
            size += len(item[1]) + 1
            if size > MAX_JSON_DOC_BYTES:
                break  # too big to be one: read line by line
        text = "\n".join(t for _, t in head)
        if parser.feed_json(head[0][0], text, head[-1][0]):
            head = []
    for number, text in itertools.chain(head, numbered):
        parser.feed(number, text)
    return parser.finish()


def parse_text(text: str, grammar: Grammar | None = None) -> ParseResult:
    """Parse a string holding a log (or a paste of one); a line over the line limit is
    skipped, as from a file."""
    refresh()
    long = LongLines(max_line_bytes())
    lines = cap_text_lines(enumerate(text.split("\n"), start=1), long, long.limit)
    return noted(parse_lines(lines, grammar), long)


def noted(result: ParseResult, long: LongLines) -> ParseResult:
    """``result`` with the lines over the line limit among its skipped lines."""
    result.skipped.extend(Skip(n, long.reason, f"{size:,} bytes") for n, size in long.lines)
    result.long_lines = list(long.lines)
    result.lines = max([result.lines, *(n for n, _ in long.lines)])
    return result


__all__ = [
    "LineParser",
    "noted",
    "parse_lines",
    "parse_text",
]
