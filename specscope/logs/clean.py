"""Strip what the world wraps around log lines: colour, container and collector prefixes,
JSON envelopes, markdown. What is left is the text the server wrote."""

from __future__ import annotations

import json
from dataclasses import dataclass

import regex

from specscope.logs.box_tables import unboxed

# Colour and terminal escapes (the pattern is shared with the bulk reader's polars pass).
ANSI = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])"
_ANSI = regex.compile(ANSI)
# Escapes that lost their ESC byte on the way into an issue ("[0;36m(APIServer ...").
# A reset without digits ("[m") is one only where no name goes on: "[metrics.py:96]" and
# "[model_runner.py:1]" are vLLM's headers.
_BARE_SGR = regex.compile(r"\[(?:\d{1,3}(?:;\d{1,3})*m(?=\S|$)|m(?![\w.]))")
_RFC3339 = regex.compile(
    r"(?P<year>\d{4})-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
)

# One leading decoration each; they are peeled repeatedly because they stack
# (`docker compose logs -t`: name | timestamp message).
_PREFIXES = regex.compile(
    r"""^(?:
        \s*(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)
            (?:\s+(?:stdout|stderr)\s+[FP])?\s+                      # docker -t, kubectl, CRI
      | \s*(?P<ts>\d{4}-\d\d-\d\d\ \d\d:\d\d:\d\d(?:[.,]\d+)?)\s*\|\s?  # collector stamp
      | \s*\[pod/[^\]\s]+\]\s                                           # kubectl --prefix
      | \s*[A-Za-z0-9][\w.-]{0,80}\s*\|\s?(?!\s*\|)                     # compose service
      | \s*(?:>\s?)+                                                    # markdown quote
      # a list item holding a record (its own label; '- Speculative accept rate: 48.5%' is
      # an author's bullet, which the bullets definition reads with its '- ')
      | \s*(?:[-*+]|\d+\.)\s+(?=\S)
          (?=.{0,12}(?:\(|INFO|WARN|ERROR|DEBUG|Engine|SpecDecoding|Speculative\ metrics))
    )""",
    regex.VERBOSE,
)
_FENCE = regex.compile(r"\s*(?:`{3,}|~{3,})[\w+-]*\s*$")
_QUOTE = regex.compile(r"\s*(?:>\s?)+")
_MARKDOWN = regex.compile(r"\*\*|`+|</?(?:code|pre|details|summary)>")


_FULL_WIDTH = str.maketrans({"\uff1a": ": ", "\uff0c": ", "})


@dataclass(frozen=True, slots=True)
class CleanLine:
    text: str
    year: int | None = None  # from a container or collector timestamp, when there is one


def _from_json(text: str) -> CleanLine | None:
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    message = obj.get("log", obj.get("message", obj.get("msg")))
    if not isinstance(message, str):
        return None
    year = None
    for key in ("time", "timestamp", "@timestamp", "asctime"):
        stamp = obj.get(key)
        if isinstance(stamp, str) and (m := _RFC3339.match(stamp)):
            year = int(m.group("year"))
            break
    # vLLM's JSON formatter keeps the header in fields; rebuild it so the envelope reads.
    level, asctime = obj.get("levelname"), obj.get("asctime")
    if isinstance(level, str) and isinstance(asctime, str):
        m = regex.match(r"(?:\d{4}-)?(\d\d)-(\d\d)[ T](\d\d:\d\d:\d\d)", asctime)
        if m:
            proc = obj.get("processName")
            pid = obj.get("process")
            head = f"({proc} pid={pid}) " if proc and pid else ""
            message = f"{head}{level} {m[1]}-{m[2]} {m[3]} [{obj.get('name', 'log')}:0] {message}"
    return CleanLine(message.rstrip("\r\n"), year)


def clean_line(raw: str) -> CleanLine:
    """The text of one physical line (already split at ``\\r``) without its wrappings."""
    stripped = raw.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        parsed = _from_json(stripped)
        if parsed is not None:
            inner = clean_line(parsed.text)
            return CleanLine(inner.text, parsed.year or inner.year)
    text = raw
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "[" in text and "m" in text:
        text = _BARE_SGR.sub("", text)
    year = None
    for _ in range(6):
        m = _PREFIXES.match(text)
        if not m or m.end() == 0:
            break
        if m.group("ts") and year is None:
            year = int(m.group("ts")[:4])
        text = text[m.end() :]
    if _FENCE.match(text):
        return CleanLine("", year)  # a markdown fence line (```log) holds no record
    if "`" in text or "*" in text or "<" in text:
        text = _MARKDOWN.sub("", text)
    if "\uff1a" in text or "\uff0c" in text:
        # A paste through a CJK input method: full-width colon and comma.
        text = text.translate(_FULL_WIDTH)
    if "+" in text or not text.isascii():
        text = unboxed(text)  # a table drawn with boxes, made pipes (box_tables.py)
    return CleanLine(text.rstrip(), year)


def unquoted(raw: str) -> str:
    """A line without the markdown quote a reply put before it ('> 1 | 222.47'): for rows
    read as pasted, where a container's prefix is a cell (``parser._RAW_ROWS``)."""
    m = _QUOTE.match(raw)
    return raw[m.end() :] if m else raw


__all__ = ["CleanLine", "clean_line", "unquoted"]
