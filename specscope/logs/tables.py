"""Markdown tables and lines an author made: a comparison of speculation on and off
(``read_table``, ``read_pairs``) and the spec-decode counts of each row (``read_spec_table``),
read by the roles their definition's ``keys`` give to the cells (regexes over the header
and the row labels), never by the position of a column.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import regex

from specscope.logs.definitions import Definition
from specscope.logs.reading import Reading

_CELL_NUMBER = regex.compile(r"[~≈]?\s*(?P<num>\d[\d\s,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z/%]*)")
_CHANGE = regex.compile(r"(?P<sign>[-+\u2212]?)\s*(?P<num>\d+(?:\.\d+)?)\s*%")
_RULE = regex.compile(r"^[\s|:\-]+$")
_REMARK = regex.compile(r"(?<=\S)\s*\([^()]*\)$")


def _cells(line: str) -> list[str]:
    body = line.strip().lstrip(">").strip()
    # Bold and backticks are the author's emphasis, not part of a value.
    cells = body.strip("|").split("|")
    return [" ".join(c.replace("*", "").replace("`", "").split()) for c in cells]


def _cell_number(cell: str) -> tuple[float, str] | None:
    # A remark in parentheses after the value ('~19 tok/s (+24%)', '47.9 t/s (draft
    # acceptance 106 / 186)') is not part of it.
    m = _CELL_NUMBER.fullmatch(_REMARK.sub("", cell.strip()))
    if m is None:
        return None
    digits = m.group("num").replace(" ", "").replace(",", "")
    try:
        value = float(digits)
    except ValueError:
        return None
    return (value, m.group("unit")) if value > 0 else None


def _key(defn: Definition, role: str) -> regex.Pattern[str] | None:
    raw = defn.keys.get(role)
    return regex.compile(raw, regex.I | regex.V0) if raw else None


def read_table(defn: Definition, text: str) -> Reading:
    """A markdown table that compares speculation on and off: by its columns and rows
    (``_by_layout``), or else by a comparison the author wrote inside a cell
    (``_in_cells``). Nothing when the table is no such comparison."""
    reading = _by_layout(defn, text)
    return reading if reading.values else _in_cells(defn, text)


def _by_layout(defn: Definition, text: str) -> Reading:
    """A markdown table that compares speculation on and off, read by the roles its
    definition's ``keys`` give (regexes): a ``baseline`` column beside ``speculative``
    columns, each row a condition (context, concurrency); or a column of a ``rate`` (or
    ``time``) with a ``baseline`` row among ``speculative`` rows, each a configuration.
    Rows that are ``not_decode`` (prompt processing) are left out. Without a unit, values
    are taken as rates only when the author's ``change`` column agrees with them in every
    row. The deciding pair: the slowest condition, or the fastest configuration (does any
    help?)."""
    reading = Reading()
    rows = _rows(text)
    if len(rows) < 2:
        return reading
    header, body = rows[0][1], rows[1:]
    base_key, spec_key = _key(defn, "baseline"), _key(defn, "speculative")
    rate_key, time_key = _key(defn, "rate"), _key(defn, "time")
    change_key, skip_key = _key(defn, "change"), _key(defn, "not_decode")
    negated, column_skip = _key(defn, "negated"), _key(defn, "not_decode_column")
    accepts, depths = _key(defn, "accept_column"), _key(defn, "depth_column")
    if base_key is None or spec_key is None:
        return reading

    def is_base(label: str) -> bool:
        # "EAGLE (baseline)" is a drafter; "MTP disabled" is speculation off.
        if not base_key.search(label):
            return False
        return not spec_key.search(label) or bool(negated is not None and negated.search(label))

    def unit_of(cell: str) -> str | None:
        for key in (rate_key, time_key):
            m = key.search(cell) if key is not None else None
            if m is not None:
                return m.group(0)
        return None

    def skipped(label: str) -> bool:
        return bool(skip_key is not None and skip_key.search(label))

    base_cols = [c for c, h in enumerate(header) if is_base(h)]
    spec_cols = [c for c, h in enumerate(header) if spec_key.search(h) and c not in base_cols]
    if len(base_cols) == 1:
        # A rate per user (per request, per GPU) is another measure than the baseline's
        # total ('EAGLE output tok/s/user' beside 'Baseline output tok/s'): no pair.
        per = _PER.findall(header[base_cols[0]].lower())
        spec_cols = [c for c in spec_cols if _PER.findall(header[c].lower()) == per]
    pairs: list[dict[str, Any]] = []
    unit: str | None = None
    by_condition = len(base_cols) == 1 and bool(spec_cols)
    if by_condition:
        b = base_cols[0]
        unit = unit_of(header[b]) or next((u for c in spec_cols if (u := unit_of(header[c]))), None)
        # Rows that are measures with their unit ('Output token throughput (tok/s)' beside
        # 'Total input tokens'), not conditions: only a decode rate of tokens compares.
        measures = unit is None and any(_unit_said(cells[0], unit_of) for _, cells in body)
        for i, cells in body:
            if len(cells) != len(header) or skipped(cells[0]):
                continue
            if measures:
                u = _unit_said(cells[0], unit_of)
                if u is None or u.lower().startswith("req") or (time_key and time_key.search(u)):
                    continue
                if column_skip is not None and column_skip.search(cells[0]):
                    continue
                unit = unit or u
            base = _cell_number(cells[b])
            for c in spec_cols:
                spec = _cell_number(cells[c])
                if base is None or spec is None:
                    continue
                unit = unit or unit_of(base[1]) or unit_of(spec[1])
                pairs.append(
                    {
                        "offset": i,
                        "row": cells[0],
                        "column": header[c],
                        "speculative": spec[0],
                        "baseline": base[0],
                    }
                )
    else:
        labelled = [(i, cells) for i, cells in body if len(cells) == len(header)]
        # The configuration is named in the first column with a baseline row; the cells
        # before it (a GPU, a backend) make groups, each with its own baseline row. In a
        # sweep of the draft depth, the row of depth 0 ('off') is the baseline.
        at = next((c for c in range(len(header)) if any(is_base(x[c]) for _, x in labelled)), None)
        swept = None
        if at is None and depths is not None:
            swept = next((c for c, h in enumerate(header) if depths.fullmatch(h)), None)
            at = swept

        def base_row_of(cells: list[str]) -> bool:
            if swept is not None:
                return _DEPTH_OFF.fullmatch(cells[swept]) is not None
            return at is not None and is_base(cells[at])

        if at is None:
            return reading
        bases = [(i, cells) for i, cells in labelled if base_row_of(cells)]
        groups = [tuple(cells[:at]) for _, cells in bases]
        if not bases or len(set(groups)) != len(groups):
            return reading
        base_of = {tuple(cells[:at]): cells for _, cells in bases}
        base_row = bases[0][1]
        # A row that drafted (a value in the acceptance column the baseline leaves empty)
        # is speculative, whatever its name ('ring0').
        acc = [c for c, h in enumerate(header) if accepts is not None and accepts.search(h)]

        def drafted(cells: list[str]) -> bool:
            return any(_rate_said(cells[c]) and not _rate_said(base_row[c]) for c in acc)

        # The measures: columns whose header, or the baseline's cell, has a unit of one
        # kind (a rate, or seconds), each a condition (prose / code, 16K / 32K); not
        # prompt processing.
        metric = [
            c
            for c, h in enumerate(header)
            if c > at
            and c not in acc
            and not (column_skip is not None and column_skip.search(h))
            and (unit_of(h) or ((n := _measured(base_row[c], least=True)) and unit_of(n[1])))
        ]
        # A rate where the table has one beside times ('Wall (s)' before 'Tok/s'): the
        # decode speed is what is compared.
        metric.sort(key=lambda c: bool(time_key and time_key.search(unit_of(header[c]) or "")))
        if not metric or (base := _measured(base_row[metric[0]], least=True)) is None:
            return reading
        unit = unit_of(header[metric[0]]) or unit_of(base[1])
        timed = bool(unit and time_key is not None and time_key.search(unit))
        for m in metric:
            for i, cells in labelled:
                group = tuple(cells[:at])
                if (i, cells) in bases or group not in base_of or skipped(cells[at]):
                    continue
                k = _depth(cells[swept]) if swept is not None else None
                if not (spec_key.search(cells[at]) or drafted(cells) or k):
                    continue
                said = _measured(base_of[group][m], least=True)
                u = unit_of(header[m]) or (unit_of(said[1]) if said else None)
                if said is None or u is None or bool(time_key and time_key.search(u)) != timed:
                    continue
                spec = _measured(cells[m], least=False)
                if spec is not None:
                    pairs.append(
                        {
                            "offset": i,
                            "row": " / ".join(cells[: at + 1]),
                            "column": header[m],
                            "speculative": spec[0],
                            "baseline": said[0],
                        }
                        | ({"group": " / ".join(group)} if group else {})
                        | ({"k": k} if k else {})
                    )
    if not pairs:
        return reading
    direction = None
    if unit is None:
        if not (by_condition and _changes_agree(header, body, pairs, change_key)):
            return reading  # numbers without a unit or a change that says which way is faster
        direction = "rate"
    faster = (
        (lambda p: p["baseline"] / p["speculative"])
        if (unit and time_key is not None and time_key.fullmatch(unit))
        else (lambda p: p["speculative"] / p["baseline"])
    )
    if by_condition:
        decide = min(pairs, key=faster)
    else:  # in each condition (column, group) the fastest configuration; then the slowest
        where = lambda p: (p["column"], p.get("group"))  # noqa: E731
        best = {
            where(p): max((q for q in pairs if where(q) == where(p)), key=faster) for p in pairs
        }
        decide = min(best.values(), key=faster)
    reading.values = {
        "stated": _quote(text, decide["offset"]),
        "stated_offset": decide["offset"],
        "stated_spec": decide["speculative"],
        "stated_base": decide["baseline"],
        "stated_unit": unit,
        "stated_direction": direction,
        "stated_rows": pairs,
    }
    return reading


_LABEL_UNIT = regex.compile(r"\(([^()]*)\)\s*$")


def _rows(text: str) -> list[tuple[int, list[str]]]:
    """The table's rows, each with its line in the block and its cells: a markdown table's
    lines, or an HTML table's ``<tr>`` (cells ``<th>``/``<td>``, one a line or all on one)."""
    lines = text.splitlines()
    if not _HTML.match(text):
        return [
            (i, _cells(line))
            for i, line in enumerate(lines)
            if line.strip() and not _RULE.match(line)
        ]
    rows: list[tuple[int, list[str]]] = []
    for i, line in enumerate(lines):
        if _HTML_ROW.search(line):
            rows.append((i, []))
        for cell in _HTML_CELL.findall(line):
            if rows:
                rows[-1][1].append(" ".join(_TAG.sub("", cell).split()))
    return [(i, cells) for i, cells in rows if cells]


