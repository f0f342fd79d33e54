"""Reading ``Label: value, Label: value`` bodies by label, and turning values into numbers.

Values keep their units and lists keep the same ``, `` separator as the fields around them,
so a value runs up to the next ``, Label:`` rather than to the next comma.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import regex

from specscope.logs.definitions import Definition, FieldSpec
from specscope.logs.limits import MAX_COUNT, max_k
from specscope.logs.pyrepr import holding_keys, parse_python_dict_nested, split_top_level

# A label starts the body or follows a comma, begins with a letter, and ends at a colon
# that is not part of a time or ratio ("0:12"). Wrapped text may have lost the space
# after the comma, hence `\s*`. People who condense a record by hand separate its fields
# with a semicolon or a run of spaces instead ("Mean acceptance length: 1.12   Accepted:
# 9"); one space is not a separator (labels have spaces in them).
_LABEL = regex.compile(
    r"(?:^|[,;]|(?<=\S)\s{2,}(?=#?[A-Za-z]))\s*"
    r"(?P<label>#?[A-Za-z][A-Za-z0-9 _/()'%.#-]{0,60}?)\s*:(?!\d\d:)"
)
_NUMBER = regex.compile(
    r"\s*(?P<num>[-+]?(?:nan|inf|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+))", regex.I
)
_LIST_ITEM = regex.compile(r"\s*(?:[-+]?(?:nan|inf|\d+(?:\.\d*)?|\.\d+))\s*%?\s*$", regex.I)
# A byte no log prints in a value: a number next to one was damaged on its way here.
_DAMAGE = frozenset(map(chr, [*range(9), 11, 12, *range(14, 32), 127, 0xFFFD]))


class FieldValueError(ValueError):
    """A value that does not read as its declared type; the message names the text."""


class ListTooLongError(FieldValueError):
    """A per-position list longer than a draft can be (``limits.max_k``): the record
    is skipped, not kept without it."""


def split_labels(body: str) -> list[tuple[str, str]]:
    """``[(label, raw value), ...]`` in order; text before the first label is dropped.
    An ellipsis where an author elided fields separates like a comma."""
    if "..." in body or "\u2026" in body:
        body = body.replace("...", ",").replace("\u2026", ",")
    matches = list(_LABEL.finditer(body))
    out: list[tuple[str, str]] = []
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        out.append((m.group("label").strip(), body[m.end() : end].strip().rstrip(",;").strip()))
    return out


def _number(text: str) -> float:
    m = _NUMBER.match(text)
    if not m:
        raise FieldValueError(f"expected a number, got {text[:40]!r}")
    if text[m.end() : m.end() + 1] in _DAMAGE:
        raise FieldValueError(f"a damaged number (a control byte inside): {text[:40]!r}")
    return float(m.group("num"))


def convert(spec: FieldSpec, raw: str) -> Any:
    """The value of one field as its declared type; ``None`` for ``nan``."""
    kind = spec.type
    if kind == "str":
        return raw.strip().strip("'\"")
    if kind == "bool":
        low = raw.strip().lower()
        if low in ("true", "yes", "on", "1"):
            return True
        if low in ("false", "no", "off", "0"):
            return False
        raise FieldValueError(f"expected true/false, got {raw[:40]!r}")
    if kind in ("float_list", "percent_list"):
        items = [x for x in raw.split(",") if x.strip()]
        if len(items) > max_k():
            raise ListTooLongError(
                f"a list of {len(items)} entries, over the limit of {max_k()} (SPECSCOPE_MAX_K)"
            )
        if not items:
            raise FieldValueError(f"expected a list of numbers, got {raw[:40]!r}")
        values: list[float | None] = []
        for item in items:
            if not _LIST_ITEM.match(item):
                raise FieldValueError(f"expected a number in the list, got {item.strip()[:40]!r}")
            v = _number(item)
            if math.isinf(v) or v < 0:
                raise FieldValueError(f"expected a rate in the list, got {item.strip()[:40]!r}")
            if kind == "percent_list":
                v = _percent(v)
            values.append(None if math.isnan(v) else v)
        return values
    value = _number(raw)
    if math.isnan(value):
        return None
    if math.isinf(value) and kind != "float":  # a float may be inf (a request rate)
        raise FieldValueError(f"expected a finite number, got {raw[:40]!r}")
    if kind == "int":
        if not value.is_integer() or not 0 <= value < MAX_COUNT:
            raise FieldValueError(f"expected a count, got {raw[:40]!r}")
        return int(value)
    if kind == "percent":
        if value < 0:
            raise FieldValueError(f"expected a percentage, got {raw[:40]!r}")
        return _percent(value)
    return value


def _percent(value: float) -> float:
    # 37.2 / 100 is 0.37200000000000005 in binary; the log printed at most a few decimals.
    return round(value / 100.0, 12)


@dataclass
class Reading:
    """What one record body said."""

    values: dict[str, Any] = field(default_factory=dict)  # by column
    extra: dict[str, Any] = field(default_factory=dict)  # labels no definition knows
    problems: list[str] = field(default_factory=list)  # values that did not read
    cut: bool = False  # the body stops before its terminal field, or inside its last one
    trails: bool = False  # the body stops after a separator or an ellipsis: more was to come
    dropped: str | None = None  # the last field, left out because it may be cut short
    ends_whole: bool = False  # the last field is a value that shows it is complete
    whole: int = 0  # fields whose value shows it is complete
    items: int = 0  # entries of the list values read
    chars: int = 0  # characters of the values read (known fields only)
    refused: str | None = None  # why the record cannot be kept (a list over the limit)

    @property
    def notes(self) -> list[str]:
        return self.problems + ([self.dropped] if self.dropped else [])


def read_fields(defn: Definition, body: str) -> Reading:
    """Read a record body by label. A record that should end with its ``ends_with`` field
    but does not was cut off: its last value may be cut too, so it is kept only when its text
    shows it whole (the field's ``complete`` pattern, e.g. a count with its unit)."""
    if defn.parse == "python_dict":
        return read_repr(defn, body)
    reading = Reading()
    values = reading.values
    pairs = split_labels(body)
    cut_off = (
        defn.ends_with is not None
        and (defn.ends_with_when is None or defn.ends_with_when.match(body) is not None)
        and defn.ends_with.search(body) is None
    )
    for i, (label, raw) in enumerate(pairs):
        spec = defn.field_for(label)
        if spec is None:
            item = defn.indexed_field(label)
            if item is not None:
                _put_item(reading, item[0], item[1], raw)
            else:
                reading.extra[" ".join(label.split())] = raw
            continue
        if spec.column in values:
            continue  # the first of two synonyms wins
        last = i == len(pairs) - 1
        whole = spec.complete is None or _whole(spec.complete, raw.strip())
        if (
            spec.complete is not None
            and "list" not in spec.type  # a list grows item by item; its items are counted
            and spec.complete.fullmatch(raw.strip())
        ):
            reading.whole += 1
        if last:
            reading.ends_whole = (
                spec.complete is not None
                and "list" not in spec.type  # (first: a list may be megabytes long)
                and spec.complete.fullmatch(raw.strip()) is not None
            )
        if last and (
            not whole
            or not raw.strip()
            or (cut_off and (spec.complete is None or "list" in spec.type))
        ):
            reading.cut = True
            reading.dropped = f"{spec.label}: cut off at {raw[-20:]!r}"
            reading.chars += len(_NUMBERS_AT_START.match(raw.strip()[:_WHOLE_SPAN]).group(0))
            if "list" in spec.type:
                reading.items += _items(raw)
            continue
        try:
            values[spec.column] = convert(spec, raw)
        except FieldValueError as exc:
            _note(reading, spec, exc)
            continue
        if spec.complete is None or spec.complete.fullmatch(raw.strip()):
            reading.chars += len(raw.strip())  # junk glued to a value adds nothing
        if isinstance(values[spec.column], list):
            reading.items += len(values[spec.column])
        for column, value in spec.set.items():
            values.setdefault(column, value)
    reading.cut = reading.cut or cut_off
    reading.trails = body.rstrip().endswith((",", ";", "...", "\u2026"))
    return reading


def _note(reading: Reading, spec: FieldSpec, exc: FieldValueError) -> None:
    reading.problems.append(f"{spec.label}: {exc}")
    if isinstance(exc, ListTooLongError):
        reading.refused = f"{spec.label}: {exc}"


def _put_item(reading: Reading, spec: FieldSpec, index: int, raw: str) -> None:
    """One entry of a list printed one per line (``Position 3: 64.77``)."""
    if index >= max_k():
        reading.refused = (
            f"{spec.label}: entry {index} is over the limit of {max_k()} (SPECSCOPE_MAX_K)"
        )
        return
    try:
        value = convert(spec, raw)
    except FieldValueError as exc:
        _note(reading, spec, exc)
        return
    items = reading.values.setdefault(spec.column, [])
    items.extend([None] * (index + 1 - len(items)))
    if items[index] is None:
        items[index] = value


_BLOCK_LABELS: dict[str, regex.Pattern[str]] = {}


def _block_labels(defn: Definition) -> regex.Pattern[str]:
    """Every label the definition knows, as one pattern (blocks are read by known labels
    only, so that a block whose lines were collapsed into one still reads)."""
    pattern = _BLOCK_LABELS.get(defn.name)
    if pattern is None:
        alternatives = []
        for spec in sorted(defn.fields.values(), key=lambda f: -len(f.label)):
            words = spec.label[:-2] if spec.indexed else spec.label
            body = r"\s*".join(regex.escape(w) for w in words.split())
            # Case matters for the first letter only: "Model:" is a field, "the draft
            # model:" is prose; "Total Token throughput" and "Total token ..." are one field.
            body = body[:1] + "(?i:" + body[1:] + ")" if body[:1].isalpha() else body
            alternatives.append(body + (r"\s*\d+" if spec.indexed else ""))
        pattern = regex.compile(r"(?<![\w(])(?P<label>" + "|".join(alternatives) + r")\s*:")
        _BLOCK_LABELS[defn.name] = pattern
    return pattern


def read_block(defn: Definition, text: str) -> Reading:
    """Read a multi-line block (``vllm bench serve`` output, the offline example's summary)
    by its known labels; a value runs to the next known label. A ``parse = "table"`` block
    is a markdown table an author made (``read_table``)."""
    if defn.parse == "table":
        return read_table(defn, text)
    if defn.parse == "pairs":
        return read_pairs(defn, text)
    reading = Reading()
    matches = list(_block_labels(defn).finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        raw = text[m.end() : end].strip()
        label = m.group("label")
        spec = defn.field_for(label)
        if spec is None:
            item = defn.indexed_field(label)
            if item is not None:
                _put_item(reading, item[0], item[1], raw)
            continue
        if spec.column in reading.values:
            continue
        try:
            reading.values[spec.column] = convert(spec, raw)
        except FieldValueError as exc:
            _note(reading, spec, exc)
    return reading


_CELL_NUMBER = regex.compile(r"[~≈]?\s*(?P<num>\d[\d\s,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z/%]*)")
_CHANGE = regex.compile(r"(?P<sign>[-+\u2212]?)\s*(?P<num>\d+(?:\.\d+)?)\s*%")
_RULE = regex.compile(r"^[\s|:\-]+$")


def _cells(line: str) -> list[str]:
    body = line.strip().lstrip(">").strip()
    # Bold and backticks are the author's emphasis, not part of a value.
    cells = body.strip("|").split("|")
    return [" ".join(c.replace("*", "").replace("`", "").split()) for c in cells]


def _cell_number(cell: str) -> tuple[float, str] | None:
    m = _CELL_NUMBER.fullmatch(cell.strip())
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
    """A markdown table that compares speculation on and off, read by the roles its
    definition's ``keys`` give (regexes): a ``baseline`` column beside ``speculative``
    columns, each row a condition (context, concurrency); or a column of a ``rate`` (or
    ``time``) with a ``baseline`` row among ``speculative`` rows, each a configuration.
    Rows that are ``not_decode`` (prompt processing) are left out. Without a unit, values
    are taken as rates only when the author's ``change`` column agrees with them in every
    row. The deciding pair: the slowest condition, or the fastest configuration (does any
    help?). Nothing when the table is no such comparison."""
    reading = Reading()
    lines = [(i, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    rows = [(i, _cells(line)) for i, line in lines if not _RULE.match(line)]
    if len(rows) < 2:
        return reading
    header, body = rows[0][1], rows[1:]
    base_key, spec_key = _key(defn, "baseline"), _key(defn, "speculative")
    rate_key, time_key = _key(defn, "rate"), _key(defn, "time")
    change_key, skip_key = _key(defn, "change"), _key(defn, "not_decode")
    negated = _key(defn, "negated")
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
    pairs: list[dict[str, Any]] = []
    unit: str | None = None
    by_condition = len(base_cols) == 1 and bool(spec_cols)
    if by_condition:
        b = base_cols[0]
        unit = unit_of(header[b]) or next((u for c in spec_cols if (u := unit_of(header[c]))), None)
        for i, cells in body:
            if len(cells) != len(header) or skipped(cells[0]):
                continue
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
        bases = [(i, cells) for i, cells in labelled if is_base(cells[0])]
        if len(bases) != 1:
            return reading
        # The measure: the first column whose header, or the baseline's cell, has a unit.
        metric = [
            c
            for c, h in enumerate(header)
            if c > 0 and (unit_of(h) or ((n := _cell_number(bases[0][1][c])) and unit_of(n[1])))
        ]
        if not metric or (base := _cell_number(bases[0][1][metric[0]])) is None:
            return reading
        m = metric[0]
        unit = unit_of(header[m]) or unit_of(base[1])
        for i, cells in labelled:
            if (i, cells) in bases or not spec_key.search(cells[0]) or skipped(cells[0]):
                continue
            spec = _cell_number(cells[m])
            if spec is not None:
                pairs.append(
                    {
                        "offset": i,
                        "row": cells[0],
                        "column": header[m],
                        "speculative": spec[0],
                        "baseline": base[0],
                    }
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
    decide = min(pairs, key=faster) if by_condition else max(pairs, key=faster)
    reading.values = {
        "stated": text.splitlines()[decide["offset"]].strip(),
        "stated_offset": decide["offset"],
        "stated_spec": decide["speculative"],
        "stated_base": decide["baseline"],
        "stated_unit": unit,
        "stated_direction": direction,
        "stated_rows": pairs,
    }
    return reading


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
    for (i, a, x, ux), (j, b, y, uy) in itertools.pairwise(sides):
        if a != b and j == i + 1 and not (pairs and pairs[-1]["offset"] in (i, j)):
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


def read_json(defn: Definition, obj: dict[str, Any]) -> Reading:
    """Read a JSON object (a saved benchmark result) by its keys."""
    reading = Reading()
    for spec in defn.fields.values():
        if spec.label not in obj or obj[spec.label] is None:
            continue
        value = obj[spec.label]
        raw = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        try:
            converted = convert(spec, raw)
        except FieldValueError as exc:
            _note(reading, spec, exc)
            continue
        # An ``x_`` column (groups.EXTRA_PREFIX) is no column of the table: what the record
        # says beside its counts (a request's prompt length), kept in ``extra``.
        if spec.column.startswith("x_"):
            reading.extra[spec.column[2:]] = converted
        else:
            reading.values[spec.column] = converted
    return reading


def read_repr(defn: Definition, body: str) -> Reading:
    """A record that is a server's repr of what it returned: ``obj=Request(...),
    out={...}`` (SGLang's request log). The ``out=`` dict is read as a Python literal and
    the dict in it holding the definition's ``match_keys`` is read by key; a line without
    them reads as nothing (a request of a server that does not speculate). A line cut off
    inside the dict keeps the items before the cut, and the record is marked cut."""
    out = next((item[4:] for item in split_top_level(body) if item.startswith("out=")), None)
    if out is None:
        return Reading()
    parsed, cut = parse_python_dict_nested(out)
    found = holding_keys(parsed, defn.match_keys)
    if found is None:
        return Reading()
    reading = read_json(defn, found)
    reading.cut = cut
    return reading


_NUMBERS_AT_START = regex.compile(r"[\d.,\s%]*(?:nan)?[\d.,\s%]*", regex.I)
_MORE_OF_IT = regex.compile(r"(?:\s*,\s*(?:\d|nan)|\.?\d)", regex.I)


# A complete value is far shorter than this (64 list entries take some 500 characters).
# The regex module works on a copy of the string it is given, so a multi-megabyte value
# (a list without its closing field, under a raised line limit) is looked at only this
# far: each look would otherwise allocate megabytes that the allocator keeps.
_WHOLE_SPAN = 1 << 16


def _items(text: str) -> int:
    """The items of a comma-separated list that hold something, counted one at a time (a
    list may be megabytes long: splitting it would hold all of them at once)."""
    count, start = 0, 0
    while True:
        end = text.find(",", start)
        if (text[start:] if end < 0 else text[start:end]).strip():
            count += 1
        if end < 0:
            return count
        start = end + 1


def _whole(pattern: regex.Pattern[str], value: str) -> bool:
    """The value starts with its complete form and what follows cannot be more of it
    (prose after a record's last field is fine; ``, 0.5`` after ``0.730`` is not). A
    value whose complete form runs past ``_WHOLE_SPAN`` is not whole."""
    head = value[:_WHOLE_SPAN]
    m = pattern.match(head)
    return m is not None and _MORE_OF_IT.match(value[m.end() : m.end() + 256]) is None


def unreadable(defn: Definition, reading: Reading, columns: Iterable[str]) -> list[str]:
    """The problems of the fields of ``columns`` that were printed but did not read (under
    any of their labels)."""
    wanted = set(columns)
    names = {f.label for f in defn.fields.values() if f.column in wanted}
    return [p for p in reading.problems if p.split(":", 1)[0] in names]


def labels_of(defn: Definition, columns: Iterable[str]) -> list[str]:
    """The labels that print ``columns`` (the last of each column's synonyms), quoted."""
    labels = []
    for column in columns:
        names = [f.label for f in defn.fields.values() if f.column == column]
        labels.append(f"'{names[-1]}'" if names else column)
    return labels


def is_list_continuation(text: str) -> bool:
    """True for a line that holds nothing but list items (``0.139, 0.120,``)."""
    items = [x for x in text.split(",") if x.strip()]
    return bool(items) and all(_LIST_ITEM.match(x) for x in items)


__all__ = [
    "FieldValueError",
    "ListTooLongError",
    "Reading",
    "convert",
    "is_list_continuation",
    "labels_of",
    "read_block",
    "read_fields",
    "read_json",
    "read_pairs",
    "read_repr",
    "read_table",
    "split_labels",
    "unreadable",
]
