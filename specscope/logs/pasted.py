"""Prometheus text as people paste it: ``curl /metrics`` output in an issue, a file or a
paste on stdin, whole or a few lines, in a markdown fence or quote or not.

- A sample line of a metric an ``exposition`` definition names (``keys``: metric name to
  role, in either spelling, with or without ``_total``) is read with the exposition
  parser ``scrape`` uses; markdown quotes, indents and backticks and the table form of
  Prometheus' console (``name{...} | 22``) are taken off first. HELP and TYPE lines are
  passed over, other lines left to the rest of the parser.
- A target is one engine's series with the same labels (a position label apart). Its
  first snapshot holds the totals since the server started (``counts =
  since_engine_start``: a valid aggregate). When one of its series comes again, a new
  snapshot starts (a second paste of the same server in the same text): its row is the
  change since the snapshot before (``delta``), or the new totals when a counter went
  down (``since_restart``: the server restarted).
- The targets of one instance and model are a run of their own: totals since a start are
  no interval of the log around them, and are never added to its records.
- All counters at 0 is a server that never drafted, said as such (a skipped line), not a
  0% acceptance; a gauge is a last value and its row is partial (``specscope.exposition``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from specscope.exposition import (
    COUNTER_ROLES,
    NAMES,
    POSITION_LABELS,
    POSITION_ROLES,
    Totals,
    finite_count,
    metric_name,
    parse_sample,
    spec_row,
)
from specscope.logs.checks import check_row, refusal
from specscope.logs.definitions import Definition
from specscope.logs.jsonpaste import JsonPastes
from specscope.logs.limits import max_k
from specscope.logs.results import Row, Run, Skip

MAX_TARGETS = 1_000  # targets one text keeps (the first seen), as a scrape does
_COUNTED = {*COUNTER_ROLES, *POSITION_ROLES}
_DIGITS = re.compile(r"\d[\d.]*(?:[eE][-+]?\d+)?")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# Quote marks, indents, list bullets and backticks around a pasted line.
_WRAPPING = re.compile(r"^(?:\s|>|`)*(?:[-*]\s+)?`*|`+\s*$")
# Prometheus' console as copied: ``name{...} | 22`` (the rows of its table).
_CONSOLE = re.compile(r"^\|?\s*([^|]*?\S)\s*\|\s*([^|\s]+)\s*\|?$")

Series = tuple[str, int | None, str]  # metric, position, split
# Labels that split one counter of a target into parts to be added up, not targets of
# their own: SGLang counts generated tokens by is_streaming, its verify steps not.
SPLIT_LABELS = ("is_streaming",)


class Sink(Protocol):
    """Where a paste's rows go: the line parser's tables, skipped lines and runs."""

    tables: dict[str, list[Row]]
    skipped: list[Skip]
    telemetry_lines: int

    def paste_run(self, line: int) -> Run: ...

    def feed_json(self, line: int, text: str, end_line: int | None = None) -> bool | None: ...


@dataclass
class _Snapshot:
    first: int
    last: int
    values: dict[Series, float] = field(default_factory=dict)


@dataclass
class _Target:
    defn: Definition
    labels: dict[str, str]
    run: Run
    open: _Snapshot | None = None
    before: dict[Series, float] | None = None  # the counters of the snapshot before


class Pastes:
    """The exposition lines of one text, gathered by target and snapshot."""

    def __init__(self, definitions: Iterable[Definition], sink: Sink) -> None:
        definitions = tuple(definitions)
        defs = [d for d in definitions if d.kind == "exposition"]
        # Each engine's names are the kernel's (specscope.exposition.NAMES, which pull and
        # scrape read too); a definition's own ``keys`` may add names (a fork's).
        self.roles = {
            metric_name(n): (d, role)
            for d in defs
            for n, role in {**NAMES.get(d.engine, {}), **d.keys}.items()
        }
        self.literals = tuple(sorted({lit for d in defs for lit in d.literals}))
        self.sink = sink
        self.targets: dict[str, _Target] = {}
        self.runs: dict[tuple[str, str | None, str | None], Run] = {}
        # JSON documents pasted over lines (a fenced response): watched, never taken.
        self.json = JsonPastes(sink, any(d.kind == "json" for d in definitions))
        # A sample line that does not read, held for one line: a terminal may have wrapped
        # it ('...model_name="Qwen/Qwen3.5-2' then '7B-AWQ"} 0.0').
        self.cut: tuple[int, str] | None = None
        # The sample just read, whose value a terminal may have cut ('...} 2' then '62.0').
        self.last: tuple[_Target, Series, str] | None = None

    def wants(self, raw: str) -> bool:
        """Could the line be one of a paste (a cheap test)?"""
        return self.json.wants(raw) or any(lit in raw for lit in self.literals)

    def take(self, line: int, raw: str) -> bool:
        """Read ``raw`` if it is a line of a paste; False leaves it to the parser."""
        if self.json.wants(raw):
            self.json.see(line, raw)
            if not any(lit in raw for lit in self.literals):
                return False
        text = unwrap(raw)
        if text.startswith("#"):
            return text.startswith(("# HELP ", "# TYPE "))
        sample = parse_sample(text)
        if sample is None:
            head = _NAME.match(text)
            if head is None or metric_name(head[0]) not in self.roles:
                return False
            self.cut = (line, text)
            return True
        return self._sample(line, raw, sample, text)

    def rest(self, line: int, raw: str) -> bool:
        """The line after a sample line that did not read: read as its rest when the two
        make a sample (a line wrapped by a terminal; then True), else the sample line is
        skipped and this one left to the parser."""
        assert self.cut is not None
        (first, text), self.cut = self.cut, None
        rest = unwrap(raw)
        # Cut inside a name or a value, or at the space before the value (which the copy
        # may have lost at the row's end).
        for joined in (text + rest, f"{text} {rest}"):
            sample = parse_sample(joined)
            if sample is not None and self.roles.get(metric_name(sample[0])) is not None:
                taken = self._sample(first, joined, sample, joined)
                if self.last is not None and self.last[0].open is not None:
                    self.last[0].open.last = line
                return taken
        self._skip(first, "a Prometheus sample line that does not read", text)
        return False

    def more(self, line: int, text: str) -> bool:
        """The line after a sample read: a number alone on it is the rest of the sample's
        value, cut by a terminal (no exposition line is a bare number). True if taken."""
        last, self.last = self.last, None
        if last is None or not _DIGITS.fullmatch(rest := unwrap(text)):
            return False
        target, series, said = last
        sample = parse_sample(said + rest)
        if sample is None or target.open is None or not finite_count(sample[2]):
            return False
        target.open.values[series] = sample[2]
        target.open.last = line
        return True

    def _sample(
        self, line: int, raw: str, sample: tuple[str, dict[str, str], float], text: str
    ) -> bool:
        name, labels, value = sample
        known = self.roles.get(metric_name(name))
        if known is None:
            return False
        defn, role = known
        if not finite_count(value):
            self._skip(line, f"a Prometheus sample of {value:g}: not a count", raw)
            return True
        position = None
        if role in POSITION_ROLES:
            label = next((p for p in POSITION_LABELS if p in labels), "")
            where = labels.pop(label, "")
            if not where.isdigit() or int(where) >= max_k():
                self._skip(line, f"a per-position sample at position {where!r}", raw)
                return True
            position = int(where)
        split = json.dumps([labels.pop(k) for k in SPLIT_LABELS if k in labels])
        series = (metric_name(name), position, split)
        target = self._add(line, defn, labels, series, value)
        self.last = (target, series, text) if target is not None else None
        return True

    def _add(
        self, line: int, defn: Definition, labels: dict[str, str], series: Series, value: float
    ) -> _Target | None:
        key = json.dumps([defn.name, sorted(labels.items())])
        target = self.targets.get(key)
        if target is None:
            if len(self.targets) >= MAX_TARGETS:
                self._skip(line, f"a Prometheus series past {MAX_TARGETS:,} targets", "")
                return None
            target = self.targets[key] = _Target(defn, labels, self._run(defn, labels, line))
        if target.open is not None and series in target.open.values:
            self._close(target)  # the series again: the next paste of the same server
        if target.open is None:
            target.open = _Snapshot(line, line)
        target.open.values[series] = value
        target.open.last = line
        return target

    def _run(self, defn: Definition, labels: dict[str, str], line: int) -> Run:
        key = (defn.engine, labels.get("instance"), labels.get("model_name"))
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = self.sink.paste_run(line)
            run.update_config({"server": defn.engine, "model": labels.get("model_name")})
        return run

    def close(self) -> None:
        """End every snapshot still open (the text ended)."""
        if self.cut is not None:
            self._skip(self.cut[0], "a Prometheus sample line that does not read", self.cut[1])
            self.cut = None
        for target in self.targets.values():
            if target.open is not None:
                self._close(target)

    def _close(self, target: _Target) -> None:
        snap, target.open = target.open, None
        assert snap is not None
        counted = {s: v for s, v in snap.values.items() if self._role(s) in _COUNTED}
        values, counts = dict(snap.values), "since_engine_start"
        before = target.before
        if before is not None:
            restarted = any(v < before.get(s, 0.0) for s, v in counted.items())
            counts = "since_restart" if restarted else "delta"
            if not restarted:
                values.update({s: v - before.get(s, 0.0) for s, v in counted.items()})
        target.before = {**(before or {}), **counted}
        totals = Totals()
        for series, value in values.items():
            role, position = self._role(series), series[1]
            if position is not None:
                at = totals.positions.setdefault(role, {})
                at[position] = at.get(position, 0.0) + value
            elif role in _COUNTED:
                totals.counters[role] = totals.counters.get(role, 0.0) + value
            else:
                totals.gauges[role] = value
        row, why = spec_row(totals, max_k())
        if row is not None and (bad := refusal(row)):
            row, why = None, f"counters that contradict each other: {bad}"
        if row is None:
            if counts == "delta" and why.startswith("speculative decoding never ran"):
                why = "no draft between this paste and the one before: " + why
            self._skip(snap.first, f"{target.defn.title}: {why}", "")
            return
        self._emit(target, snap, row, counts)

    def _emit(self, target: _Target, snap: _Snapshot, row: Row, counts: str) -> None:
        run = target.run
        engine = target.labels.get("engine", "")
        row.update(
            line=snap.first,
            end_line=snap.last,
            format=target.defn.name,
            _run=run.ordinal,
            counts=counts,
            engine=int(engine) if engine.isdigit() and len(engine) < 6 else None,
        )
        if row.get("extra"):
            row["extra"] = json.dumps(row["extra"], sort_keys=True)
        flaws = check_row("spec_decode", row)
        if flaws:
            row["problems"] = "; ".join(flaws)
        if row.get("k") and not run.config.get("k"):
            run.update_config({"k": row["k"]})
        run.counts["spec_decode"] = run.counts.get("spec_decode", 0) + 1
        run.last_line = max(run.last_line, snap.last)
        self.sink.tables.setdefault("spec_decode", []).append(row)
        self.sink.telemetry_lines += snap.last - snap.first + 1

    def _role(self, series: Series) -> str:
        return self.roles[series[0]][1]

    def _skip(self, line: int, reason: str, text: str) -> None:
        self.sink.skipped.append(Skip(line, reason, text[:300]))


def unwrap(raw: str) -> str:
    """A pasted line without what a paste put around it."""
    text = _WRAPPING.sub("", raw.strip())
    console = _CONSOLE.match(text)
    if console is not None and "{" in console[1]:
        text = f"{console[1]} {console[2]}"
    return text


__all__ = ["MAX_TARGETS", "Pastes", "Sink", "unwrap"]
