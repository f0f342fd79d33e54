"""Runs as columns beside runs as rows: an author's table whose acceptance columns each
name a run of their own ('| drafter | code accept (median) | code tok/s | narrative accept
| narrative tok/s |', '| n_max | acceptance (main) | acceptance (PR) |'), read a record a
cell: the row's run under the column's (``qualified_runs``). The words that name a column
so are the definition's ``qualified`` key, those that name no run (a statistic: 'median',
'agg') its ``not_a_run``; which measure a bare 'accept' column holds, a share or a mean
length, its cells tell (``column_form``).
"""

from __future__ import annotations

from typing import Any

import regex

from specscope.logs.definitions import Definition
from specscope.logs.reading import Reading
from specscope.logs.table_shapes import cell_number, key_of, rate_of

# A cell with no value of its run: a dash, 'n/a', empty.
_NONE = regex.compile(r"\s*(?:-+|—|–|n/?a|none)?\s*", regex.I)
# Mean lengths as authors print them: a decimal, at least the token the target adds.
_LENGTH = regex.compile(r"[~≈]?\s*\d{1,2}\.\d{1,3}")
_RANGE_TOP = regex.compile(
    r"^\s*[~≈]?\s*\d+(?:\.\d+)?\s*%?\s*[-–]\s*(?P<top>\d+(?:\.\d+)?\s*%?)\s*$"
)
_BARE = regex.compile(r"\d+(?:\.\d+)?")
# No draft is longer than this: a column with a larger value holds no mean length.
_MAX_LENGTH = 33.0


def qualified_runs(
    defn: Definition, header: list[str], body: list[tuple[int, list[str]]]
) -> list[Reading]:
    """A record for each cell of two or more acceptance columns that name their runs
    ('acceptance (main)', 'acceptance (PR)'; a run's rate and length beside each other, 'code
    accept rate' and 'code accept length', one record), the row's label and the run in its
    extra, its k where a column of the row gives the depth ('n_max'); partial, with the
    rate as printed (``reported_rate``) or the mean length, no count made up. A column
    whose measure its header leaves open and its cells do not settle (``column_form``) is not
    read; fewer than two records are none (a length alone, k unstated, is nothing to
    judge: beside another run it is)."""
    key, plain = key_of(defn, "qualified"), key_of(defn, "not_a_run")
    if key is None or plain is None:
        return []
    rows = [(i, cells) for i, cells in body if len(cells) == len(header)]
    found: list[tuple[int, str, str, str | None]] = []  # (column, run, word, measure)
    for c, head in enumerate(header):
        m = key.fullmatch(head.strip()) if c > 0 else None
        if m is None:
            continue
        said = " ".join(x for x in (m.group("before"), m.group("after")) if x)
        run = " ".join(w for w in said.split() if not plain.fullmatch(w))
        measure = column_form(m.group("measure"), [cells[c] for _, cells in rows]) if run else None
        if measure == "rate" and "%" in head:  # the unit in the header: bare numbers percents
            measure = "percent"
        elif measure == "rate" and _over_one([cells[c] for _, cells in rows]):
            measure = None  # lengths or percents without their sign: '1.00' is no 100%
        if run:
            found.append((c, run, m.group("measure").lower(), measure))
    columns = [(c, run, measure) for c, run, measure in _one_accept(found, rows) if measure]
    # A run's columns: a rate and a length at most ('code accept rate', 'code accept length').
    runs: dict[str, list[tuple[int, str]]] = {}
    for c, run, measure in columns:
        runs.setdefault(run, []).append((c, measure))
    kinds = [sorted("length" if m == "length" else "rate" for _, m in cs) for cs in runs.values()]
    if len(runs) < 2 or any(len(set(k)) < len(k) for k in kinds):
        return []
    depth = _column(defn, "depth", header)
    readings: list[Reading] = []
    for i, cells in rows:
        for run, cs in runs.items():
            values: dict[str, Any] = {}
            for c, measure in cs:
                values |= _value(cells[c], measure) or {}
            if not values:
                continue
            if depth is not None and (k := _k(cells[depth])) is not None:
                values["k"] = k
            reading = Reading(offset=i)
            reading.values = values
            reading.extra = {"row": cells[0], "column": run}
            readings.append(reading)
    return readings if len(readings) >= 2 else []


def _one_accept(
    found: list[tuple[int, str, str, str | None]], rows: list[tuple[int, list[str]]]
) -> list[tuple[int, str, str | None]]:
    """One word is one measure in one header: where one bare 'accept' column holds mean
    lengths and another only 1.00s (alone, a share of 100% or a length of nothing), those
    are lengths too (nothing accepted); bare 'accept' columns whose forms cannot agree are
    none."""
    forms = {measure for _, _, word, measure in found if word == "accept"}
    if len(forms) <= 1:
        return [(c, run, measure) for c, run, _, measure in found]

    def ones(c: int) -> bool:
        said = [cells[c] for _, cells in rows if not _NONE.fullmatch(cells[c])]
        return all((n := cell_number(x)) is not None and n == (1.0, "") for x in said)

    agreed = "length" in forms and all(
        ones(c) for c, _, word, measure in found if word == "accept" and measure != "length"
    )
    return [
        (c, run, ("length" if agreed else None) if word == "accept" else measure)
        for c, run, word, measure in found
    ]


