"""A summary an example program prints after its run, one ``label = value`` a line, with a
measure line or two in words beside them (llama.cpp's ``llama-speculative``)::

    decoded  371 tokens in   34.412 seconds, speed:   10.781 t/s

    n_draft   = 16
    n_drafted = 912
    n_accept  = 313
    accept    = 34.320%

Read by the roles the definition's ``keys`` give: ``assignment``, a line's label and its
value (groups ``label`` and ``value``); the definition's ``pattern``, a measure line whose
groups are named after the columns they fill (``x_`` ones go to ``extra``). A known label
fills its field's column; another one is kept in ``extra`` as printed, so that a fork's
added lines change nothing. Nothing is computed here: the counts are the program's.

A block may have the pattern alone: an author's heading that names acceptance and the
value opening the paragraph under it (parsers/stated_acceptance_heading.toml), whose
groups are the stated words the definition's derivation reads; or a sentence with a
per-position sequence of rates in it (parsers/stated_acceptance_positions.toml), each
match of the pattern a record of its own. A group may name a field by its label instead
of its column (two spellings of one column: a list of fractions, a list of percentages);
a list may be printed with '/' between its items. The ``falling`` key names list columns
that cannot rise (per-position rates: a draft reaches position i+1 only through i); one
that rises is a problem, not a value. ``record_line = "measure"`` puts the record on the
line of its first measure (a table's row) instead of the block's first line (its header).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import regex

from specscope.logs.definitions import Definition, FieldSpec
from specscope.logs.reading import Reading

Convert = Callable[[FieldSpec, str], Any]
EXTRA_PREFIX = "x_"


def _key(defn: Definition, role: str) -> regex.Pattern[str] | None:
    raw = defn.keys.get(role)
    return regex.compile(raw, regex.I | regex.V0) if raw else None


def read_assignments(defn: Definition, text: str, convert: Convert) -> Reading:
    """What a block of ``label = value`` lines and measure lines says. A value that does
    not read as its field's type is a problem of the reading, not a record's end."""
    reading = Reading()
    assignment = _key(defn, "assignment")
    by_column = {f.column: f for f in defn.fields.values()}
    falling = set(defn.keys.get("falling", "").split())
    item_label = _key(defn, "item_label")
    # A record on the line of its measure, not of the block's first line: a table's row
    # under the header that opens the block (send_one's, parsers/sglang_send_one.toml).
    at_measure = defn.keys.get("record_line") == "measure"
    for offset, line in enumerate(text.splitlines()):
        measures = list(defn.pattern.finditer(line)) if defn.pattern is not None else []
        for i, measure in enumerate(measures):
            # A second match, or one whose columns the block already holds, is a record
            # of its own (two sequences in one sentence, one a line).
            said = {n: v for n, v in measure.groupdict().items() if v is not None}
            specs = {n: f for n in said if (f := defn.field_for(n) or by_column.get(n))}
            again = any(f.column in reading.values for f in specs.values())
            part = Reading(offset=offset) if i or again else reading
            if part is reading and at_measure and not reading.values:
                reading.offset = offset
            for name, raw in said.items():
                if name.startswith(EXTRA_PREFIX):
                    part.extra[name[len(EXTRA_PREFIX) :]] = _number(raw)
                elif name in specs:
                    if item_label is not None and specs[name].type.endswith("_list"):
                        raw = item_label.sub("", raw)
                    _put(part, specs[name], raw, convert, specs[name].column in falling)
            if part is not reading:
                reading.more.append(part)
        if measures:
            continue
        found = assignment.search(line) if assignment is not None else None
        if found is None:
            continue
        label, raw = found.group("label"), found.group("value")
        spec = defn.field_for(label)
        if spec is None:
            reading.extra.setdefault(" ".join(label.split()), _number(raw))
        else:
            _put(reading, spec, raw, convert)
    return reading


def _put(
    reading: Reading, spec: FieldSpec, raw: str, convert: Convert, falling: bool = False
) -> None:
    if spec.column in reading.values:
        return  # the first of two wins: a second summary is the next block's
    if spec.type.endswith("_list"):
        raw = raw.replace("/", ",")
    try:
        value = convert(spec, raw)
    except ValueError as exc:
        reading.problems.append(f"{spec.label}: {exc}")
        return
    if (
        falling
        and isinstance(value, list)
        and any(b is not None and a is not None and b > a for a, b in pairwise(value))
    ):
        reading.problems.append(f"{spec.label}: rises ({raw.strip()}): no per-position curve")
        return
    reading.values[spec.column] = value


def _number(raw: str) -> Any:
    text = raw.strip().rstrip("%")
    try:
        return int(text) if text.isdigit() else float(text)
    except ValueError:
        return raw.strip()


__all__ = ["read_assignments"]
