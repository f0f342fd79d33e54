"""Reading Python reprs that servers log (``str(dict)``, ``Namespace(...)``, ``k=v, k=v``).

Only ``ast.literal_eval`` ever sees the text: nothing from a log is evaluated. Where a value
is not a literal (``LoRAModulePath(...)``, ``<function ...>``, a copy cut off mid-way) the
value is kept as its raw text and the rest still reads.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import regex

_MAX_LEN = 256_000
_PLAIN_STRING = regex.compile(r"'[^'\\\n]*'|\"[^\"\\\n]*\"")
_PLAIN_INT = regex.compile(r"-?(?:0|[1-9][0-9]*)")
_PLAIN_FLOAT = regex.compile(
    r"-?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|-?[0-9]+[eE][-+]?[0-9]+"
)
_CONSTANTS = {"True": True, "False": False, "None": None}
_OPEN = "([{"
_CLOSE = ")]}"


@dataclass
class _Walk:
    """Where a scan of a repr stands: bracket depth and the quote it is inside, if any."""

    depth: int = 0
    quote: str | None = None


_MARKS: dict[str, regex.Pattern[str]] = {}
_IN_QUOTE = {q: regex.compile(rf"[\\{q}]") for q in "'\""}


def _walk(text: str, state: _Walk, marks: str) -> Iterator[tuple[int, str]]:
    """The brackets and ``marks`` of ``text`` outside quotes, with ``state`` kept up to
    date; a bracket is yielded after the depth has changed for it."""
    # A search for the next character that matters, not a step per character: startup
    # lines carry dicts of thousands of characters.
    outside = _MARKS.get(marks)
    if outside is None:
        outside = _MARKS[marks] = regex.compile(
            "[" + regex.escape("'\"" + _OPEN + _CLOSE + marks) + "]"
        )
    i, n = 0, len(text)
    while i < n:
        if state.quote:
            found = _IN_QUOTE[state.quote].search(text, i)
            if found is None:
                return
            if found.group() == "\\":
                i = found.start() + 2
                continue
            state.quote = None
            i = found.end()
            continue
        found = outside.search(text, i)
        if found is None:
            return
        c, i = found.group(), found.start()
        if c in "'\"":
            state.quote = c
        else:
            if c in _OPEN:
                state.depth += 1
            elif c in _CLOSE:
                state.depth = max(0, state.depth - 1)
            yield i, c
        i += 1


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` where no bracket or quote is open."""
    parts: list[str] = []
    start = 0
    state = _Walk()
    for i, c in _walk(text, state, sep):
        if c == sep and state.depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def balanced_prefix(text: str) -> tuple[str, bool]:
    """The bracketed expression at the start of ``text`` and whether it was closed."""
    state = _Walk()
    for i, c in _walk(text, state, ""):
        if c in _CLOSE and state.depth == 0:
            return text[: i + 1], True
    return text, False


def bracket_depth(text: str, depth: int = 0) -> int:
    """The bracket depth after ``text`` from ``depth`` before it, outside quotes (a quote
    left open ends with the line: a JSON string does not span lines)."""
    state = _Walk(depth)
    for _ in _walk(text, state, ""):
        pass
    return state.depth


def is_open(text: str) -> bool:
    """Does ``text`` stop inside a bracket or a quote, or right after a comma?"""
    state = _Walk()
    for _ in _walk(text, state, ""):
        pass
    return state.depth > 0 or state.quote is not None or text.rstrip().endswith(",")


def literal(text: str) -> Any:
    """The Python literal ``text`` stands for, or the text itself when it is not one."""
    text = text.strip()
    if not text or len(text) > _MAX_LEN:
        return text
    # The commonest values read without compiling them (as literal_eval does).
    if _PLAIN_STRING.fullmatch(text):
        return text[1:-1]
    if _PLAIN_INT.fullmatch(text):
        return int(text)
    if _PLAIN_FLOAT.fullmatch(text):
        return float(text)
    if text in _CONSTANTS:
        return _CONSTANTS[text]
    try:
        with warnings.catch_warnings():
            # '\)' in a logged string: Python 3.12 prints a SyntaxWarning for it on stderr.
            warnings.simplefilter("ignore")
            return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def parse_python_dict(text: str) -> dict[str, Any]:
    """A logged ``str(dict)``; items that do not read are kept as raw text."""
    body, closed = balanced_prefix(text.strip())
    if closed:
        value = literal(body)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
    inner = body.strip()
    inner = inner[1:] if inner.startswith("{") else inner
    inner = inner[:-1] if closed and inner.endswith("}") else inner
    out: dict[str, Any] = {}
    for item in split_top_level(inner):
        key, sep, value = _split_once(item, ":")
        if not sep:
            continue
        k = literal(key)
        out[str(k)] = literal(value)
    return out


def parse_python_dict_nested(text: str) -> tuple[dict[str, Any], bool]:
    """A logged ``str(dict)`` whose dicts are read at every depth, and whether the text was
    cut off inside it. A dict that holds a value ``literal_eval`` refuses (``nan``, an
    object's repr) is read item by item, so the dicts in it are still read; where the
    text ends inside a dict, its last item is left out (its value may be cut short)."""
    body, closed = balanced_prefix(text.strip())
    if closed:
        value = literal(body)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}, False
    inner = body.strip()
    inner = inner[1:] if inner.startswith("{") else inner
    inner = inner[:-1] if closed and inner.endswith("}") else inner
    items = split_top_level(inner)
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        key, sep, raw = _split_once(item, ":")
        if raw.startswith("{"):
            out[str(literal(key))] = parse_python_dict_nested(raw)[0]
        elif sep and (closed or i < len(items) - 1):  # not the item the text ended in
            out[str(literal(key))] = literal(raw)
    return out, not closed


def holding_keys(obj: Any, keys: tuple[str, ...], depth: int = 3) -> dict[str, Any] | None:
    """The first dict in ``obj`` (itself, or nested at most ``depth`` deep) that has
    every one of ``keys``."""
    level = [obj]
    for _ in range(depth + 1):
        dicts = [d for d in level if isinstance(d, dict)]
        for d in dicts:
            if all(k in d for k in keys):
                return d
        level = [v for d in dicts for v in d.values()]
    return None


def parse_key_values(text: str) -> dict[str, Any]:
    """``key=value, key=value`` (VllmConfig, ``Namespace(...)`` or ``SpeculativeConfig(...)``)."""
    text = text.strip()
    for head in ("Namespace(", "SpeculativeConfig("):
        if text.startswith(head):
            text = text[len(head) :]
            body, _ = balanced_prefix("(" + text)
            text = body[1:-1] if body.endswith(")") else body[1:]
    if text.endswith(")") and text.count("(") < text.count(")"):
        text = text[:-1]  # the close of a repr whose opening the caller's anchor took
    out: dict[str, Any] = {}
    for item in split_top_level(text):
        key, sep, value = _split_once(item, "=")
        if sep and key.isidentifier():
            out[key] = literal(value)
    return out


def _split_once(item: str, sep: str) -> tuple[str, str, str]:
    """``key``, ``sep``, ``value`` at the first top-level ``sep`` (``sep`` is "" if none)."""
    state = _Walk()
    for i, c in _walk(item, state, sep):
        if c == sep and state.depth == 0:
            return item[:i].strip(), sep, item[i + 1 :].strip()
    return item, "", ""


__all__ = [
    "balanced_prefix",
    "bracket_depth",
    "holding_keys",
    "is_open",
    "literal",
    "parse_key_values",
    "parse_python_dict",
    "parse_python_dict_nested",
    "split_top_level",
]
