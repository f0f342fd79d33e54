"""Redaction of what a report must not leak: tokens, keys, passwords, home paths, and,
on request, hosts and IP addresses. Every string that came from a log or a store goes
through one ``Redactor`` before it reaches a report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import regex

_SECRET_ARG = (
    r"api[_-]?key|hf[_-]?token|token|access[_-]?token|auth[_-]?token|password|passwd|secret|"
    r"client[_-]?secret|private[_-]?key"
)
# (what, pattern, replacement): the patterns run in this order.
_RULES: tuple[tuple[str, regex.Pattern[str], str], ...] = (
    ("token", regex.compile(r"\bhf_[A-Za-z0-9]{8,}"), "hf_***"),
    ("token", regex.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), "sk-***"),
    ("token", regex.compile(r"\bgh[pousr]_[A-Za-z0-9]{16,}"), "gh*_***"),
    ("token", regex.compile(r"(?i)\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 ***"),
    (
        "token",
        regex.compile(
            r"(?i)(\b(?:" + _SECRET_ARG + r")['\"]?\s*[:=]\s*)(\[\s*)?"
            r"(['\"]?)(?!\*\*\*)[^'\"\s,\]\)}]+\3"
        ),
        r"\1\2\3***\3",
    ),
    ("token", regex.compile(r"(?i)(--(?:" + _SECRET_ARG + r")[=\s]+)(?!\*\*\*)\S+"), r"\1***"),
    (
        "credential",
        regex.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"),
        r"\1***:***@",
    ),
    ("path", regex.compile(r"(/home/|/Users/|/usr/home/)(?!~)[^/\s'\"]+"), r"\1~"),
    ("path", regex.compile(r"(?i)\b([A-Z]:\\Users\\)[^\\\s'\"]+"), r"\1~"),
)
_HOST_RULES: tuple[tuple[str, regex.Pattern[str], str], ...] = (
    ("host", regex.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), "x.x.x.x"),
    (
        "host",
        regex.compile(
            r"(?i)(\b[a-z][a-z0-9+.-]*://)(?:[^/\s:@]+(?::[^/\s@]*)?@)?"
            r"[a-z0-9.-]+"
        ),
        r"\1host",
    ),
)


@dataclass
class Redactor:
    """Replaces secrets (and, with ``hosts``, hosts and IPs) and counts what it replaced."""

    enabled: bool = True
    hosts: bool = False
    counts: Counter[str] = field(default_factory=Counter)
    # Source paths the store knows, as the report shows them (relative, or the file name).
    known_paths: dict[str, str] = field(default_factory=dict)

    def __call__(self, text: str | None) -> str | None:
        if text is None or not self.enabled:
            return text
        for path in sorted(self.known_paths, key=len, reverse=True):
            if path in text and path != self.known_paths[path]:
                text = text.replace(path, self.known_paths[path])
        for what, pattern, replacement in _RULES + (_HOST_RULES if self.hosts else ()):
            text, n = pattern.subn(replacement, text)
            if n:
                self.counts[what] += n
        return text

    def summary(self) -> str:
        if not self.enabled:
            return "Redaction was off (--no-redact): this report may hold secrets."
        if not self.counts:
            return "Redaction found nothing to hide."
        parts = [f"{n} {what}{'s' if n != 1 else ''}" for what, n in sorted(self.counts.items())]
        return "Redacted " + ", ".join(parts) + "."


__all__ = ["Redactor"]
