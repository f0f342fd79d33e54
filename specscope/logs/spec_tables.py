"""An author's markdown table of spec-decode counts, a record a run (``read_spec_table``):
a run a row, or, where the measures are the rows ('| accept rate | ~0.98 | ~0.10 |'), a run
a column, and a metric/value table's one run. Columns (rows) by the roles their
definition's ``keys`` give, never by their place.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import regex

from specscope.logs.definitions import Definition
from specscope.logs.reading import Reading
from specscope.logs.spec_columns import column_form, corner_runs, qualified_runs
from specscope.logs.table_shapes import (
    RULE,
    caption_measure,
    caption_unit,
    cell_number,
    cells_of,
    key_of,
    named_depths,
    rate_of,
    transposed,
)

# 'accepted / drafted', with the rate after it ('80/94 (85.1%)') or before it, the counts
# in parentheses ('60.1% (83/138)', a column named for the rate).
_COUNTS = regex.compile(
    r"(?P<a>\d[\d,]*)\s*/\s*(?P<d>\d[\d,]*)(?:\s*\(\s*[\d.]+\s*%\s*\))?"
    r"|[\d.]+\s*%\s*\(\s*(?P<a>\d[\d,]*)\s*/\s*(?P<d>\d[\d,]*)\s*\)"
)


def _said_only(
    cells: list[str], rate: int | None, length: int | None, percent: bool = False
) -> dict[str, Any] | None:
    """A row's acceptance rate (its cell '**35.8%**', '~0.98') and mean acceptance length as
    the author printed them, with no counts: kept as printed (``reported_rate``, as SGLang's
    accept rate is) and partial; none is made up from the other. A row without a rate did
    not draft (a baseline's '—'): its tokens a forward are 1, no acceptance. Runs of the
    row's setup in one cell ('8.6% / 8.1%', two probes) are taken at the highest, the end
    most favourable to speculation (a low rate read from it holds for every run), each kept
    in ``extra``; rates that far apart are two setups (a before and an after), none."""
    if rate is None:
        return None
    cell = _percent_cell(_rate_cell(cells[rate]), percent)
    if (spread := _range_of(cell)) is not None:
        return {"reported_rate": spread[1], "partial": True, "_range": list(spread)}
    runs = [rate_of(_APPROX.sub("", part)) for part in _PROBES.split(cell)]
    if any(r is None for r in runs) or len(runs) > _MAX_PROBES:
        return None
    rates = [float(r) for r in runs if r is not None]
    if max(rates) - min(rates) > _PROBES_APART:
        return None
    said: dict[str, Any] = {"reported_rate": max(rates), "partial": True}
    if len(rates) > 1:
        said["_runs"] = rates
    if length is not None and (n := cell_number(cells[length])) is not None and n[0] >= 1:
        said["mean_acceptance_length"] = n[0]
    return said


_APPROX = regex.compile(r"^\s*[~≈]\s*")
# What an author writes beside a rate in its cell: a remark in parentheses ('54.5% (mean
# acceptance 3.72)', '~19-22% (mean accept len ~2.2/6)'). The rate is the value before it.
# A spread over runs ('76.8% +/- 0.0%') is still no rate here: world 351's rows would then
# be set against each other as siblings although they differ by prompt (code, extract,
# story), which blames a healthy paste.
_BESIDE = regex.compile(r"(?<=\S)\s*\([^()]*\)\s*$")


def _rate_cell(cell: str) -> str:
    return _BESIDE.sub("", cell.strip())


def _over_one(body: list[tuple[int, list[str]]], column: int, width: int) -> bool:
    """Does a whole row's cell in ``column`` hold a bare number over 1 (no '%', no counts)?"""
    for _, cells in body:
        if len(cells) != width or _COUNTS.fullmatch(cells[column]):
            continue
        for part in _PROBES.split(_rate_cell(cells[column])):
            m = _BARE_NUMBER.fullmatch(part.strip())
            if m is not None and float(_APPROX.sub("", part).strip()) > 1.0:
                return True
    return False


def _in_percent(header: str) -> bool:
    """A rate column whose header gives the unit ('Accept Rate (%)'): bare numbers are
    percents ('62.3')."""
    return "%" in header


def _percent_cell(cell: str, percent: bool) -> str:
    return f"{cell}%" if percent and _BARE_NUMBER.fullmatch(cell) else cell


_BARE_NUMBER = regex.compile(r"[~≈]?\s*\d+(?:\.\d+)?")


_PROBES = regex.compile(r"\s+/\s+")
# A range of runs ('80-91%', '0.31–0.33'): at its top, as two probes are at the higher.
_RANGE = regex.compile(
    r"[~≈]?\s*(?P<lo>\d+(?:\.\d+)?)\s*(?P<p1>%?)\s*[-–]\s*(?P<hi>\d+(?:\.\d+)?)\s*(?P<pct>%?)"
)


def _range_of(cell: str) -> tuple[float, float] | None:
    m = _RANGE.fullmatch(cell.strip())
    if m is None or (bool(m.group("p1")) and not m.group("pct")):
        return None
    scale = 100.0 if m.group("pct") else 1.0
    lo, hi = (round(float(m.group(g)) / scale, 12) for g in ("lo", "hi"))
    return (lo, hi) if 0.0 <= lo < hi <= 1.0 else None


_MAX_PROBES = 4
_PROBES_APART = 0.1


def read_spec_table(defn: Definition, text: str) -> Reading:
    """A markdown table of spec-decode counts, one record a row (the first row's in the
    reading, the others in ``more``, each with its line's ``offset``), the row's label kept
    in ``extra``. Columns by the header words the definition's ``keys`` give: ``counts``
    (cells 'accepted / drafted' tokens), ``rate`` (acceptance), ``length`` (mean acceptance
    length), ``per_position`` (cells 'a% / b%'), ``drafts``. A row without its counts
    (a baseline row, a dash) is no record: only counts make one."""
    first = Reading()
    measure = caption_measure(text)  # a heading above that names the table's measure
    text = caption_unit(text)[1]
    lines = [(i, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    rows = [(i, cells_of(line)) for i, line in lines if not RULE.match(line)]
    if len(rows) < 2:
        return first
    reading = _spec_rows(defn, rows[0][1], rows[1:], captioned=measure)
    if reading.values:
        return reading
    wide = _runs_as_columns(defn, rows)
    return _spec_rows(defn, *wide, runs=True) if wide is not None else reading


# The first header cell over the measures' names when the runs are the columns: a word for
# measures, or nothing ('|               | MTP only | PD+MTP |': the cell left empty).
_RUNS_HEAD = regex.compile(r"|metrics?|measures?|stats?|statistics?|指标|指標", regex.I)


def _runs_as_columns(
    defn: Definition, rows: list[tuple[int, list[str]]]
) -> tuple[list[str], list[tuple[int, list[str]]]] | None:
    """A table with measures as rows ('| accept rate | ~0.98 | ~0.10 |') and runs as
    columns ('| Metric | Cold run | Store hit |'), or a metric/value table (one run), turned
    to a run a row; each run's record on the line of its rate (else its length)."""
    items = transposed(rows)
    if items is not None:
        runs = [(rows[0][1][1], [(i, name, cell) for i, name, cell in items])]
    elif _RUNS_HEAD.fullmatch(rows[0][1][0].strip()) and len(rows[0][1]) > 2:
        header = rows[0][1]
        body = [(i, cells) for i, cells in rows[1:] if len(cells) == len(header)]
        runs = [
            (header[c], [(i, cells[0], cells[c]) for i, cells in body])
            for c in range(1, len(header))
        ]
    else:
        return None
    keys = [(role, key_of(defn, role)) for role in ("rate", "length", "counts", "depth")]
    said = {
        role: next(n for n, (_, name, _c) in enumerate(runs[0][1]) if key.search(name))
        for role, key in keys
        if key is not None and any(key.search(name) for _, name, _c in runs[0][1])
    }
    if not said.keys() - {"depth"}:
        return None
    order = [said[r] for r in ("rate", "length", "counts", "depth") if r in said]
    names = ["run", *(runs[0][1][n][1] for n in order)]
    at = runs[0][1][order[0]][0]
    return names, [(at, [run, *(cells[n][2] for n in order)]) for run, cells in runs]


def _spec_rows(
    defn: Definition,
    header: list[str],
    body: list[tuple[int, list[str]]],
    *,
    runs: bool = False,
    captioned: str | None = None,
) -> Reading:
    """The records of a table of runs a row (``read_spec_table``). A mean acceptance
    length alone makes none, in a metric/value table too ('mean accept τ | 1.438'): with
    k unstated it would be judged on an assumed k against a paste that says it pays. Where
    the runs are the columns and two or more of them state a length ('| Accept length |
    3.19 | 1.98 |' under 'MTP only' and 'PD+MTP'), each is a partial record of that length
    (``_lengths_alone``): the author sets them side by side, and a run is judged against
    the others of its paste."""
    first = Reading()

    def column(role: str) -> int | None:
        key = key_of(defn, role)
        found = [c for c, h in enumerate(header) if c > 0 and key is not None and key.search(h)]
        return found[0] if found else None

    counts, rate, length = column("counts"), column("rate"), column("length")
    if captioned and counts is None and rate is None and length is None and not runs:
        # The measure named by the heading above, the header naming the dimension and runs.
        if (c := _captioned_column(defn, header)) is not None:
            rate, length = (c, None) if captioned == "rate" else (None, c)
    positions, drafts = column("per_position"), column("drafts")
    depth = None if runs else _full_column(defn, "depth", header)
    spread = [] if runs else _position_columns(defn, header, body)
    if rate is not None and not _in_percent(header[rate]) and _over_one(body, rate, len(header)):
        # A bare number over 1 in a rate's column ('1.94', '62.3'): the column holds mean
        # lengths or percents without their sign, and its '1.00' or '0.9' would be misread.
        rate = None
    share = key_of(defn, "share_or_length")
    if counts is None and rate is None and not runs and share is not None:
        # the bare word after a drafter's name ('MTP accept'): its cells tell what it holds
        counts = next((c for c, h in enumerate(header) if c and share.fullmatch(h.strip())), None)
    if counts is None:  # the counts may be in the rate's cells: '60.1% (83/138)'
        counts = rate
    elif rate is None and share is not None and share.fullmatch(header[counts].strip()):
        # 'accept' (not 'accepted', a count) holds counts or a share: '80/94 (85.1%)' in
        # oMLX's summaries, '0.319' in a ladder of rungs; the cell's form tells them apart.
        # SGLang's word is a mean length ('5.25', '1.00': nothing accepted, no 100%): the
        # column's cells that are no counts are shares only where every one is.
        cells_said = [
            cells[counts]
            for _, cells in body
            if len(cells) == len(header) and not _COUNTS.fullmatch(cells[counts])
        ]
        form = column_form("accept", cells_said) if cells_said else "rate"
        if form == "rate":
            rate = counts
        elif (
            form == "length"
            and length is None
            and not any(
                len(cells) == len(header) and _COUNTS.fullmatch(cells[counts]) for _, cells in body
            )
        ):
            counts, length = None, counts
    if counts is None and not spread and positions is None:
        if runs:
            return _lengths_alone(header, body, length, column("depth"))
        # (a length column found may be one run's of several: 'code accept length')
        if rate is None and (
            named := qualified_runs(defn, header, body)
            or (corner_runs(defn, header, body) if length is None else [])
        ):
            named[0].more = named[1:]
            return named[0]
        # Lengths alone as points along a context length: each a partial record of its
        # length, as runs side by side are; elsewhere none (k unstated).
        along = key_of(defn, "dimension")
        if along is None or not along.fullmatch(header[0].strip()):
            return _lengths_at_k(header, body, length, depth)
        lengths = _lengths_alone(header, body, length, column("depth"))
        if lengths.values:
            _along(defn, header[0], [lengths, *lengths.more])
        return lengths
    readings: list[Reading] = []
    for i, cells in body:
        whole = len(cells) == len(header)
        m = _COUNTS.fullmatch(cells[counts]) if whole and counts is not None else None
        if m is None:
            percent = rate is not None and _in_percent(header[rate])
            said = _said_only(cells, rate, length, percent) if whole else None
            written = _curve(cells, spread) if whole and spread else None
            if written is None and whole and positions is not None:
                written = _cell_curve(cells[positions])
            if written is not None:  # the author's curve, as stated: no count made from it
                said = (said or {"partial": True}) | {"per_position_rate": written}
                if length is not None and (n := cell_number(cells[length])) and n[0] >= 1:
                    said["mean_acceptance_length"] = n[0]
            if said is not None:  # a rate (a length) without its counts: as printed, partial
                if depth is not None and "k" not in said and (k := _k_of(cells[depth])):
                    said["k"] = k  # the row's draft depth ('num_speculative_tokens | 7')
                reading = Reading(offset=i)
                runs, spread_ = said.pop("_runs", None), said.pop("_range", None)
                reading.values = said
                reading.extra = (
                    {"row": cells[0]}
                    | ({"runs": runs} if runs else {})
                    | ({"range": spread_} if spread_ else {})
                )
                readings.append(reading)
            continue
        accepted, drafted = (int(m.group(g).replace(",", "")) for g in ("a", "d"))
        if accepted > drafted:
            continue  # no count of accepted out of drafted tokens
        reading = Reading(offset=i)
        values: dict[str, Any] = {"accepted_tokens": accepted, "draft_tokens": drafted}
        percent = rate is not None and _in_percent(header[rate])
        if (
            rate is not None
            and (r := rate_of(_percent_cell(_rate_cell(cells[rate]), percent))) is not None
        ):
            values["acceptance_rate"] = r
        if length is not None and (n := cell_number(cells[length])) is not None and n[0] >= 1:
            values["mean_acceptance_length"] = n[0]
        if positions is not None:
            curve = [rate_of(x) for x in cells[positions].split("/")]
            if curve and all(x is not None for x in curve):
                values["per_position_rate"] = curve
        elif spread and (stated := _curve(cells, spread)) is not None:
            values["per_position_rate"] = stated
        if drafts is not None and (n := cell_number(cells[drafts])) and n[0].is_integer():
            values["drafts"] = int(n[0])
        reading.values = values
        reading.extra = {"row": cells[0]}
        readings.append(reading)
    if not readings:
        return first
    _emitted_shares(readings)
    _slot_shares(readings)
    _along(defn, header[0], readings)
    return _chained(readings)


def _emitted_shares(readings: list[Reading]) -> None:
    """A rate beside each mean length that is 1 - 1/length in every row (two rows or more):
    the share of the emitted tokens that were accepted, not of the drafted ones (TokenSpeed's
    'Speculative accept rate' beside 'Decoded tokens/iteration': 48.5% at 1.94, 74.6% at
    3.93). It is no acceptance rate (k unstated, the drafted tokens are unknown): kept in the
    extra, the length alone the record's. A rate of drafted tokens equals it only where k
    is the length itself, in every row."""
    said = [r for r in readings if {"reported_rate", "mean_acceptance_length"} <= r.values.keys()]
    if len(said) < 2 or len(said) < len(readings):
        return
    if any(
        abs(r.values["reported_rate"] - (1 - 1 / r.values["mean_acceptance_length"]))
        > _SHARE_ROUNDING
        for r in said
    ):
        return
    for r in said:
        r.extra = r.extra | {"emitted_share": r.values.pop("reported_rate")}


# Rates printed to 0.1% and lengths to 0.01 agree with 1 - 1/length within this.
_SHARE_ROUNDING = 0.006


def _slot_shares(readings: list[Reading]) -> None:
    """A rate that is the length over one whole number n in every row (two rows or more),
    where (length - 1) / rate is none: the accept rate SGLang's decode lines printed, the
    length over the n draft tokens a verify step checks (the draft's k and the one the
    target adds; world 250: 2.3377 at 0.7795 and 1.4931 at 0.4976, n = 3); later versions
    print accepted over proposed drafts, (length - 1) / k, which this leaves alone. Each
    record's k is then n - 1; the rate is kept as printed (``reported_rate``, whose meaning
    varies)."""
    said = [r for r in readings if {"reported_rate", "mean_acceptance_length"} <= r.values.keys()]
    if len(said) < 2 or len(said) < len(readings) or any("k" in r.values for r in said):
        return
    slots = {_whole(r.values["mean_acceptance_length"] / r.values["reported_rate"]) for r in said}
    drafted = {
        _whole((r.values["mean_acceptance_length"] - 1) / r.values["reported_rate"]) for r in said
    }
    n = slots.pop() if len(slots) == 1 else None
    if n is None or n < 2 or drafted != {None}:
        return
    for r in said:
        r.values["k"] = n - 1


def _lengths_at_k(
    header: list[str], body: list[tuple[int, list[str]]], length: int | None, depth: int | None
) -> Reading:
    """Rows of a mean length alone, each at a k the table states (a depth column, or labels
    that differ in their depth alone: 'DFlash `k=1`' / 'DFlash `k=7`'): a partial record a
    row of its length and k; without a k for every one, none (an assumed k would judge it)."""
    if length is None:
        return Reading()
    rows = [(i, cells) for i, cells in body if len(cells) == len(header)]
    said: list[tuple[int, list[str], float]] = []
    for i, cells in rows:
        n = cell_number(cells[length])
        if n is not None and not n[1] and n[0] >= 1:
            said.append((i, cells, n[0]))
    named = named_depths([cells[0] for _, cells, _ in said])
    readings: list[Reading] = []
    for i, cells, tau in said:
        k = (_k_of(cells[depth]) if depth is not None else None) or named.get(cells[0])
        if k is None or tau > k + 1:
            return Reading()
        reading = Reading(offset=i)
        reading.values = {"mean_acceptance_length": tau, "k": k, "partial": True}
        reading.extra = {"row": cells[0]}
        readings.append(reading)
    return _chained(readings) if len(readings) >= 2 else Reading()


def _full_column(defn: Definition, role: str, header: list[str]) -> int | None:
    """The one column whose whole header is the role's words, or None."""
    key = key_of(defn, role)
    found = [c for c, h in enumerate(header) if c and key is not None and key.fullmatch(h.strip())]
    return found[0] if len(found) == 1 else None


def _chained(readings: list[Reading]) -> Reading:
    """A table's records as one reading: the first, the others its ``more``."""
    readings[0].more = readings[1:]
    return readings[0]


def _k_of(cell: str) -> int | None:
    """A draft depth as a cell states it: a whole number from 1 to 64, no unit."""
    n = cell_number(cell)
    return int(n[0]) if n and not n[1] and n[0].is_integer() and 1 <= n[0] <= 64 else None


def _whole(x: float) -> int | None:
    """x as a whole number, where it is one to the rounding of printed figures."""
    return round(x) if abs(x - round(x)) <= _WHOLE_ROUNDING * max(1.0, x) else None


# A quotient of figures printed to 3-4 places is a whole number within this share of it.
_WHOLE_ROUNDING = 0.005


# A column of the change between others ('Δ', '+10.1%'), no measure of one run.
_CHANGE_HEAD = regex.compile(r"Δ|delta|change|diff\w*|gain|speed-?up|ratio|%|\bvs\.?\b", regex.I)


def _captioned_column(defn: Definition, header: list[str]) -> int | None:
    """The one column of a table along a dimension (``dimension``, its first column) that
    holds the measure its caption names: the table's only column but the dimension and
    changes. Two or more (drafters side by side, '| Context | Eagle3 | Eagle3-SW |') are
    none: each would be a series of its own, and set against the other as setups."""
    along = key_of(defn, "dimension")
    if along is None or not along.fullmatch(header[0].strip()):
        return None
    values = [c for c in range(1, len(header)) if not _CHANGE_HEAD.search(header[c])]
    return values[0] if len(values) == 1 else None


def _along(defn: Definition, name: str, readings: list[Reading]) -> None:
    """Rows that are points along a stated dimension (the first column a context length:
    '| Context | Acceptance |' with '~100 tok', '~34K', '~86K'): each row's extra says the
    dimension and where along it (``at``), so that acceptance can be followed along it
    (analysis/detectors/along.py) and the rows are not set against each other as setups."""
    key = key_of(defn, "dimension")
    if key is None or not key.fullmatch(name.strip()):
        return
    points = [(r, _magnitude(str(r.extra.get("row", "")))) for r in readings]
    if any(at is None for _, at in points):
        return
    for reading, at in points:
        reading.extra = reading.extra | {"dimension": name.strip(), "at": at}


# A length as authors write it: '~100 tok', '~34K', '2k', '32,768', '1 024', '128K tokens'.
_MAGNITUDE = regex.compile(
    r"[~≈]?\s*(?P<num>\d[\d,\s]*(?:\.\d+)?)\s*(?P<unit>[kKmM])?\s*(?:tok(?:en)?s?)?",
)


def _magnitude(label: str) -> float | None:
    m = _MAGNITUDE.fullmatch(label.strip())
    if m is None:
        return None
    try:
        value = float(regex.sub(r"[,\s]", "", m.group("num")))
    except ValueError:
        return None
    unit = (m.group("unit") or "").lower()
    return value * {"": 1, "k": 1_000, "m": 1_000_000}[unit]


def _position_columns(
    defn: Definition, header: list[str], body: list[tuple[int, list[str]]]
) -> list[int]:
    """The columns that hold one draft position each ('token 1', 'pos 1'), in the order of
    their indices, when two or more follow one another (0, 1, 2 or 1, 2, 3); a first one at
    index 0 that is 1.00 in every row is the token the target emits, no position."""
    key = key_of(defn, "position")
    if key is None:
        return []
    found = [
        (int(m.group("index")), c)
        for c, h in enumerate(header)
        if c > 0 and (m := key.fullmatch(h.strip())) is not None
    ]
    indices = [n for n, _ in found]
    if len(found) < 2 or indices != list(range(indices[0], indices[0] + len(found))):
        return []
    if indices[0] > 1:
        return []
    columns = [c for _, c in found]
    rows = [cells for _, cells in body if len(cells) == len(header)]
    if indices[0] == 0 and rows and all(_share(cells[columns[0]]) == 1.0 for cells in rows):
        columns = columns[1:]
    return columns if len(columns) >= 2 else []


def _curve(cells: list[str], columns: list[int]) -> list[float] | None:
    """A row's per-position rates from its position columns: shares ('0.894'), percentages
    ('81.3%'), or, where one bare number of the row is over 1, every bare number a
    percentage without its sign ('92.77 | 0.91'); a row with a gap, or whose rates rise,
    is no curve."""
    said = [_BARE.fullmatch(_APPROX.sub("", cells[c]).strip()) for c in columns]
    if any(m is None for m in said):
        return None
    numbers = [(float(m.group("num")), bool(m.group("pct"))) for m in said if m is not None]
    scale = 100.0 if any(v > 1.0 and not pct for v, pct in numbers) else 1.0
    rates = [round(v / (100.0 if pct else scale), 12) for v, pct in numbers]
    if any(r > 1.0 for r in rates):
        return None
    if any(b > a + _ROUNDING for a, b in pairwise(rates)):
        return None
    return rates


def _cell_curve(cell: str) -> list[float] | None:
    """A run's per-position rates written in one cell ('94, 86, 77, 68', '0.72 / 0.41'),
    read as position columns are (``_curve``); fewer than two is no curve."""
    parts = [p for p in regex.split(r"\s*[,/]\s*", cell.strip()) if p]
    return _curve(parts, list(range(len(parts)))) if len(parts) >= 2 else None


_BARE = regex.compile(r"(?P<num>\d+(?:\.\d+)?)\s*(?P<pct>%?)")
# A curve printed to three places may tie or cross by the last digit ('0.710', '0.711').
_ROUNDING = 0.0015


def _share(cell: str) -> float | None:
    return rate_of(_APPROX.sub("", cell))


def _lengths_alone(
    header: list[str], body: list[tuple[int, list[str]]], length: int | None, depth: int | None
) -> Reading:
    """Runs side by side that state a mean acceptance length and no rate or counts: each a
    partial record of its length, with its k where a row of the table states it ('steps |
    3 | 3'); fewer than two runs with a length make none (nothing to set it beside)."""
    readings: list[Reading] = []
    for i, cells in body:
        n = cell_number(cells[length]) if length is not None and len(cells) == len(header) else None
        if n is None or n[1] or n[0] < 1:
            continue
        reading = Reading(offset=i)
        reading.values = {"mean_acceptance_length": n[0], "partial": True}
        k = _k_of(cells[depth]) if depth is not None else None
        if k is not None:
            reading.values["k"] = k
        reading.extra = {"row": cells[0]}
        readings.append(reading)
    return _chained(readings) if len(readings) >= 2 else Reading()


__all__ = ["read_spec_table"]
