"""Bullets an author writes to compare settings, one a line, each its label and what it
measured (``- MTP, p_min=0.75: 19.02 t/s, GPUs approximately 30-70% utilized`` beside
``- MTP disabled: 23.46 t/s``; a sweep of the draft depth ``- mtp_draft_3: 64 tokens,
2.9710s, 21.54 tok/s, 1.00x`` beside ``- baseline_mtp_off: ...``). One bullet naming the
absence of speculation is the baseline of the others that name it, as a baseline row is
among a table's configurations (``tables.read_table``): one ``bench`` row, every pair in
``rows``, the fastest setting deciding (does any help?), a row's draft depth kept as its
``k`` where its label gives one. Read by the roles the definition's ``keys`` give:
``item`` (a bullet's label and the rest), ``rate`` (a decode rate in the rest, groups
``num`` and ``unit``), ``speculative``, ``baseline``, ``negated`` and ``depth`` (over the
label).
"""

from __future__ import annotations

from typing import Any

import regex

from specscope.logs.change_bullets import read_changes
from specscope.logs.definitions import Definition
from specscope.logs.reading import Reading


def _key(defn: Definition, role: str) -> regex.Pattern[str] | None:
    raw = defn.keys.get(role)
    return regex.compile(raw, regex.I | regex.V0) if raw else None


def read_bullets(defn: Definition, text: str) -> Reading:
    """The comparison a block of bullets holds: each speculative setting's rate against the
    one baseline bullet's. Nothing without exactly one baseline and one setting beside it,
    or where the rates' units differ."""
    if "change" in defn.keys:
        return read_changes(defn, text)  # signed changes under a heading (change_bullets.py)
    reading = Reading()
    item, rate = _key(defn, "item"), _key(defn, "rate")
    spec_key, base_key = _key(defn, "speculative"), _key(defn, "baseline")
    negated, depth = _key(defn, "negated"), _key(defn, "depth")
    if item is None or rate is None or spec_key is None or base_key is None:
        return reading
    lines = text.splitlines()
    said: list[tuple[int, str, bool, float, str]] = []
    for i, line in enumerate(lines):
        m = item.fullmatch(line.strip())
        r = rate.search(m.group("rest")) if m is not None else None
        if m is None or r is None:
            continue
        label = " ".join(m.group("label").replace("*", "").replace("`", "").split())
        value = float(r.group("num").replace(",", ""))
        off = bool(base_key.search(label)) and (
            not spec_key.search(label) or bool(negated is not None and negated.search(label))
        )
        if value > 0 and (off or spec_key.search(label)):
            said.append((i, label, off, value, " ".join(r.group("unit").lower().split())))
    bases = [s for s in said if s[2]]
    if len(bases) != 1:
        return reading  # no baseline, or several: which setting is set against which?
    b, _, _, base, unit = bases[0]
    pairs: list[dict[str, Any]] = []
    for i, label, off, value, u in said:
        if off:
            continue
        if u != unit:
            return reading  # rates of other units: not one measure
        pair: dict[str, Any] = {"offset": i, "row": label, "speculative": value, "baseline": base}
        k = depth.search(label) if depth is not None else None
        if k is not None and int(k.group("k")):
            pair["k"] = int(k.group("k"))
        pairs.append(pair)
    if not pairs:
        return reading
    decide = max(pairs, key=lambda p: p["speculative"] / p["baseline"])
    reading.values = {
        "stated": f"{lines[decide['offset']].strip()} / {lines[b].strip()}",
        "stated_offset": decide["offset"],
        "stated_spec": decide["speculative"],
        "stated_base": base,
        "stated_unit": unit,
        "stated_rows": pairs,
    }
    return reading


__all__ = ["read_bullets"]
