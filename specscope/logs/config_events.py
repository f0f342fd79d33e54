"""What a line that holds no record says of its server: its configuration (a dict that a
terminal may wrap over several lines; a server start opens a run) and the events that
detectors key on (an engine's death, a tensor size mismatch, out of memory).
"""

from __future__ import annotations

import json
from typing import Any

import regex

from specscope.logs.definitions import Definition, EventSpec
from specscope.logs.derive import CONFIG_DERIVATIONS
from specscope.logs.grammar import Grammar
from specscope.logs.pyrepr import parse_key_values, parse_python_dict
from specscope.logs.records import Records
from specscope.logs.results import Row
from specscope.logs.runbook import RunBook
from specscope.logs.wrapped import PendingConfig, Piece


class ConfigsAndEvents:
    """Reads configuration and event lines into the runs and the events table."""

    def __init__(self, grammar: Grammar, book: RunBook, records: Records) -> None:
        self.grammar = grammar
        self.book = book
        self.records = records
        self.pending: PendingConfig | None = None  # a dict wrapped over several lines

    def other(self, piece: Piece, line: int) -> None:
        """A piece of a line that is no record: a configuration or an event, if any."""
        text = piece.text
        for defn in self.grammar.configs:
            if not defn.reads(text):
                continue
            if defn.literals and not any(lit in text for lit in defn.literals):
                continue
            assert defn.anchor is not None
            m = defn.anchor.search(text)
            if m is None:
                continue
            pending = PendingConfig(defn, m, text[m.end() :], piece, line)
            if pending.open():
                self.pending = pending
            else:
                self._config(defn, m, pending.text, piece, line)
            break
        for event in self.grammar.events:
            if not event.reads(text):
                continue
            if event.literals and not any(lit in text for lit in event.literals):
                continue
            m = event.anchor.search(text)
            if m is not None:
                self._event(event, m, piece, line)

    def finish(self) -> None:
        """Read the configuration still held, as far as it went."""
        pending, self.pending = self.pending, None
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
        run = self.book.current(line)
        if defn.starts_run == "after_records":
            starts = run.has_records  # engines print their config before they serve
        else:
            starts = bool(defn.starts_run) and (defn.name in run.starts_seen or run.has_records)
        if starts:
            run = self.book.new(line)
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
        self.records.telemetry_lines += 1

    def _event(self, event: EventSpec, m: regex.Match[str], piece: Piece, line: int) -> None:
        run = self.book.current(line)
        detail = {k: v for k, v in m.groupdict().items() if v is not None}
        row: Row = {
            "line": line,
            "_run": run.ordinal,
            "code": event.code,
            "level": piece.env.level if piece.env else None,
            "message": piece.text.strip()[:500],
            "detail": json.dumps(detail) if detail else None,
        }
        env = piece.env
        if env is not None:
            row["_ts"] = (env.year, env.month, env.day, env.time)
        run.counts["events"] = run.counts.get("events", 0) + 1
        self.records.emit("events", row)


__all__ = ["ConfigsAndEvents"]
