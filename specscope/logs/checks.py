"""What a record may hold: values its columns can take and counts that agree with each
other. A value that cannot be is made null and named in the row's ``problems``; a record
whose counts contradict each other is skipped with the reason. Nothing a log says raises:
``guarded`` turns what reading a record still throws (``ValueError``, ``OverflowError``)
into a skipped line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, Protocol, TypeVar

import pyarrow as pa

from specscope.logs.limits import MAX_COUNT, max_k
from specscope.logs.results import Row, Skip
from specscope.schema import TABLES

# What reading a record may raise on values no check foresaw (a number too long for
# ``int``, a float that overflows): the record is skipped, the rest of the log is read.
RECORD_ERRORS = (ValueError, OverflowError, ArithmeticError, RecursionError)


def _count_within(bits: int) -> Callable[[Any], bool]:
    top = min(MAX_COUNT, 2 ** (bits - 1))
    return lambda v: type(v) is int and 0 <= v < top


def _number(v: Any) -> bool:
    return (type(v) is float and v == v) or type(v) is int  # (NaN is not v == v)


def _is(kind: type) -> Callable[[Any], bool]:
    return lambda v: type(v) is kind


def _check_of(kind: pa.DataType) -> Callable[[Any], bool] | None:
    """Whether a value fits a column of this type (``None``: anything does)."""
    if pa.types.is_integer(kind):
        return _count_within(kind.bit_width)
    if pa.types.is_floating(kind):
        return _number
    if pa.types.is_boolean(kind):
        return _is(bool)
    if pa.types.is_string(kind):
        return _is(str)
    if pa.types.is_list(kind):
        return _is(list)
    return None


_CHECKS: dict[str, dict[str, Callable[[Any], bool]]] = {
    table: {f.name: check for f in schema if (check := _check_of(f.type)) is not None}
    for table, schema in TABLES.items()
}
_PER_POSITION = {
    "accepted_per_pos": _count_within(64),
    "per_position_rate": lambda v: _number(v) and 0 <= v <= 1,  # a rate
}


def show(value: Any) -> str:
    """A value as a problem quotes it: short, whatever it is."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def refusal(values: Mapping[str, Any]) -> str | None:
    """Why a record's values cannot be kept together (``None`` when they can)."""
    accepted, drafted = values.get("accepted_tokens"), values.get("draft_tokens")
    if isinstance(accepted, int) and isinstance(drafted, int) and accepted > drafted:
        return f"accepted tokens ({accepted}) above draft tokens ({drafted})"
    rates = values.get("per_position_rate")
    if isinstance(rates, list) and len(rates) > max_k():
        return _too_long(len(rates))
    k = values.get("k")  # as printed (V0's "Number of speculative tokens")
    if isinstance(k, int) and k > max_k():
        return f"k = {k}, over the limit of {max_k()} (SPECSCOPE_MAX_K)"
    return None


def _too_long(n: int) -> str:
    return f"a per-position list of {n} entries, over the limit of {max_k()} (SPECSCOPE_MAX_K)"


def check_row(table: str, row: Row) -> list[str]:
    """Null every value of ``row`` its column cannot hold (a count out of range, a rate
    above 1, a per-position count above the drafts) and say why, one problem each."""
    checks = _CHECKS.get(table, {})
    problems: list[str] = []
    for column, value in row.items():
        if value is None:
            continue
        check = checks.get(column)
        if check is not None and not check(value):
            problems.append(f"{column}: {show(value)} is out of range")
            row[column] = None
        elif column in _PER_POSITION:
            _check_items(column, value, row, problems)
    if table == "spec_decode" and (why := refusal(row)):
        problems.append(why)  # counts made from totals (V0 deltas) that contradict
    return problems


def _check_items(column: str, items: list[Any], row: Row, out: list[str]) -> None:
    fits = _PER_POSITION[column]
    drafts = row.get("drafts") if column == "accepted_per_pos" else None
    for i, item in enumerate(items):
        if item is None or (fits(item) and (drafts is None or item <= drafts)):
            continue
        out.append(f"{column}[{i}]: {show(item)} is out of range")
        items[i] = None


P = ParamSpec("P")
T = TypeVar("T")


class _Reads(Protocol):
    skipped: list[Skip]
    lines: int

    def open_line(self) -> int | None: ...


def guarded(
    title: str,
) -> Callable[[Callable[P, T]], Callable[P, T | None]]:
    """A parser method that reads a record: what it raises on a hostile value becomes a
    skipped line (the line it was given, else the first line of what the parser holds),
    never an error of the whole log."""

    def wrap(method: Callable[P, T]) -> Callable[P, T | None]:
        @functools.wraps(method)
        def run(*args: P.args, **kwargs: P.kwargs) -> T | None:
            parser: _Reads = args[0]  # type: ignore[assignment]
            given = args[1] if len(args) > 1 and isinstance(args[1], int) else None
            line = given if given is not None else parser.open_line()
            try:
                return method(*args, **kwargs)
            except RECORD_ERRORS as exc:
                what = " ".join(str(exc).split())[:120]
                parser.skipped.append(
                    Skip(
                        line or parser.lines,
                        f"{title} that does not read ({type(exc).__name__}: {what})",
                        "",
                    )
                )
                return None

        return run

    return wrap


__all__ = ["RECORD_ERRORS", "check_row", "guarded", "refusal", "show"]
