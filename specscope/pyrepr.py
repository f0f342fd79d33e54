"""Reading Python reprs that servers log (``str(dict)``, ``Namespace(...)``, ``k=v, k=v``).

Only ``ast.literal_eval`` ever sees the text: nothing from a log is evaluated. Where a value
is not a literal (``LoRAModulePath(...)``, ``<function ...>``, a copy cut off mid-way) the
value is kept as its raw text and the rest still reads.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_MAX_LEN = 256_000
_OPEN = "([{"
_CLOSE = ")]}"


@dataclass
class _Walk:
    """Where a scan of a repr stands: bracket depth and the quote it is inside, if any."""

    depth: int = 0
    quote: str | None = None


def _walk(text: str, state: _Walk) -> Iterator[tuple[int, str]]:
    """The characters of ``text`` outside quotes, with ``state`` kept up to date; a
    bracket is yielded after the depth has changed for it."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if state.quote:
            if c == "\\":
                i += 2
                continue
            if c == state.quote:
                state.quote = None
        elif c in "'\"":
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
    for i, c in _walk(text, state):
        if c == sep and state.depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def balanced_prefix(text: str) -> tuple[str, bool]:
    """The bracketed expression at the start of ``text`` and whether it was closed."""
    state = _Walk()
    for i, c in _walk(text, state):
        if c in _CLOSE and state.depth == 0:
            return text[: i + 1], True
    return text, False


def is_open(text: str) -> bool:
    """Does ``text`` stop inside a bracket or a quote, or right after a comma?"""
    state = _Walk()
    for _ in _walk(text, state):
        pass
    return state.depth > 0 or state.quote is not None or text.rstrip().endswith(",")


def literal(text: str) -> Any:
    """The Python literal ``text`` stands for, or the text itself when it is not one."""
    text = text.strip()
    if not text or len(text) > _MAX_LEN:
        return text
    try:
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
    for i, c in _walk(item, state):
        if c == sep and state.depth == 0:
            return item[:i].strip(), sep, item[i + 1 :].strip()
    return item, "", ""


__all__ = [
    "balanced_prefix",
    "is_open",
    "literal",
    "parse_key_values",
    "parse_python_dict",
    "split_top_level",
]