_HTML = regex.compile(r"\s*<table\b", regex.I)
_HTML_ROW = regex.compile(r"<tr\b", regex.I)
_HTML_CELL = regex.compile(r"<t[hd]\b[^>]*>(.*?)(?:</t[hd]>|$)", regex.I)
_TAG = regex.compile(r"<[^>]*>")


def _quote(text: str, offset: int) -> str:
    """The deciding row as the author wrote it: its line, or an HTML row's cells."""
    if not _HTML.match(text):
        return text.splitlines()[offset].strip()
    row = dict(_rows(text)).get(offset, [])
    return "| " + " | ".join(row) + " |"


_PER = regex.compile(r"(?:/|\bper\s+)(user|request|req|gpu|card|device|stream|node|slot)s?\b")
_DEPTH_OFF = regex.compile(r"0|off|none|-|\u2014|n/?a", regex.I)


def _depth(cell: str) -> int | None:
    """A draft depth (k) a sweep's row names: a whole number from 1 ('**1**', 'd2')."""
    m = regex.fullmatch(r"(?:d|k\s*=?\s*)?(\d{1,2})", cell.strip(), regex.I)
    return int(m.group(1)) or None if m is not None else None


def _measured(cell: str, *, least: bool) -> tuple[float, str] | None:
    """A cell's value; a cell of runs apart by '/' ('83.3 / 80.1', a round each) stands for
    them at the end most favourable to speculation: the baseline's least, the speculative
    side's most (a slowdown read from them holds for every pair)."""
    runs = [_cell_number(x) for x in _REMARK.sub("", cell).split("/")]
    if len(runs) < 2 or any(r is None for r in runs):
        return _cell_number(cell)
    said = [r for r in runs if r is not None]
    unit = said[-1][1]
    if any(u and u != unit for _, u in said):
        return None
    values = [v for v, _ in said]
    return (min(values) if least else max(values)), unit


