"""Markdown tables and lines an author made: a comparison of speculation on and off
(``read_table``, ``read_pairs``) and the spec-decode counts of each row (``read_spec_table``,
in ``spec_tables``), read by the roles their definition's ``keys`` give to the cells (regexes
over the header and the row labels), never by the position of a column. The shapes authors
vary (emphasis in cells, a metric/value table, sides paired by name, a heading's unit) are
``table_shapes``'.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import regex

from specscope.logs.definitions import Definition
from specscope.logs.reading import Reading
from specscope.logs.spec_tables import read_spec_table
from specscope.logs.table_shapes import (
    RULE,
    agrees,
    by_names,
    caption_unit,
    cell_number,
    cells_of,
    in_ms,
    key_of,
    named_depths,
    names_time,
    process_rates,
    rate_of,
    ratio_of,
    speedups,
    sweep_alone,
    switched,
    transposed,
    unit_said,
)

_CHANGE = regex.compile(r"(?P<sign>[-+\u2212]?)\s*(?P<num>\d+(?:\.\d+)?)\s*%")
_REMARK = regex.compile(r"(?<=\S)\s*\([^()]*\)$")
# Runs in a cell: '83.3 / 80.1', '30.69, 27.86' (not '1,234': a thousands separator has no
# space after it), a range '0.31–0.33' (an en dash between numbers; not a minus sign).
_RUNS = regex.compile(r"/|,\s+|(?<=\d)\s*\u2013\s*(?=[~≈]?\d)")


def read_table(defn: Definition, text: str) -> Reading:
    """A markdown table that compares speculation on and off: by its columns and rows
    (``_by_layout``), or else by a comparison the author wrote inside a cell
    (``_in_cells``), or by names and ratios (``_by_names``). Nothing when the table is no
    such comparison."""
    caption, text = caption_unit(text)  # a heading above the table that gives its unit
    reading = Reading()
    for n, table in enumerate(_tables_of(text)):  # tables one after another: each its own
        reading = _by_layout(defn, table, None if n else caption)
        if reading.values:
            break
    if not reading.values:
        reading = _in_cells(defn, text)
    return reading if reading.values else _by_names(defn, text)


def _tables_of(text: str) -> list[str]:
    """The markdown tables of a block, one after another (a header is the line above a
    rule), each with the lines before it left blank (offsets kept); an HTML table whole."""
    lines = text.splitlines()
    heads = [i for i in range(len(lines) - 1) if "-" in lines[i + 1] and RULE.match(lines[i + 1])]
    if _HTML.match(text) or len(heads) < 2:
        return [text]
    ends = [*heads[1:], len(lines)]
    return ["\n".join([""] * at + lines[at:end]) for at, end in zip(heads, ends, strict=True)]


def _by_names(defn: Definition, text: str) -> Reading:
    """Sides paired by their names (``table_shapes.by_names``): the columns of each row of a
    wide table, or the rows of a metric/value table, its one row; else a column of the
    author's speedups alone (``table_shapes.speedups``). Each table of the block (one after
    another: a header is the line above a rule) on its own; the first that says one."""
    reading = Reading()
    if _HTML.match(text):
        return reading
    lines = text.splitlines()
    tables = _tables_of(text)
    roles = {"spec": "speculative", "base": "baseline", "neg": "negated", "rate": "rate"}
    keys = {k: key_of(defn, role) for k, role in roles.items()}
    for read in (lambda t: _names_in(keys, t), lambda t: speedups(_rows(t), keys)):
        for table in tables:
            said = read(table)
            if said:
                reading.values = said | {"stated": lines[said["stated_offset"]].strip()}
                return reading
    return reading


def _names_in(keys: dict[str, regex.Pattern[str] | None], text: str) -> dict[str, Any] | None:
    rows = _rows(text)
    if len(rows) < 2:
        return None
    items = transposed(rows)
    if items is not None:
        named = [(i, name, cell, "") for i, name, cell in items]
    else:
        header = rows[0][1]
        named = [
            (i, header[c], cells[c], cells[0])
            for i, cells in rows[1:]
            if len(cells) == len(header)
            for c in range(1, len(cells))
        ]
    return by_names(named, keys)


def _by_layout(defn: Definition, text: str, caption: str | None = None) -> Reading:
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
    base_key, spec_key = key_of(defn, "baseline"), key_of(defn, "speculative")
    rate_key, time_key = key_of(defn, "rate"), key_of(defn, "time")
    change_key, skip_key = key_of(defn, "change"), key_of(defn, "not_decode")
    negated, column_skip = key_of(defn, "negated"), key_of(defn, "not_decode_column")
    accepts, depths = key_of(defn, "accept_column"), key_of(defn, "depth_column")
    token_time = key_of(defn, "token_time")
    if base_key is None or spec_key is None:
        return reading
    switch = switched(rows, spec_key)

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
        # milliseconds of a token's time, named so ('Mean TPOT (ms)'): less is faster
        return "ms" if _said(token_time, cell) and in_ms(cell, []) else None

    def is_time(u: str | None) -> bool:
        return bool(u and (u == "ms" or (time_key and time_key.search(u))))

    def skipped(label: str) -> bool:
        return bool(skip_key is not None and skip_key.search(label))

    vs_key = key_of(defn, "vs_column")  # 'vs baseline': a column of ratios, no side
    base_cols = [c for c, h in enumerate(header) if is_base(h) and not _said(vs_key, h)]
    spec_cols = [
        c
        for c, h in enumerate(header)
        if spec_key.search(h) and c not in base_cols and not _said(vs_key, h)
    ]  # (a column of ratios, 'SD/no-SD', is no side)
    if not base_cols and len(spec_cols) == 1:
        base_cols = _vouched_baseline(header, body, spec_cols[0], unit_of, spec_key, change_key)
    if len(base_cols) == 1:
        # A rate per user (per request, per GPU) is another measure than the baseline's
        # total ('EAGLE output tok/s/user' beside 'Baseline output tok/s'): no pair.
        per = _PER.findall(header[base_cols[0]].lower())
        spec_cols = [c for c in spec_cols if _PER.findall(header[c].lower()) == per]
    pairs: list[dict[str, Any]] = []
    unit: str | None = None
    what: str | None = None
    rated: list[int] = []
    by_condition = len(base_cols) == 1 and bool(spec_cols)
    if by_condition:
        b = base_cols[0]
        unit = unit_of(header[b]) or next((u for c in spec_cols if (u := unit_of(header[c]))), None)
        what = next((header[c] for c in (b, *spec_cols) if unit_of(header[c]) == "ms"), None)
        # Rows that are measures with their unit ('Output token throughput (tok/s)' beside
        # 'Total input tokens'), not conditions: only a decode rate of tokens compares.
        measures = unit is None and any(unit_said(cells[0], unit_of) for _, cells in body)
        if unit is None and not measures:  # rows of processes: 'prefill', 'decode' (speeds?)
            whole = [(i, cells) for i, cells in body if len(cells) == len(header)]
            named = [cells[0] for _, cells in whole]
            rated = [whole[k][0] for k in process_rates(named, [x[b] for _, x in whole], _least)]
        for i, cells in body:
            if len(cells) != len(header) or skipped(cells[0]) or (rated and i not in rated):
                continue
            if unit is None and names_time(cells[0]):
                continue  # a time among rates ('decode TPOT (ms / output token)'): lower is faster
            if measures:
                u = unit_said(cells[0], unit_of)
                if u is None or u.lower().startswith("req") or (time_key and time_key.search(u)):
                    continue
                if column_skip is not None and column_skip.search(cells[0]):
                    continue
                unit = unit or u
            base = _measured(cells[b], least=True)
            for c in spec_cols:
                spec = _measured(cells[c], least=False)
                if base is None or spec is None:
                    continue
                pairs.append(
                    {
                        "offset": i,
                        "row": cells[0],
                        "column": header[c],
                        "speculative": spec[0],
                        "baseline": base[0],
                        "_u": unit_of(base[1]) or unit_of(spec[1]),
                    }
                )
        cell_units = [p["_u"] for p in pairs if p["_u"]]
        if unit is None and cell_units:
            # The unit in the cells: rows of other measures beside the rate ('wall time |
            # 41.73 s', 'tokens generated | 59', 'peak memory | 112 GB') compare nothing.
            rates = [u for u in cell_units if rate_key and rate_key.search(u)]
            unit = (rates or cell_units)[0]
            pairs = [p for p in pairs if (p["_u"] or "").lower() == unit.lower()]
        for p in pairs:
            del p["_u"]
    else:
        labelled = [(i, cells) for i, cells in body if len(cells) == len(header)]
        # The configuration is named in the first column with a baseline row; the cells
        # before it (a GPU, a backend) make groups, each with its own baseline row. In a
        # sweep of the draft depth, the row of depth 0 ('off') is the baseline.
        at = next((c for c in range(len(header)) if any(is_base(x[c]) for _, x in labelled)), None)
        lead = list(range(at or 0))
        if switch is not None:
            # Speculation's own switch column decides a row's side, whatever its name says
            # ('baseline (as-deployed)' with MTP 'on (n=2)'); the columns before it group the
            # rows (another switch: '--enforce-eager'), but a name no two rows share does not.
            at = switch
            names = [x[0] for _, x in labelled]
            lead = [c for c in range(at) if c > 0 or len(set(names)) < len(names)]
        swept = None
        if depths is not None and (at is None or depths.fullmatch(header[at])):
            # (a depth column whose baseline row says so: '0 (no MTP)')
            swept = next((c for c, h in enumerate(header) if depths.fullmatch(h)), None)
            at = swept if swept is not None else at
            lead = list(range(at or 0))

        def group_of(cells: list[str]) -> tuple[str, ...]:
            return tuple(cells[c] for c in lead)

        def base_row_of(cells: list[str]) -> bool:
            if swept is not None:
                return _DEPTH_OFF.fullmatch(cells[swept]) is not None
            return at is not None and is_base(cells[at])

        if at is None:
            return reading
        bases = [(i, cells) for i, cells in labelled if base_row_of(cells)]
        groups = [group_of(cells) for _, cells in bases]
        if not bases and swept is not None:  # depths of one drafter side by side, no 'off'
            token_time = key_of(defn, "token_time")
            return _swept_alone(text, header, labelled, swept, (rate_key, token_time), column_skip)
        if not bases or len(set(groups)) != len(groups):
            return reading
        base_of = {group_of(cells): cells for _, cells in bases}
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
        metric.sort(key=lambda c: is_time(unit_of(header[c])))
        if not metric:  # no unit: the speeds of a table of processes ('prefill | decode')
            rated = [c for c in process_rates(header, base_row, _least) if c > at]
            metric = rated
        if not metric or (base := _measured(base_row[metric[0]], least=True)) is None:
            return reading
        unit = unit_of(header[metric[0]]) or unit_of(base[1])
        timed, what = is_time(unit), header[metric[0]]
        spec_rows = [x[at] for _, x in labelled if not base_row_of(x) and spec_key.search(x[at])]
        depth_of = named_depths(spec_rows) if swept is None else {}
        for m in metric:
            for i, cells in labelled:
                group = group_of(cells)
                if (i, cells) in bases or group not in base_of or skipped(cells[at]):
                    continue
                k = _depth(cells[swept]) if swept is not None else None
                if not (spec_key.search(cells[at]) or drafted(cells) or k):
                    continue
                said = _measured(base_of[group][m], least=True)
                u = unit_of(header[m]) or (unit_of(said[1]) if said else None)
                u = "" if u is None and m in rated else u
                if said is None or u is None or is_time(u) != timed:
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
                        # a depth the names give: k_too_large's sweep, but a slower row
                        # stays a configuration no_speedup names (a depth column's does not)
                        | ({"named_k": d} if (d := depth_of.get(cells[at])) else {})
                    )
    if not pairs:
        return reading
    direction = None
    unit = unit or (caption if by_condition else None)
    if unit is None:
        if not (rated or (by_condition and _changes_agree(header, body, pairs, change_key))):
            return reading  # numbers without a unit or a change that says which way is faster
        direction = "rate"
    faster = (
        (lambda p: p["baseline"] / p["speculative"])
        if unit and (unit == "ms" or (time_key is not None and time_key.fullmatch(unit)))
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
    } | ({"stated_what": what} if unit == "ms" else {})
    return reading


def _swept_alone(
    text: str,
    header: list[str],
    rows: list[tuple[int, list[str]]],
    depth: int,
    keys: tuple[regex.Pattern[str] | None, regex.Pattern[str] | None],
    skip: regex.Pattern[str] | None,
) -> Reading:
    """A sweep of the draft depth without a row of no drafting (``table_shapes.
    sweep_alone``): its pairs of k and speed, no baseline; the row quoted is the slowest
    against the fastest of its configuration. The speed is a rate of tokens, or else the
    time of a token (``token_time``: 'TPOT' in milliseconds), the longer the slower."""
    reading = Reading()
    rate_key, token_time = keys

    def rated(head: str) -> bool:
        return bool(rate_key and rate_key.search(head)) and not _said(skip, head)

    def timed(head: str) -> bool:
        return _said(token_time, head) and not _said(skip, head)

    pairs, unit = sweep_alone(header, rows, depth, _depth, rated), None
    if pairs and rate_key is not None and (m := rate_key.search(pairs[0]["column"])):
        unit = m.group(0)
    elif not pairs and (pairs := sweep_alone(header, rows, depth, _depth, timed)):
        col = header.index(pairs[0]["column"])
        if not in_ms(header[col], [dict(rows)[p["offset"]][col] for p in pairs]):
            return reading
        unit, reading.values["stated_what"] = "ms", header[col]
    if not pairs:
        return reading
    slower = (lambda p: p["speculative"]) if unit == "ms" else (lambda p: 1 / p["speculative"])
    groups = {p.get("group") for p in pairs}
    fastest = {g: min(slower(q) for q in pairs if q.get("group") == g) for g in groups}
    decide = max(pairs, key=lambda p: slower(p) / fastest[p.get("group")])
    reading.values |= {
        "stated": _quote(text, decide["offset"]),
        "stated_offset": decide["offset"],
        "stated_unit": unit,
        "stated_rows": pairs,
    }
    return reading


def _rows(text: str) -> list[tuple[int, list[str]]]:
    """The table's rows, each with its line in the block and its cells: a markdown table's
    lines, or an HTML table's ``<tr>`` (cells ``<th>``/``<td>``, one a line or all on one)."""
    lines = text.splitlines()
    if not _HTML.match(text):
        return [
            (i, cells_of(line))
            for i, line in enumerate(lines)
            if line.strip() and not RULE.match(line)
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
# (a remark after the depth is the author's: '0 (no MTP)', '4 (default)')
_DEPTH_OFF = regex.compile(r"(?:0|off|none|-|\u2014|n/?a)(?:\s*\([^()]*\))?", regex.I)


def _depth(cell: str) -> int | None:
    """A draft depth (k) a sweep's row names: a whole number from 1 ('**1**', 'd2')."""
    m = regex.fullmatch(r"(?:d|k\s*=?\s*)?(\d{1,2})(?:\s*\([^()]*\))?", cell.strip(), regex.I)
    return int(m.group(1)) or None if m is not None else None


def _measured(cell: str, *, least: bool) -> tuple[float, str] | None:
    """A cell's value; a cell of runs apart by '/' or ', ' ('83.3 / 80.1', '30.69, 27.86',
    a round each) or a range ('0.31–0.33') stands for them at the end most favourable to
    speculation: the baseline's least, the speculative side's most (a slowdown read from
    them holds for every pair)."""
    runs = [cell_number(x) for x in _RUNS.split(_REMARK.sub("", cell))]
    if len(runs) < 2 or any(r is None for r in runs):
        return cell_number(cell)
    said = [r for r in runs if r is not None]
    unit = said[-1][1]
    if any(u and u != unit for _, u in said):
        return None
    values = [v for v, _ in said]
    return (min(values) if least else max(values)), unit


def _said(key: regex.Pattern[str] | None, text: str) -> bool:
    return key is not None and key.search(text) is not None


def _least(cell: str) -> tuple[float, str] | None:
    return _measured(cell, least=True)


def _rate_said(cell: str) -> bool:
    return rate_of(cell) is not None


def _in_cells(defn: Definition, text: str) -> Reading:
    """A comparison inside a cell, by the definition's ``in_cell`` key (a regex with groups
    ``spec``, ``base`` and ``unit``): '~17–21 tok/s vs **37 tok/s** no-spec baseline'. Each
    cell that holds one is a condition (its row); the slowest decides. Not in a column,
    a row or a cell of prompt processing (``not_decode_column``)."""
    reading = Reading()
    key, prefill = key_of(defn, "in_cell"), key_of(defn, "not_decode_column")
    vs_column, vs_cell = key_of(defn, "vs_column"), key_of(defn, "vs_cell")
    if key is None:
        return reading
    lines = text.splitlines()
    header: list[str] = []
    pairs: list[dict[str, Any]] = []
    units: list[str] = []
    for i, line in enumerate(lines):
        # A block may hold tables one after another: each header is the line above a rule.
        if i + 1 < len(lines) and "-" in lines[i + 1] and RULE.match(lines[i + 1]):
            header = cells_of(line)
            continue
        if not line.strip() or RULE.match(line):
            continue
        cells = cells_of(line)
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
    spec_key, base_key = key_of(defn, "speculative_line"), key_of(defn, "baseline_line")
    if spec_key is None or base_key is None:
        return reading
    sides: list[tuple[int, str, float, str]] = []
    for i, line in enumerate(text.splitlines()):
        for side, key in (("baseline", base_key), ("speculative", spec_key)):
            m = key.fullmatch(line.strip())
            value = cell_number(m.group("num")) if m is not None else None
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


def _vouched_baseline(
    header: list[str],
    body: list[tuple[int, list[str]]],
    spec: int,
    unit_of: Callable[[str], str | None],
    spec_key: regex.Pattern[str],
    change_key: regex.Pattern[str] | None,
) -> list[int]:
    """A baseline no word names ('classic agg tok/s' beside 'B>1 MTP agg tok/s'): the one
    other column of the speculative column's unit, when the author's speedup column gives
    the ratio of the two in every row; else none (two GPUs, two models: no baseline)."""
    unit = unit_of(header[spec])
    others = [
        c
        for c, h in enumerate(header)
        if c and c != spec and not spec_key.search(h) and unit and unit_of(h) == unit
    ]
    if len(others) != 1:
        return []
    pairs = [
        {"offset": i, "speculative": s[0], "baseline": b[0]}
        for i, cells in body
        if len(cells) == len(header)
        and (s := cell_number(cells[spec])) is not None
        and (b := cell_number(cells[others[0]])) is not None
    ]
    return others if pairs and _changes_agree(header, body, pairs, change_key) else []


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
        if m is None:  # a multiple ('0.78x'), not a change
            r = ratio_of(said.get(p["offset"], ""))
            if r is None or not agrees(r, p["speculative"], p["baseline"]):
                return False
            continue
        sign = -1.0 if m.group("sign") in ("-", "\u2212") else 1.0
        change = 100.0 * (p["speculative"] / p["baseline"] - 1.0)
        if abs(sign * float(m.group("num")) - change) > 1.0:
            return False
    return True


__all__ = ["read_pairs", "read_spec_table", "read_table"]
