"""Reading ``Label: value, Label: value`` bodies by label, and turning values into numbers.

Values keep their units and lists keep the same ``, `` separator as the fields around them,
so a value runs up to the next ``, Label:`` rather than to the next comma.
"""

from __future__ import annotations

import math
from typing import Any

import regex

from specscope.definitions import Definition, FieldSpec

# A label starts the body or follows a comma, begins with a letter, and ends at a colon
# that is not part of a time or ratio ("0:12"). Wrapped text may have lost the space
# after the comma, hence `\s*`.
_LABEL = regex.compile(r"(?:^|,)\s*(?P<label>[A-Za-z][A-Za-z0-9 _/()'%.#-]{0,60}?)\s*:(?!\d\d:)")
_NUMBER = regex.compile(
    r"\s*(?P<num>[-+]?(?:nan|inf|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+))", regex.I
)
_LIST_ITEM = regex.compile(r"\s*(?:[-+]?(?:nan|inf|\d+(?:\.\d*)?|\.\d+))\s*%?\s*$", regex.I)


class FieldValueError(ValueError):
    """A value that does not read as its declared type; the message names the text."""


def split_labels(body: str) -> list[tuple[str, str]]:
    """``[(label, raw value), ...]`` in order; text before the first label is dropped."""
    matches = list(_LABEL.finditer(body))
    out: list[tuple[str, str]] = []
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        out.append((m.group("label").strip(), body[m.end() : end].strip().rstrip(",").strip()))
    return out


def _number(text: str) -> float:
    m = _NUMBER.match(text)
    if not m:
        raise FieldValueError(f"expected a number, got {text[:40]!r}")
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
        if not items:
            raise FieldValueError(f"expected a list of numbers, got {raw[:40]!r}")
        values: list[float | None] = []
        for item in items:
            if not _LIST_ITEM.match(item):
                raise FieldValueError(f"expected a number in the list, got {item.strip()[:40]!r}")
            v = _number(item)
            if kind == "percent_list":
                v = _percent(v)
            values.append(None if math.isnan(v) else v)
        return values
    value = _number(raw)
    if math.isnan(value):
        return None
    if kind == "int":
        if not value.is_integer():
            raise FieldValueError(f"expected a whole number, got {raw[:40]!r}")
        return int(value)
    if kind == "percent":
        return _percent(value)
    return value


def _percent(value: float) -> float:
    # 37.2 / 100 is 0.37200000000000005 in binary; the log printed at most a few decimals.
    return round(value / 100.0, 12)


def read_fields(defn: Definition, body: str) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(values by column, unknown labels with their raw text, problems) of one record body."""
    values: dict[str, Any] = {}
    extra: dict[str, str] = {}
    problems: list[str] = []
    for label, raw in split_labels(body):
        spec = defn.field_for(label)
        if spec is None:
            extra[" ".join(label.split())] = raw
            continue
        if spec.column in values:
            continue  # the first of two synonyms wins
        try:
            values[spec.column] = convert(spec, raw)
        except FieldValueError as exc:
            problems.append(f"{spec.label}: {exc}")
            continue
        for column, value in spec.set.items():
            values.setdefault(column, value)
    return values, extra, problems


def is_list_continuation(text: str) -> bool:
    """True for a line that holds nothing but list items (``0.139, 0.120,``)."""
    items = [x for x in text.split(",") if x.strip()]
    return bool(items) and all(_LIST_ITEM.match(x) for x in items)


__all__ = ["FieldValueError", "convert", "is_list_continuation", "read_fields", "split_labels"]