def _rate_said(cell: str) -> bool:
    return _rate(cell) is not None


def _unit_said(label: str, unit_of: Callable[[str], str | None]) -> str | None:
    """The unit a row's label gives in parentheses at its end ('Output token throughput
    (tok/s)'); a label that only names a test ('tg128') gives none."""
    m = _LABEL_UNIT.search(label)
    return unit_of(m.group(1)) if m is not None else None


def _in_cells(defn: Definition, text: str) -> Reading:
    """A comparison inside a cell, by the definition's ``in_cell`` key (a regex with groups
    ``spec``, ``base`` and ``unit``): '~17–21 tok/s vs **37 tok/s** no-spec baseline'. Each
    cell that holds one is a condition (its row); the slowest decides. Not in a column,
    a row or a cell of prompt processing (``not_decode_column``)."""
    reading = Reading()
    key, prefill = _key(defn, "in_cell"), _key(defn, "not_decode_column")
    vs_column, vs_cell = _key(defn, "vs_column"), _key(defn, "vs_cell")
    if key is None:
        return reading
    lines = text.splitlines()
    header: list[str] = []
    pairs: list[dict[str, Any]] = []
    units: list[str] = []
    for i, line in enumerate(lines):
        # A block may hold tables one after another: each header is the line above a rule.
        if i + 1 < len(lines) and "-" in lines[i + 1] and _RULE.match(lines[i + 1]):
            header = _cells(line)
            continue
        if not line.strip() or _RULE.match(line):
            continue
        cells = _cells(line)
        for c, cell in enumerate(cells[1:], start=1):
            head = header[c] if c < len(header) else ""
            m = key.search(cell)
            against_baseline = vs_column is not None and vs_column.search(head)
            if m is None and against_baseline and vs_cell is not None:
                m = vs_cell.search(cell)
                if m is not None and not _change_agrees(cell, m):
                    m = None
            said = (head, cells[0], cell[: m.start()] if m else "")
            if m is None or (prefill is not None and any(prefill.search(x) for x in said)):
                continue
            pairs.append(
                {
                    "offset": i,
                    "row": cells[0],
                    "speculative": float(m.group("spec")),
                    "baseline": float(m.group("base")),
                }
            )
            units.append(m.group("unit"))
    if not pairs or any(b <= 0 for b in (p["baseline"] for p in pairs)):
        return reading
    k = min(range(len(pairs)), key=lambda n: pairs[n]["speculative"] / pairs[n]["baseline"])
    decide = pairs[k]
    reading.values = {
        "stated": lines[decide["offset"]].strip(),
        "stated_offset": decide["offset"],
        "stated_spec": decide["speculative"],
        "stated_base": decide["baseline"],
        "stated_unit": units[k],
        "stated_rows": pairs,
    }
    return reading


