"""JSON documents pasted over several lines inside a text: a response's ``timings``, a
``meta_info`` or ``sglext.spec_tokens_details`` pretty-printed in a ```json fence of an
issue, the objects of an array one a line (``{...},``), an array opened by a ``[`` line
(``jq`` of TensorRT-LLM's iterations), a document indented (a fence inside a list item) or
quoted (``> `` in a reply).

The lines are not taken from the line parser: they are watched as they go by, and when
the brackets a document opened are closed, the lines between are given whole to the
parser's one reading of JSON documents (``feed_json``), as a one-line document or a whole
pretty-printed file is. While a document is open the parser holds it (``open_line``), so
the bulk reader feeds the lines after it one by one. A document starts on a line that
starts with ``{``, or with ``{`` or an array's ``[`` after an indent or a quote
(``OPENS``; the bulk reader gives the parser such lines: ``bulkplan.prepared``'s
``opens``); a quoted document's lines lose their quote, and a line without it ends the
document. A fence, a document that does not read as JSON or one over the limits ends the
watch without a word.
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
# The first line of a document that does not start the line: an indent or a markdown quote
# (group ``lead``) before ``{``, or before an array's ``[`` alone on its line or followed
# by its first object (a log line's ``[date]`` is no opening). Possessive: white space
# that two parts of the lead could each take made a line of spaces cost its length squared.
OPENS = re.compile(r"(?P<lead>[ \t]*+(?:>[ \t]*+)*+)(?:\{|\[[ \t]*+(?:\{|\r?$))")
# The narrowest terminal a one-line document is taken to have been wrapped by.
_WRAP_MIN = 60
_QUOTE = re.compile(r"[ \t]*>[ \t]?(?:>[ \t]?)*")


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
        self.quoted = False  # the document's lines are quoted ('> '): each loses its quote
        # A one-line document a terminal wrapped: every row but the last as wide as the
        # first, cut anywhere (inside a key or a number), so a row that follows a full one
        # is more of the same line, joined without a line end.
        self.width = 0
        self.full = False  # the last row was as wide as the first
        self.in_string = False  # where the last row was cut, if the rows are wrapped
        self.body = ""

    def lines_held(self) -> list[int]:
        """The first line of a document still open, if one is."""
        return [self.first] if self.lines else []

    def wants(self, raw: str) -> bool:
        """Could the line start or go on with a document (a cheap test)?"""
        if self.lines:
            return True
        if not self.enabled or not raw:
            return False
        return raw[0] == "{" or (raw[0] in " \t>[" and OPENS.match(raw) is not None)

    def see(self, line: int, raw: str) -> None:
        """Watch one line; a document it closes goes to the parser."""
        if not self.lines:
            self._start(line, raw)
            return
        if raw[:1] == "{" and self.depth == 1 and self.lines[0][:1] == "[":
            # An array's objects one a line at the start of theirs: the parser reads each
            # (and this watch each that ends in a comma), never the array again.
            self._drop()
            self._start(line, raw)
            return
        if self.quoted:
            quote = _QUOTE.match(raw)
            if quote is None:  # the quote ended: so did the document
                self._drop()
                return
            raw = raw[quote.end() :]
        wrapped = self.full and not self.quoted
        if (
            not (wrapped or _GOES_ON.match(raw))
            or _FENCE.match(raw)
            or self.size + len(raw) > MAX_INLINE_JSON_BYTES
        ):
            self._drop()
            return
        self.lines.append(raw)
        self.body += raw if wrapped else "\n" + raw
        self.full = wrapped and len(raw.rstrip("\r")) == self.width
        self.size += len(raw) + 1
        if wrapped:
            self.depth, self.in_string = _json_depth(raw, self.depth, self.in_string)
        else:
            self.depth = bracket_depth(raw, self.depth)
        if self.depth == 0:
            first, body = self.first, self.body
            self._drop()
            self.sink.feed_json(first, body, line)
        elif len(self.lines) >= MAX_INLINE_JSON_LINES:
            self._drop()

    def _start(self, line: int, raw: str) -> None:
        opened = OPENS.match(raw) if raw[:1] != "{" else None
        lead = opened["lead"] if opened is not None else ""
        text = raw[len(lead) :].rstrip()
        self.quoted = ">" in lead
        depth = bracket_depth(text)
        if depth > 0 and (text[0] == "[" or not text.endswith(("}", "},"))):
            self.first, self.lines, self.size, self.depth = line, [text], len(text), depth
            self.body = text
            self.width = len(raw.rstrip("\r"))
            self.full = self.width >= _WRAP_MIN and text[0] == "{"
            if self.full:
                self.depth, self.in_string = _json_depth(text, 0, False)
        elif text.endswith("},"):
            self.sink.feed_json(line, text[:-1])  # one object of an array, a line each
        elif lead and depth == 0:
            # A whole document after an indent or a quote (the parser reads one that
            # starts its line itself).
            self.sink.feed_json(line, text)

    def _drop(self) -> None:
        self.lines, self.size, self.depth, self.quoted = [], 0, 0, False
        self.width, self.full, self.in_string, self.body = 0, False, False, ""


_IN_STRING = re.compile(r'["\\]')
_OUTSIDE = re.compile(r'["{}\[\]]')


def _json_depth(text: str, depth: int, in_string: bool) -> tuple[int, bool]:
    """The bracket depth after ``text`` and whether it ends inside a string, from the
    state before it: a row of a wrapped line may be cut inside a string."""
    i = 0
    while True:
        if in_string:
            found = _IN_STRING.search(text, i)
            if found is None:
                return depth, True
            if found.group() == "\\":
                i = found.start() + 2
                continue
            in_string, i = False, found.end()
            continue
        found = _OUTSIDE.search(text, i)
        if found is None:
            return depth, False
        c, i = found.group(), found.end()
        if c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        else:
            depth = max(0, depth - 1)


__all__ = ["MAX_INLINE_JSON_BYTES", "OPENS", "JsonPastes", "JsonSink"]
