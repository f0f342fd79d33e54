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
groups are the stated words the definition's derivation reads.
"""

from __future__ import annotations

from collections.abc import Callable
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
    for line in text.splitlines():
        measure = defn.pattern.search(line) if defn.pattern is not None else None
        if measure is not None:
            for name, raw in measure.groupdict().items():
                if raw is None:
                    continue
                if name.startswith(EXTRA_PREFIX):
                    reading.extra[name[len(EXTRA_PREFIX) :]] = _number(raw)
                elif name in by_column:
                    _put(reading, by_column[name], raw, convert)
            continue
        said = assignment.search(line) if assignment is not None else None
        if said is None:
            continue
        label, raw = said.group("label"), said.group("value")
        spec = defn.field_for(label)
        if spec is None:
            reading.extra.setdefault(" ".join(label.split()), _number(raw))
        else:
            _put(reading, spec, raw, convert)
    return reading


def _put(reading: Reading, spec: FieldSpec, raw: str, convert: Convert) -> None:
    if spec.column in reading.values:
        return  # the first of two wins: a second summary is the next block's
    try:
        reading.values[spec.column] = convert(spec, raw)
    except ValueError as exc:
        reading.problems.append(f"{spec.label}: {exc}")


def _number(raw: str) -> Any:
    text = raw.strip().rstrip("%")
    try:
        return int(text) if text.isdigit() else float(text)
    except ValueError:
        return raw.strip()


__all__ = ["read_assignments"]