def _change_agrees(cell: str, m: regex.Match[str]) -> bool:
    """A change the author wrote in the cell beside the pair ('-32% (61 vs 90 tok/s)') gives
    the speculative side over the baseline (within a point of rounding); no change, no check."""
    said = _CHANGE.search(cell[: m.start()] + " " + cell[m.end() :])
    if said is None:
        return True
    sign = -1.0 if said.group("sign") in ("-", "\u2212") else 1.0
    spec, base = float(m.group("spec")), float(m.group("base"))
    return base > 0 and abs(sign * float(said.group("num")) - 100.0 * (spec / base - 1.0)) <= 1.5


def read_pairs(defn: Definition, text: str) -> Reading:
    """Lines that each give one side of a comparison, as people paste two runs' speeds one
    under the other (``with eagle: 59 tps`` / ``without eagle: 61 tps``): a line is a side
    when its definition's ``speculative_line`` or ``baseline_line`` key (a regex with groups
    ``num`` and ``unit``) matches all of it. Neighbouring lines of both sides make a pair;
    the slowest pair decides, as for the conditions of a table. Nothing without a pair."""
    reading = Reading()
    spec_key, base_key = _key(defn, "speculative_line"), _key(defn, "baseline_line")
    if spec_key is None or base_key is None:
        return reading
    sides: list[tuple[int, str, float, str]] = []
    for i, line in enumerate(text.splitlines()):
        for side, key in (("baseline", base_key), ("speculative", spec_key)):
            m = key.fullmatch(line.strip())
            value = _cell_number(m.group("num")) if m is not None else None
            if m is not None and value is not None:
                sides.append((i, side, value[0], m.group("unit")))
                break
    pairs: list[dict[str, Any]] = []
    paired: set[int] = set()  # a line is one side of one pair
    for (i, a, x, ux), (j, b, y, uy) in itertools.pairwise(sides):
        if a != b and j == i + 1 and not paired & {i, j}:
            paired |= {i, j}
            spec, base = (x, y) if a == "speculative" else (y, x)
            pairs.append({"offset": i, "speculative": spec, "baseline": base, "units": (ux, uy)})
    if not pairs:
        return reading
    decide = min(pairs, key=lambda p: p["speculative"] / p["baseline"])
    lines = text.splitlines()
    reading.values = {
        "stated": " / ".join(lines[decide["offset"] + k].strip() for k in (0, 1)),
        "stated_offset": decide["offset"],
        "stated_spec": decide["speculative"],
        "stated_base": decide["baseline"],
        "stated_unit": decide["units"][0],
        "stated_unit2": decide["units"][1],
    }
    if len(pairs) > 1:
        reading.values["stated_rows"] = [
            {k: v for k, v in p.items() if k != "units"} for p in pairs
        ]
    return reading


