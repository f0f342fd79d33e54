"""JSON documents pasted over several lines inside a text: a response's ``timings``, a
``meta_info`` or ``sglext.spec_tokens_details`` pretty-printed in a ```json fence of an
issue, the objects of an array one a line (``{...},``).

The lines are not taken from the line parser: they are watched as they go by, and when
the brackets a document opened are closed, the lines between are given whole to the
parser's one reading of JSON documents (``feed_json``), as a one-line document or a whole
pretty-printed file is. While a document is open the parser holds it (``open_line``), so
the bulk reader feeds the lines after it one by one. A document starts on a line that
starts with ``{`` (the lines the bulk reader always gives the parser: one that opens with
``[``, an indent or a quote it passes over, so neither reading takes it); a fence, a
document that does not read as JSON or one over the limits ends the watch without a word.
"""

from __future__ import annotations

import re
from typing import Protocol

from specscope.logs.pyrepr import bracket_depth

# Pasted documents are small (a response, a page of iterations); a file that is one
# document is read whole by the parser up to limits.MAX_JSON_DOC_BYTES.
MAX_INLINE_JSON_BYTES = 16 << 20
MAX_INLINE_JSON_LINES = 200_000
_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})")
# How a line of a pretty-printed document begins: an indent, a key, a bracket or a value.
# A log line (a header, a word) ends the watch: a brace that opened no document (a JSON
# log line cut off) holds nothing up.
_GOES_ON = re.compile(r'[\s"{}\[\],\d-]|true|false|null|$')


class JsonSink(Protocol):
    """The parser's reading of a JSON document (``LineParser.feed_json``)."""

    def feed_json(self, line: int, text: str, end_line: int | None = None) -> bool | None: ...


class JsonPastes:
    """Watches a text's lines for JSON documents spread over several of them."""

    def __init__(self, sink: JsonSink, enabled: bool) -> None:
        self.sink = sink
        self.enabled = enabled  # some definition reads JSON documents
        self.first = 0
        self.lines: list[str] = []
        self.size = 0
        self.depth = 0

    def lines_held(self) -> list[int]:
        """The first line of a document still open, if one is."""
        return [self.first] if self.lines else []

    def wants(self, raw: str) -> bool:
        """Could the line start or go on with a document (a cheap test)?"""
        return bool(self.lines) or (self.enabled and raw.startswith("{"))

    def see(self, line: int, raw: str) -> None:
        """Watch one line; a document it closes goes to the parser."""
        if not self.lines:
            self._start(line, raw)
            return
        if (
            not _GOES_ON.match(raw)
            or _FENCE.match(raw)
            or self.size + len(raw) > MAX_INLINE_JSON_BYTES
        ):
            self._drop()
            return
        self.lines.append(raw)
        self.size += len(raw) + 1
        self.depth = bracket_depth(raw, self.depth)
        if self.depth == 0:
            first, body = self.first, "\n".join(self.lines)
            self._drop()
            self.sink.feed_json(first, body, line)
        elif len(self.lines) >= MAX_INLINE_JSON_LINES:
            self._drop()

    def _start(self, line: int, raw: str) -> None:
        text = raw.rstrip()
        if text.endswith("},"):
            self.sink.feed_json(line, text[:-1])  # one object of an array, a line each
        elif not text.endswith("}") and bracket_depth(text) > 0:
            self.first, self.lines, self.size = line, [text], len(text)
            self.depth = bracket_depth(text)

    def _drop(self) -> None:
        self.lines, self.size, self.depth = [], 0, 0


__all__ = ["MAX_INLINE_JSON_BYTES", "JsonPastes", "JsonSink"]
