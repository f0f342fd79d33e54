"""A record that read, stored: its values split into rows by table, each row checked,
typed counts turned into deltas, and the rows put in the run the record belongs to; or
the reason it cannot be stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from specscope.logs import label_config
from specscope.logs.checks import check_row, refusal
from specscope.logs.definitions import Definition
from specscope.logs.derive import RECORD_DERIVATIONS, to_deltas
from specscope.logs.fields import Reading, fields_needed, labels_of, unreadable
from specscope.logs.results import BulkRow, Row
from specscope.logs.runbook import RunBook, shape_of
from specscope.logs.wrapped import Origin


class Records:
    """The rows read from one source, by table, and the lines that held them."""

    def __init__(self, book: RunBook) -> None:
        self.book = book
        self.tables: dict[str, list[Row]] = {}
        self.telemetry_lines = 0
        self.patches: list[tuple[str, BulkRow]] = []  # bulk records a later line completed
        self._cumulative: dict[tuple[Any, ...], dict[str, Any]] = {}

    def emit(self, table: str, row: Row) -> None:
        self.tables.setdefault(table, []).append(row)

    def keep(
        self, defn: Definition, origin: Origin, reading: Reading, groups: Mapping[str, Any]
    ) -> str | None:
        """Store what a record said; the reason it cannot be stored otherwise."""
        values: Row = {**groups, **reading.values}
        series = values.pop("series", None) or defn.keys.get("series")  # specscope.logs.groups
        if defn.kind != "block" and len(reading.values) < fields_needed(defn, reading):
            return ""  # a label or two in prose, not a record: nothing to report
        if defn.refuse_cut and reading.cut:
            # Stops inside a value: cut off, not trimmed by hand, and the definition tried
            # before this one says what it lacks. (One that stops after a separator or at
            # an ellipsis printed each value whole: what it printed is kept.)
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
        if reading.under_baseline and _prints_baseline(defn, values):
            # The run without speculation the author labelled: what the script printed for
            # it in the speculative tables (an acceptance length of 1.00) measures nothing.
            for f in defn.fields.values():
                if f.also and f.table in defn.has_row.values():
                    rows[tables[0]].pop(f.also, None)
            for table in defn.has_row.values():
                rows.pop(table, None)
            reading.extra.setdefault("label", reading.under_baseline)  # why: the author's word
        for column, table in defn.has_row.items():
            rows[tables[0]][column] = table in rows
        book = self.book
        if defn.kind == "fields" and defn.starts_run is True:
            # No server line starts a run: this is an author's statement (a rate in prose,
            # a reference value), a run of its own. Joined to the log's run, a prose number
            # would be added to or stand for the counts the server printed around it.
            run = book.own(origin.line)
        else:
            if defn.starts_run and book.run is not None and book.run.has_records:
                book.new(origin.line)
            run = book.current(origin.line, block=defn.kind in ("block", "json"))
            run.from_block = run.from_block or (defn.kind in ("block", "json") and not run.procs)
        key = (origin.env.proc, origin.env.pid) if origin.env else (None, None)
        split = None
        if series is not None:
            run = book.series.run_for(run, str(series), origin.line, defn.engine)
        elif (
            defn.kind == "fields"
            and defn.engine == "vllm"  # llama.cpp's draft length is dynamic: its list is no k
            and tables[0] == "spec_decode"
            and not run.from_block
            # A k set per batch size varies within one launch by design.
            and "num_speculative_tokens_per_batch_size" not in run.config
        ):
            whole = not (reading.cut or reading.trails or reading.notes or defn.fragment)
            k = shape_of(values, whole=whole)
            if k is not None and (moved := book.reshape(run, key, k, origin.line)) is not run:
                run, split = moved, moved.config.get("split")
        run.last_line = max(run.last_line, origin.end_line)
        if defn.attach_to:
            target = run.last_record.get(key)
            if target is None or target[0] != defn.attach_to:
                return f"{defn.title} with no {defn.attach_to} record before it"
            for column, value in rows[tables[0]].items():
                target[1].setdefault(column, value)
            if isinstance(target[1], BulkRow) and all(p is not target[1] for _, p in self.patches):
                self.patches.append((target[0], target[1]))
            return None
        if tables[0] == "spec_decode" and reading.extra:
            label_config.note(run, reading.extra)  # the method or depth its label names
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
                if reading.notes or split:
                    row["problems"] = "; ".join([*reading.notes, *filter(None, [split])])
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
            self.emit(table, row)
        self.telemetry_lines += origin.end_line - origin.line + 1
        return None


def _prints_baseline(defn: Definition, values: Mapping[str, Any]) -> bool:
    """Does the record print what its format prints for a run without speculation?"""
    said = defn.baseline_prints
    return bool(said) and all(values.get(column) == value for column, value in said.items())


__all__ = ["Records"]