def _changes_agree(
    header: list[str],
    body: list[tuple[int, list[str]]],
    pairs: list[dict[str, Any]],
    change_key: regex.Pattern[str] | None,
) -> bool:
    """Does the author's change column give, in every row, the change of the speculative
    value over the baseline as a rate (higher is faster) would? Then the values are rates."""
    cols = [c for c, h in enumerate(header) if change_key is not None and change_key.search(h)]
    if len(cols) != 1:
        return False
    said = {i: cells[cols[0]] for i, cells in body if len(cells) == len(header)}
    for p in pairs:
        m = _CHANGE.search(said.get(p["offset"], ""))
        if m is None:
            return False
        sign = -1.0 if m.group("sign") in ("-", "\u2212") else 1.0
        change = 100.0 * (p["speculative"] / p["baseline"] - 1.0)
        if abs(sign * float(m.group("num")) - change) > 1.0:
            return False
    return True


# 'accepted / drafted', with the rate after it ('80/94 (85.1%)') or before it, the counts
# in parentheses ('60.1% (83/138)', a column named for the rate).
_COUNTS = regex.compile(
    r"(?P<a>\d[\d,]*)\s*/\s*(?P<d>\d[\d,]*)(?:\s*\(\s*[\d.]+\s*%\s*\))?"
    r"|[\d.]+\s*%\s*\(\s*(?P<a>\d[\d,]*)\s*/\s*(?P<d>\d[\d,]*)\s*\)"
)
_RATE = regex.compile(r"(?P<num>\d+(?:\.\d+)?)\s*(?P<pct>%?)")


