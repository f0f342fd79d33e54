"""A pipe table without its outer pipes, as GitHub renders a table pasted from a web page or
a spreadsheet (GFM makes the outer pipes optional)::

    | Case | no_mtp_eager | mtp_eager | eager speedup | no_mtp_graph | mtp_graph | graph ratio
    -- | -- | -- | -- | -- | -- | --
    receipt | 60.08 tok/s | 91.79 tok/s | 1.53× | 465.31 tok/s | 260.37 tok/s | 0.56×

The rule line under the header gives the number of columns, and so whether a pipe at either
end of a line is an outer one or ends an empty cell (a blank first header cell: ``  | E2E P50
| ... | Output tok/s``). Rows made whole are read as a piped table is
(``tables.read_table``); a table that is no comparison by its layout may still pair its
columns: one naming speculation off beside one naming it on, the same name without the words
of speculation (``no_mtp_graph`` and ``mtp_graph``), each row a condition, the slowest
deciding. Quotes are the author's lines as written.
"""

from __future__ import annotations

from typing import Any

import regex

from specscope.logs.definitions import Definition
from specscope.logs.reading import Reading
from specscope.logs.table_shapes import clean_cell
from specscope.logs.tables import read_table

_RULE = regex.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)+\|?\s*$")
_WORDS = regex.compile(r"[^\W_]+")
_NUMBER = regex.compile(r"[~≈]?\s*(?P<num>\d[\d,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z/%]*)")


def _number(cell: str) -> tuple[float, str] | None:
    """A cell's value and its unit ('60.08 tok/s'); None for a dash, a ratio, words."""
    m = _NUMBER.fullmatch(cell.strip())
    value = float(m.group("num").replace(",", "")) if m is not None else 0.0
    return (value, m.group("unit")) if m is not None and value > 0 else None


def _key(defn: Definition, role: str) -> regex.Pattern[str] | None:
    raw = defn.keys.get(role)
    return regex.compile(raw, regex.I | regex.V0) if raw else None


def _whole(line: str, columns: int) -> list[str] | None:
    """The line's cells, ``columns`` of them, or None when it is no row of the table."""
    parts = line.split("|")
    for cut in ((0, None), (1, None), (0, -1), (1, -1)):
        cells = parts[cut[0] : cut[1]]
        dropped = parts[: cut[0]] + (parts[cut[1] :] if cut[1] is not None else [])
        if len(cells) == columns and all(not x.strip() for x in dropped):
            return [clean_cell(c) for c in cells]
    return None


def rows_of(text: str) -> list[tuple[int, list[str]]]:
    """The header and the rows after the rule, each with its line in the block."""
    lines = text.splitlines()
    rule = next((i for i, line in enumerate(lines) if i and _RULE.match(line)), None)
    if rule is None:
        return []
    columns = lines[rule].strip().strip("|").count("|") + 1
    header = _whole(lines[rule - 1], columns)
    if header is None:
        return []
    rows = [(rule - 1, header)]
    for i in range(rule + 1, len(lines)):
        if not lines[i].strip():
            continue
        cells = _whole(lines[i], columns)
        if cells is None:
            break
        rows.append((i, cells))
    return rows


def read_bare_table(defn: Definition, text: str) -> Reading:
    """The comparison a table without outer pipes holds: by the layouts of a piped table,
    or else by pairs of columns (``_by_column_pairs``)."""
    rows = rows_of(text)
    if len(rows) < 2:
        return Reading()
    lines = text.splitlines()
    piped = [""] * len(lines)
    for i, cells in rows:
        piped[i] = "| " + " | ".join(cells) + " |"
    rule = rows[0][0] + 1
    piped[rule] = "|" + "---|" * len(rows[0][1])
    # read_table reads from the table's first line: the lines before the header are dropped
    # and the offsets it gives moved back.
    start = rows[0][0]
    reading = read_table(defn, "\n".join(piped[start:]))
    if reading.values:
        reading.values["stated_offset"] += start
        for pair in reading.values.get("stated_rows") or []:
            pair["offset"] += start
    else:
        reading = _by_column_pairs(defn, rows)
    if reading.values:
        reading.values["stated"] = lines[reading.values["stated_offset"]].strip()
    return reading


def _by_column_pairs(defn: Definition, rows: list[tuple[int, list[str]]]) -> Reading:
    """Columns in pairs: one whose name says speculation is off (the definition's
    ``negated`` key) and one whose name is the same without those words and names it on
    (``speculative``), both holding rates (``rate``). Each row's pair is a condition; the
    slowest decides, as in a table of conditions."""
    reading = Reading()
    negated, spec_key, rate = (_key(defn, k) for k in ("negated", "speculative", "rate"))
    if negated is None or spec_key is None or rate is None:
        return reading
    header, body = rows[0][1], rows[1:]

    def rest(name: str, key: regex.Pattern[str]) -> list[str]:
        return sorted(_WORDS.findall(key.sub(" ", name).lower()))

    offs = [c for c, h in enumerate(header) if c and negated.search(h)]
    ons = [c for c, h in enumerate(header) if c and c not in offs and spec_key.search(h)]
    columns = []
    for b in offs:
        same = [s for s in ons if rest(header[s], spec_key) == rest(header[b], negated)]
        if len(same) == 1:
            columns.append((b, same[0]))
    pairs: list[dict[str, Any]] = []
    units: set[str] = set()
    for i, cells in body:
        for b, s in columns:
            base, spec = _number(cells[b]), _number(cells[s])
            if base is None or spec is None:
                continue
            said = {u for u in (base[1], spec[1], header[b], header[s]) if rate.search(u)}
            unit = next((u for u in (base[1], spec[1]) if rate.search(u)), None)
            if not said or unit is None:
                continue
            units.add(unit.lower())
            pairs.append(
                {
                    "offset": i,
                    "row": cells[0],
                    "column": header[s],
                    "speculative": spec[0],
                    "baseline": base[0],
                }
            )
    if not pairs or len(units) != 1:
        return reading
    decide = min(pairs, key=lambda p: p["speculative"] / p["baseline"])
    reading.values = {
        "stated_offset": decide["offset"],
        "stated_spec": decide["speculative"],
        "stated_base": decide["baseline"],
        "stated_unit": units.pop(),
        "stated_rows": pairs,
    }
    return reading


__all__ = ["read_bare_table", "rows_of"]
