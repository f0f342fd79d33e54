"""Signed speed changes an author lists under a heading that sets speed against something
(parsers/stated_speedup_changes.toml: 'Seeded prompt-class speed vs accepted:' over '- natural
chat: -8.77%'): a slowdown of speculation where no bullet gained, the fastest bullet deciding
(as ``bullets.read_bullets`` decides among settings); nothing where any did, where the heading
names another build or method, or where a value has no sign (a level, not a change)."""

from __future__ import annotations

import regex

from specscope.logs.definitions import Definition
from specscope.logs.reading import Reading

_MINUS = "-\u2212\u2013"  # an ASCII hyphen, a Unicode minus, an en dash


def read_changes(defn: Definition, text: str) -> Reading:
    """The slowdown a heading's list of signed changes states, or nothing."""
    reading = Reading()
    keys = {k: regex.compile(v, regex.I) for k, v in defn.keys.items()}
    heading, change, void = keys.get("heading"), keys.get("change"), keys.get("void")
    if heading is None or change is None or void is None:
        return reading
    lines = text.splitlines()
    head = heading.fullmatch(lines[0].strip()) if lines else None
    if head is None or not _against_nothing_else(keys, head.group("label")):
        return reading  # (a heading of its own: '- chat: -4%' alone is a bullet, no list)
    changes: list[tuple[int, float]] = []
    for i, line in enumerate(lines[1:], start=1):
        m = change.fullmatch(line.strip())
        if m is None or void.search(m.group("rest")):
            continue  # (no change, or one its author voids: 'invalid as a speed win')
        sign = -1.0 if m.group("sign") in _MINUS else 1.0
        changes.append((i, sign * float(m.group("num"))))
    if not changes or max(c for _, c in changes) > 0:
        return reading  # nothing measured, or a bullet that gained: no slowdown to state
    offset, best = max(changes, key=lambda c: c[1])
    reading.values = {
        "stated": f"{head.group('label').strip()}: / {lines[offset].strip().lstrip('-*• ')}",
        "stated_offset": offset,
        "stated_claim": lines[offset].strip(),
        "stated_cut": -best,
    }
    return reading


def _against_nothing_else(keys: dict[str, regex.Pattern[str]], label: str) -> bool:
    """The heading sets speed against speculation's absence or nothing named: not against
    another build, version or method ('speed vs v0.10.1', 'throughput vs MTP')."""
    against, other, absence = keys.get("against"), keys.get("other"), keys.get("absence")
    if against is None or other is None or absence is None:
        return False
    m = against.search(label)
    ref = label[m.end() :] if m is not None else ""
    return other.search(ref) is None or absence.search(ref) is not None


__all__ = ["read_changes"]