def _rate(cell: str) -> float | None:
    """A rate as the author wrote it: a percentage or a fraction of one."""
    m = _RATE.fullmatch(cell.strip())
    if m is None:
        return None
    # (rounded as fields.convert rounds a percentage: 10.28 / 100 is not 0.1028 in binary)
    value = round(float(m.group("num")) / (100.0 if m.group("pct") else 1.0), 12)
    return value if value <= 1.0 else None


def _said_only(cells: list[str], rate: int | None, length: int | None) -> dict[str, Any] | None:
    """A row's acceptance rate (its cell '**35.8%**', '~0.98') and mean acceptance length as
    the author printed them, with no counts: kept as printed (``reported_rate``, as SGLang's
    accept rate is) and partial; none is made up from the other. A row without a rate did
    not draft (a baseline's '—'): its tokens a forward are 1, no acceptance."""
    if rate is None or (r := _rate(_APPROX.sub("", cells[rate]))) is None:
        return None
    said: dict[str, Any] = {"reported_rate": r, "partial": True}
    if length is not None and (n := _cell_number(cells[length])) is not None and n[0] >= 1:
        said["mean_acceptance_length"] = n[0]
    return said


_APPROX = regex.compile(r"^\s*[~≈]\s*")


def read_spec_table(defn: Definition, text: str) -> Reading:
    """A markdown table of spec-decode counts, one record a row (the first row's in the
    reading, the others in ``more``, each with its line's ``offset``), the row's label kept
    in ``extra``. Columns by the header words the definition's ``keys`` give: ``counts``
    (cells 'accepted / drafted' tokens), ``rate`` (acceptance), ``length`` (mean acceptance
    length), ``per_position`` (cells 'a% / b%'), ``drafts``. A row without its counts
    (a baseline row, a dash) is no record: only counts make one."""
    first = Reading()
    lines = [(i, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    rows = [(i, _cells(line)) for i, line in lines if not _RULE.match(line)]
    if len(rows) < 2:
        return first
    header, body = rows[0][1], rows[1:]

    def column(role: str) -> int | None:
        key = _key(defn, role)
        found = [c for c, h in enumerate(header) if c > 0 and key is not None and key.search(h)]
        return found[0] if found else None

    counts, rate, length = column("counts"), column("rate"), column("length")
    positions, drafts = column("per_position"), column("drafts")
    if counts is None:  # the counts may be in the rate's cells: '60.1% (83/138)'
        counts = rate
    if counts is None:
        return first
    readings: list[Reading] = []
    for i, cells in body:
        m = _COUNTS.fullmatch(cells[counts]) if len(cells) == len(header) else None
        if m is None:
            said = _said_only(cells, rate, length) if len(cells) == len(header) else None
            if said is not None:  # a rate (a length) without its counts: as printed, partial
                reading = Reading(offset=i)
                reading.values = said
                reading.extra = {"row": cells[0]}
                readings.append(reading)
            continue
        accepted, drafted = (int(m.group(g).replace(",", "")) for g in ("a", "d"))
        if accepted > drafted:
            continue  # no count of accepted out of drafted tokens
        reading = Reading(offset=i)
        values: dict[str, Any] = {"accepted_tokens": accepted, "draft_tokens": drafted}
        if rate is not None and (r := _rate(cells[rate])) is not None:
            values["acceptance_rate"] = r
        if length is not None and (n := _cell_number(cells[length])) is not None and n[0] >= 1:
            values["mean_acceptance_length"] = n[0]
        if positions is not None:
            curve = [_rate(x) for x in cells[positions].split("/")]
            if curve and all(x is not None for x in curve):
                values["per_position_rate"] = curve
        if drafts is not None and (n := _cell_number(cells[drafts])) and n[0].is_integer():
            values["drafts"] = int(n[0])
        reading.values = values
        reading.extra = {"row": cells[0]}
        readings.append(reading)
    if not readings:
        return first
    readings[0].more = readings[1:]
    return readings[0]


__all__ = ["read_pairs", "read_spec_table", "read_table"]
