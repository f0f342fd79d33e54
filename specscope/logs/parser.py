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

from specscope.logs.checks import check_row, guarded, refusal
from specscope.logs.clean import clean_line
from specscope.logs.definitions import Definition, EventSpec, load_definitions
from specscope.logs.derive import CONFIG_DERIVATIONS, RECORD_DERIVATIONS, to_deltas
from specscope.logs.fields import (
    Reading,
    labels_of,
    read_json,
    unreadable,
)
from specscope.logs.grammar import (
    Envelope,
    Grammar,
    envelope_of,
    far_apart,
    side_by_side,
)
from specscope.logs.groups import SeriesRuns, holding, typed_groups
from specscope.logs.limits import (
    MAX_JSON_DOC_BYTES,
    LongLines,
    cap_text_lines,
    max_line_bytes,
    refresh,
)
from specscope.logs.pasted import Pastes
from specscope.logs.pyrepr import parse_key_values, parse_python_dict
from specscope.logs.results import BulkRow, ParseResult, Row, Run, Skip
from specscope.logs.wrapped import Block, Breaks, Origin, Pending, PendingConfig, Piece, line_at

_HOLD_MAX = 4096  # a held line longer than this is fed as it is


class LineParser:
    """Feeds lines through the grammar, keeping the state that spans lines."""

    def __init__(self, grammar: Grammar | None = None) -> None:
        refresh()  # the limits, as the environment sets them now
        self.grammar = grammar or Grammar(load_definitions())
        self.tables: dict[str, list[Row]] = {}
        self.runs: list[Run] = []
        self.skipped: list[Skip] = []
        self.lines = 0
        self.telemetry_lines = 0
        self._pending: Pending | None = None
        # A line that may go on on the next one: (line, text, year, where lines begin).
        self._held: tuple[int, str, int | None, Breaks] | None = None
        self._block: Block | None = None
        self._config_pending: PendingConfig | None = None
        self._cumulative: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._run: Run | None = None
        self.patches: list[tuple[str, BulkRow]] = []  # bulk records a later line completed
        self._pastes = Pastes(self.grammar.definitions, self)  # pasted /metrics text
        self._series = SeriesRuns(self.runs)  # runs of series printed side by side

    # -- runs ------------------------------------------------------------------------------

    @property
    def run(self) -> Run | None:
        """The run the next record would belong to (None before any line opened one)."""
        return self._run

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

    def paste_run(self, line: int) -> Run:
        """A run for pasted counters, which takes no record of the log around them."""
        self._finish_pending()
        run = self._new_run(line)
        run.from_block = True
        return run

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
        if other_pid and run is not None and side_by_side(run.last_seen, env):
            # A restart takes at least a model load; a new pid logging within seconds of
            # the run's last line is a sibling (`--api-server-count N` gives N API servers
            # that log side by side, each for its engines).
            run.side_pids.setdefault(env.proc, []).append(env.pid)
            other_pid = False
        if run is not None and (
            other_pid or (env.proc not in run.procs and run.procs and far_apart(run.last_seen, env))
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
        held = (self._pending, self._held, self._block, self._config_pending)
        return held.count(None) == 4 and not self._pastes.json.lines

    def open_line(self) -> int | None:
        """The first line of what is still held (a record, a wrapped line, a block, a
        config), whose rows are yet to come; None when nothing is."""
        held = (self._pending, self._block, self._config_pending)
        lines = [h.line for h in held if h is not None]
        if self._held is not None:
            lines.append(self._held[0])
        lines.extend(self._pastes.json.lines_held())  # a JSON document pasted over lines
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

    @guarded("a line")
    def feed(self, line: int, raw: str) -> None:
        self.lines = max(self.lines, line)
        if not raw or raw.isspace():
            return  # a blank line changes nothing held (a record goes on after it)
        if self._pastes.wants(raw) and self._pastes.take(line, raw):
            return
        if raw.startswith(("{", "[{")) and self.grammar.json_docs and self.feed_json(line, raw):
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
            hit = next(((d, f) for d in ds if (f := holding(doc, d.match_keys)) is not None), None)
            if hit is not None:
                self._finish_pending()
                self._finish_block()
                origin = Origin(line, end_line or line, None)
                reason = self._accept(hit[0], origin, read_json(*hit), {})
                if reason:
                    self.skipped.append(Skip(line, reason, text[:300]))
                taken = True
        return taken

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
            others = list(self.grammar.block_starts(text))[1:]
            self._block = Block(defn, text[m.start() :], line, m, others)
            return
        if self.grammar.unfinished(text):
            self._held = (line, text, year, ((0, line),))
            return
        self._feed_part(line, text, year)

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
                self._pending = Pending(piece, line)
                self._pending.end_line = last
                self._pending.in_prose = not piece.has_env and piece.start > prose_from
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
        self._pastes.close()
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
            reason = self._accept(defn, origin, reading, typed_groups(defn, groups, reading.extra))
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

    @guarded("a block")
    def _finish_block(self) -> None:
        block, self._block = self._block, None
        if block is None:
            return
        said = "\n".join(block.lines)[:300]
        for defn, reading in block.readings():
            for part in (reading, *reading.more):  # a table of records: one a row, its line
                at = None if part.offset is None else block.line + part.offset
                reason = self._accept(
                    defn, Origin(at or block.line, at or block.end_line, None), part, {}
                )
                if reason is not None:
                    self.skipped.append(Skip(at or block.line, reason, said))

    def _accept(
        self, defn: Definition, origin: Origin, reading: Reading, groups: Mapping[str, Any]
    ) -> str | None:
        """Store what a record said; the reason it cannot be stored otherwise."""
        values: Row = {**groups, **reading.values}
        series = values.pop("series", None) or defn.keys.get("series")  # specscope.logs.groups
        if defn.kind != "block" and len(reading.values) < defn.min_fields:
            return ""  # a label or two in prose, not a record: nothing to report
        if defn.refuse_cut and (reading.cut or reading.trails):
            # Ends like a record cut off, not like one trimmed by hand: the definition
            # tried before this one says what it lacks.
            return f"{defn.title} cut off" + (f" ({reading.dropped})" if reading.dropped else "")
        missing = [c for c in defn.required if values.get(c) is None]
        if missing:
            # A field that is there but unreadable is a different fault from one not printed.
            bad = unreadable(defn, reading, missing)
            if bad:
                return f"{defn.title} with an unreadable value: {'; '.join(bad)}"
            return f"{defn.title} without {', '.join(labels_of(defn, missing))}"
        reading.refused = reading.refused or refusal(values)
        if reading.refused:  # (no looser definition tried after this one keeps it either)
            return f"{defn.title} that cannot be kept: {reading.refused}"
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
        if series is not None:
            run = self._series.run_for(run, str(series), origin.line, defn.engine)
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
                state = (run.ordinal, key, defn.name)
                to_deltas(self._cumulative, state, defn.cumulative, row)
            if defn.derive.get(table):
                row = RECORD_DERIVATIONS[defn.derive[table]](row)
            flaws = check_row(table, row)
            if origin.env is not None and origin.env.flaw and table == tables[0]:
                flaws.append(origin.env.flaw)
            if flaws:
                row["problems"] = "; ".join([*filter(None, [row.get("problems")]), *flaws])
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

    def _other(self, piece: Piece, line: int) -> None:
        text = piece.text
        for defn in self.grammar.configs:
            if defn.literals and not any(lit in text for lit in defn.literals):
                continue
            assert defn.anchor is not None
            m = defn.anchor.search(text)
            if m is None:
                continue
            pending = PendingConfig(defn, m, text[m.end() :], piece, line)
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

    @guarded("a configuration line")
    def _finish_config(self) -> None:
        pending, self._config_pending = self._config_pending, None
        if pending is not None:
            rest = pending.text if pending.defn.parse else ""
            self._config(pending.defn, pending.match, rest, pending.piece, pending.line)

    def _config(
        self, defn: Definition, m: regex.Match[str], rest: str, piece: Piece, line: int
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
            starts = bool(defn.starts_run) and (defn.name in run.starts_seen or run.has_records)
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

    def _event(self, event: EventSpec, m: regex.Match[str], piece: Piece, line: int) -> None:
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