# The roles whose words make a header cell a measure, no run's name.
_MEASURES = (
    "counts",
    "rate",
    "length",
    "per_position",
    "position",
    "qualified",
    "drafts",
    "depth",
    "other_measure",
)


def corner_runs(
    defn: Definition, header: list[str], body: list[tuple[int, list[str]]]
) -> list[Reading]:
    """A table whose first header cell names the measure of every cell under the others
    ('|accept length|tree draft|chain draft|', rows '|t=0.0|2.14| 1.69 |'): the columns are
    runs, the rows their settings, a record a cell (the row's label and the column's name in
    its extra), partial, the rate as printed or the mean length. Only where the corner's
    words are a rate's or a length's (``rate``, ``length``) and no other header cell names a
    measure; fewer than two records are none."""
    rate, length = key_of(defn, "rate"), key_of(defn, "length")
    corner = header[0].strip()
    measure = (
        "length"
        if length is not None and length.search(corner)
        else "rate"
        if rate is not None and rate.fullmatch(corner)
        else None
    )
    runs = list(range(1, len(header)))
    if measure is None or len(runs) < 2:
        return []
    if measure == "rate" and _over_one(
        [cells[c] for _, cells in body for c in runs if c < len(cells)]
    ):
        return []
    keys = [k for role in _MEASURES if (k := key_of(defn, role)) is not None]
    if any(not header[c].strip() or any(k.search(header[c]) for k in keys) for c in runs):
        return []
    readings: list[Reading] = []
    for i, cells in body:
        # (a row's first cell its setting, 't=0.0', 'chat'; a bare number is a value)
        if (
            len(cells) != len(header)
            or cell_number(cells[0])
            or any(k.search(cells[0]) for k in keys)
        ):
            continue
        for c in runs:
            values = _value(cells[c], measure)
            if values is None:
                continue
            reading = Reading(offset=i)
            reading.values = values
            reading.extra = {"row": cells[0], "column": header[c].strip()}
            readings.append(reading)
    return readings if len(readings) >= 2 else []


def _over_one(cells: list[str]) -> bool:
    """A bare number over 1 among the cells (no '%'): no column of shares."""
    return any(
        _BARE.fullmatch(t := regex.sub(r"^\s*[~≈]\s*", "", c).strip()) and float(t) > 1.0
        for c in cells
    )


def column_form(word: str, cells: list[str]) -> str | None:
    """The measure of a column: a rate or a length where its header's word says so
    ('acceptance', 'accept rate', 'accept length'); a bare 'accept' (SGLang's and oMLX's
    word for a length, a share or counts) by its cells: shares if every value is one
    ('0.319'), mean lengths if every value is a decimal of at least 1 and one is over 1
    ('5.25', '1.00'); else none (a percent without its sign could be either)."""
    low = word.lower()
    if regex.search(r"len|τ|tau", low):
        return "length"
    if low != "accept":
        return "rate"
    # (a range of runs, '71.8–76.6%', '1.96–2.67', by its top: its form is its ends')
    values = [_RANGE_TOP.sub(r"\g<top>", c).strip() for c in cells if not _NONE.fullmatch(c)]
    if not values or all(cell_number(v) == (1.0, "") for v in values):
        return None  # (1.00 alone: a share of 100% or a length of nothing accepted)
    if all(rate_of(v.strip()) is not None for v in values):
        return "rate"
    if not all(_LENGTH.fullmatch(v.strip()) for v in values):
        return None
    lengths = [float(v.strip().lstrip("~≈ ")) for v in values]
    if min(lengths) >= 1.0 and 1.0 < max(lengths) <= _MAX_LENGTH:
        return "length"
    return None


def _value(cell: str, measure: str) -> dict[str, Any] | None:
    if _NONE.fullmatch(cell):
        return None
    text = regex.sub(r"^\s*[~≈]\s*", "", cell)
    if measure in ("rate", "percent"):
        bare = measure == "percent" and _BARE.fullmatch(text.strip())
        r = rate_of(f"{text.strip()}%" if bare else text)
        return None if r is None else {"reported_rate": r, "partial": True}
    n = cell_number(text)
    if n is None or n[1] or not 1.0 <= n[0] <= _MAX_LENGTH:
        return None
    return {"mean_acceptance_length": n[0], "partial": True}


def _column(defn: Definition, role: str, header: list[str]) -> int | None:
    key = key_of(defn, role)
    found = [c for c, h in enumerate(header) if key is not None and key.fullmatch(h.strip())]
    return found[0] if len(found) == 1 else None


def _k(cell: str) -> int | None:
    n = cell_number(cell)
    if n is None or n[1] or not n[0].is_integer() or not 1 <= n[0] <= 64:
        return None
    return int(n[0])


__all__ = ["column_form", "corner_runs", "qualified_runs"]
