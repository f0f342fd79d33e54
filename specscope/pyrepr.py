"""Reading Python reprs that servers log (``str(dict)``, ``Namespace(...)``, ``k=v, k=v``).

Only ``ast.literal_eval`` ever sees the text: nothing from a log is evaluated. Where a value
is not a literal (``LoRAModulePath(...)``, ``<function ...>``, a copy cut off mid-way) the
value is kept as its raw text and the rest still reads.
"""

from __future__ import annotations

import ast
from typing import Any

_MAX_LEN = 256_000
_OPEN = {"(": ")", "[": "]", "{": "}"}


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` where no bracket or quote is open."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def balanced_prefix(text: str) -> tuple[str, bool]:
    """The bracketed expression at the start of ``text`` and whether it was closed."""
    depth = 0
    quote: str | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return text[: i + 1], True
        i += 1
    return text, False


def is_open(text: str) -> bool:
    """Does ``text`` stop inside a bracket or a quote, or right after a comma?"""
    depth = 0
    quote: str | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        i += 1
    return depth > 0 or quote is not None or text.rstrip().endswith(",")


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
    depth = 0
    quote: str | None = None
    for i, c in enumerate(item):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
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
