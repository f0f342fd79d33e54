"""The shapes of an author's table that ``tables`` and ``bare`` read alike: a cell as the
author meant it (``clean_cell``: emphasis and marks are no part of a value; ``cell_number``;
``ratio_of``: '0.78x', '0.957×', '-22.9%' said of speculation over its baseline); a table of
metric names and values (``transposed``: '| **DSpark vs AR** | **0.957×** |'), read as the
one row of a wide table; and sides paired by name (``by_names``): a column or a row naming
speculation beside one naming its baseline with the same words otherwise ('PR DSpark tok/s'
and 'PR AR tok/s (floor)').
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import regex

from specscope.logs.definitions import Definition

# Emphasis ('**45.36**', '__x__', '`x`') and the marks authors put beside a value ('43*' a
# footnote, '†', '✓', '↓') say how to read it, not what it is. '~' and '≈' are kept: a value
# read from them is approximate (spec_tables drops them where that matters).
_EMPHASIS = regex.compile(r"\*+|`+|(?<![^\W_])__|__(?![^\W_])|[†‡✓✔✗✘↓↑⬇⬆▼▲❌✅⚠️]")


def clean_cell(cell: str) -> str:
    """The cell without emphasis and marks; a cell that is a mark alone ('✓', '❌', a
    switch's state) keeps it."""
    text = " ".join(_EMPHASIS.sub("", cell).split())
    return text or " ".join(cell.replace("*", "").replace("`", "").split())


# A switch's state in a column named for speculation ('| MTP | tok/s |', '| ✗ | 45 |'); on,
# its setting may follow ('on (n=2)', 'yes, k=3': fixtures/world/264) or stand alone ('n=2'
# against 'none'), and a method's name is on too ('| spec | ... |' with 'MTP' against '-').
_SETTING = r"[a-z_]{1,24}\s*=\s*[1-9]\d*"
_ON = regex.compile(
    rf"(?:[✓✔✅]|yes|y|on|true|enabled?)(?:\s*\([^()]{{1,20}}\)|\s*,?\s*{_SETTING})?|{_SETTING}",
    regex.I,
)
_AFTER_NAME = regex.compile(rf"\s*(?:\([^()]{{1,20}}\)|,?\s*{_SETTING})?", regex.I)
_OFF = regex.compile(r"[✗✘❌]|no|n|off|false|disabled?|none|-|—|–|[a-z_]{1,24}\s*=\s*0", regex.I)


def _state(cell: str, spec_key: regex.Pattern[str]) -> int:
    """1 for a switch on, -1 off, 0 for a cell that is neither."""
    if _OFF.fullmatch(cell):
        return -1
    if _ON.fullmatch(cell):
        return 1
    m = spec_key.match(cell)
    return 1 if m is not None and _AFTER_NAME.fullmatch(cell, m.end()) else 0


def switched(rows: list[tuple[int, list[str]]], spec_key: regex.Pattern[str]) -> int | None:
    """A column named for speculation ('MTP', 'spec decode') whose cells are its state
    ('✓' / '✗', 'yes' / 'no', 'on' / 'off'), both states present, its cells made words
    ('with MTP', 'without MTP') that name the sides as a configuration's name does. In place;
    the column's index (the first such), or None."""
    if len(rows) < 3:
        return None
    header, body = rows[0][1], [cells for _, cells in rows[1:] if len(cells) == len(rows[0][1])]
    found: int | None = None
    for c, head in enumerate(header):
        if not spec_key.search(head) or len(_WORDS.findall(head)) > 3:
            continue
        states = [_state(x[c], spec_key) for x in body]
        if 0 not in states and {1, -1} <= set(states):
            for cells, on in zip(body, states, strict=True):
                cells[c] = f"{'with' if on > 0 else 'without'} {head}"
            found = c if found is None else found
    return found


# A draft depth a configuration's name gives ('DFlash `k=7`', 'MTP n_max=4').
_NAMED_DEPTH = regex.compile(
    r"(?<![\w-])(?:k|depth|n[_-]?max|draft[_-]?max|num[_-]?spec\w*)\s*[=:]\s*(\d{1,2})(?!\d)",
    regex.I,
)


def named_depths(labels: list[str]) -> dict[str, int]:
    """The draft depth each speculative configuration names, when the names differ in that
    alone ('DFlash k=1' / 'DFlash k=7': one method swept); {} otherwise ('EAGLE k=3' beside
    'MTP k=1' compares methods, not depths)."""
    found: dict[str, int] = {}
    rests: set[str] = set()
    for label in labels:
        m = _NAMED_DEPTH.search(label)
        if m is None or int(m.group(1)) == 0:
            return {}
        found[label] = int(m.group(1))
        rests.add(" ".join((label[: m.start()] + label[m.end() :]).lower().split()))
    return found if len(rests) == 1 and len(set(found.values())) > 1 else {}


def cells_of(line: str) -> list[str]:
    """A piped table line's cells, as the author meant them (``clean_cell``)."""
    body = line.strip().lstrip(">").strip()
    return [clean_cell(c) for c in body.strip("|").split("|")]


RULE = regex.compile(r"^[\s|:\-]+$")


def key_of(defn: Definition, role: str) -> regex.Pattern[str] | None:
    """The regex a definition's ``keys`` give a role, if it gives one."""
    raw = defn.keys.get(role)
    return regex.compile(raw, regex.I | regex.V0) if raw else None


_RATE = regex.compile(r"(?P<num>\d+(?:\.\d+)?)\s*(?P<pct>%?)")


def rate_of(cell: str) -> float | None:
    """A rate as the author wrote it: a percentage or a fraction of one."""
    m = _RATE.fullmatch(cell.strip())
    if m is None:
        return None
    # (rounded as fields.convert rounds a percentage: 10.28 / 100 is not 0.1028 in binary)
    value = round(float(m.group("num")) / (100.0 if m.group("pct") else 1.0), 12)
    return value if value <= 1.0 else None


# A markdown heading, or a short line ending in a colon, that names a rate of tokens and
# holds no measurement ('### Decode tok/s (median of 3 runs)', 'Raw gen tok/s:'): the unit
# of the table under it.
_CAPTION = regex.compile(
    r"\s*(?:#{1,6}\s+(?=[^\n|]*$)|(?=[^\n|]{1,60}:\s*$))(?![^\n]*\d\s*(?:%|x\b|×|tok|t/s|tps))"
    r"[^\n|]*?(?P<unit>tok(?:en)?s?\s*/\s*s(?:ec)?|\bt/s|\btps)\b[^\n|]*",
    regex.I,
)


# A markdown heading, or a short line ending in a colon, that names acceptance along a
# dimension and holds no measurement ('## Acceptance Length vs Context Length', 'Accept rate
# by prompt length:'): the measure of the table under it, whose header may name only the
# dimension and the runs ('| Context | Eagle3 |'). A heading of acceptance alone is the
# answer's heading (parsers/stated_acceptance_heading.toml), no caption.
_MEASURE_CAPTION = regex.compile(
    r"\s*(?:#{1,6}\s+(?=[^\n|]*$)|(?=[^\n|]{1,80}:\s*$))(?![^\n]*\d\s*(?:%|x\b|×))[^\n|]*?"
    r"\b(?:(?P<length>accept(?:ance|ed)?[\s_-]*len(?:gth)?s?|(?:mean\s+)?acceptance\s+lengths?|"
    r"accepted\s+tokens\s+per\s+step)|(?P<rate>accept(?:ance)?[\s_-]*rates?))\b[^\n|]*?"
    r"\b(?:vs\.?|versus|by|over|across|along|against|per|with)\s+(?:the\s+)?(?:input\s+|prompt\s+|"
    r"sequence\s+)?(?:context|ctx|prompt|sequence|input)(?:[\s_-]*(?:lengths?|len|sizes?|tokens|depths?))?"
    r"\b[^\n|]*",
    regex.I,
)


def is_caption(line: str) -> bool:
    return _CAPTION.fullmatch(line) is not None or _MEASURE_CAPTION.fullmatch(line) is not None


def caption_unit(text: str) -> tuple[str | None, str]:
    """A block's caption's unit and the block with the caption's line left blank (its
    lines keep their offsets); no caption: None and the block as it is. A caption of
    acceptance gives no unit of speed (``caption_measure``)."""
    first, _, rest = text.partition("\n")
    m = _CAPTION.fullmatch(first)
    if m is None and _MEASURE_CAPTION.fullmatch(first) is not None:
        return None, "\n" + rest
    return (m.group("unit"), "\n" + rest) if m is not None else (None, text)


def caption_measure(text: str) -> str | None:
    """The measure of acceptance a block's caption names for its table ('length' or
    'rate'), or None."""
    m = _MEASURE_CAPTION.fullmatch(text.partition("\n")[0])
    return None if m is None else "length" if m.group("length") else "rate"


_CELL_NUMBER = regex.compile(r"[~≈]?\s*(?P<num>\d[\d\s,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z/%]*)")
_REMARK = regex.compile(r"(?<=\S)\s*\([^()]*\)$")
# A value with its spread ('19.27 ± 0.04'): the value is the mean the author gives.
_SPREAD = regex.compile(r"\s*(?:±|\+/-|\+-)\s*\d+(?:\.\d+)?(?=\s*[A-Za-z/%]*\s*$)")
# What a speed was measured at, after '@' ('10.0 +/- 0.4 t/s @ 88.2% +/- 9.7%', its
# acceptance; '45 tok/s @ 4k ctx'): no part of the value.
_AT = regex.compile(r"(?<=\S)\s+@\s[^@]*$")


def cell_number(cell: str) -> tuple[float, str] | None:
    """A cell's value and unit ('~19 tok/s'); a remark in parentheses after it ('~19 tok/s
    (+24%)', '47.9 t/s (draft acceptance 106 / 186)') and a spread are no part of it."""
    m = _CELL_NUMBER.fullmatch(_SPREAD.sub("", _REMARK.sub("", _AT.sub("", cell.strip()))))
    if m is None:
        return None
    try:
        value = float(m.group("num").replace(" ", "").replace(",", ""))
    except ValueError:
        return None
    return (value, m.group("unit")) if value > 0 else None


# A ratio at the start of a cell, the rest the author's words ('0.957× — above 1.0 means
# speculation finally pays', '1.053× (+5.3%)'), or a signed change ('-22.9%', '+36.9 %'; a
# minus sign or a dash too). A range of them ('1.2-1.5x', '+147-152%': runs of one setup)
# stands at its top, the end most favourable to speculation (a slowdown read from it holds
# for every run).
_RATIO = regex.compile(r"[~≈]?\s*(?:\d+(?:\.\d+)?\s*[-–]\s*)?(?P<x>\d+(?:\.\d+)?)\s*[x×](?![\w/])")
_CHANGE = regex.compile(
    r"(?P<sign>[-+\u2212\u2013])\s*(?:(?P<q>\d+(?:\.\d+)?)\s*%?\s*[-–]\s*(?P<top>[-+\u2212]?))?"
    r"(?P<p>\d+(?:\.\d+)?)\s*%"
)
# The author's word that the two sides are even ('parity (noise-level)', 'on par',
# 'break-even', 'no gain'): a ratio of 1, speculation no faster.
_PARITY = regex.compile(
    r"[~≈]?\s*(?:parity|on[\s-]+par|break[\s-]*even|no\s+(?:gain|speed-?up|benefit))(?![\w-])",
    regex.I,
)


def ratio_of(cell: str) -> float | None:
    """The speed with speculation over its baseline's that a cell states: a multiple
    ('0.78x'), a signed change ('-22.9%') or parity in words; None for anything else."""
    text = cell.strip()
    m = _RATIO.match(text)
    if m is not None:
        return float(m.group("x")) or None
    if _PARITY.match(text) is not None:
        return 1.0
    c = _CHANGE.match(text)
    if c is None:
        return None
    first = 1.0 if c.group("sign") == "+" else -1.0
    ends = [first * float(c.group("p"))]
    if c.group("q") is not None:  # a range: its second end keeps the first's sign unless
        # it says its own ('-5-+3%')
        second = first if not c.group("top") else 1.0 if c.group("top") == "+" else -1.0
        ends = [first * float(c.group("q")), second * float(c.group("p"))]
    return 1.0 + max(ends) / 100.0


def says_parity(cell: str) -> bool:
    """The cell says the sides are even in words (``_PARITY``)."""
    return _PARITY.match(cell.strip()) is not None


def agrees(said: float, spec: float, base: float) -> bool:
    """Does the ratio the author wrote give these two sides (within its rounding)?"""
    return base > 0 and abs(said - spec / base) <= 0.011 * max(1.0, said)


_METRIC_HEAD = regex.compile(
    r"metrics?|measures?|items?|keys?|stats?|statistics?|名称|指标", regex.I
)
_VALUE_HEAD = regex.compile(r"values?|results?|numbers?|measured|数值|结果", regex.I)


def transposed(rows: list[tuple[int, list[str]]]) -> list[tuple[int, str, str]] | None:
    """A metric/value table (two columns, a metric a row: '| metric | value |') as its items
    (line, metric, value), read as the one row of a wide table; None for another table."""
    if len(rows) < 3 or len(rows[0][1]) != 2:
        return None
    head, value = rows[0][1]
    if not (_METRIC_HEAD.fullmatch(head.strip()) and _VALUE_HEAD.fullmatch(value.strip())):
        return None
    return [(i, cells[0], cells[1]) for i, cells in rows[1:] if len(cells) == 2]


_VS = regex.compile(r"^(?P<a>.+?)\s+(?:vs\.?|versus|over|against|/)\s+(?P<b>.+)$", regex.I)
_WORDS = regex.compile(r"[^\W_]+")


def by_names(
    items: list[tuple[int, str, str, str]],
    keys: dict[str, regex.Pattern[str] | None],
) -> dict[str, Any] | None:
    """Sides paired by name: among items (line, name, cell, row), a name of speculation
    (``speculative``) and one of its baseline (``baseline``, or speculation ``negated``)
    whose other words are the same ('PR DSpark tok/s', 'PR AR tok/s (floor)'), both cells
    rates (``rate``, in the name or the cell), in the same row. A ratio the author states
    between them ('DSpark vs AR | 0.957×') must agree with a pair; without a pair, a ratio
    under 1 is the author's claim of a slowdown. None when nothing pairs."""
    spec_key, base_key, negated, rate = (keys.get(k) for k in ("spec", "base", "neg", "rate"))
    if spec_key is None or base_key is None or rate is None:
        return None

    def is_base(name: str) -> bool:
        if not base_key.search(name):
            return False
        return not spec_key.search(name) or bool(negated is not None and negated.search(name))

    def rest(name: str) -> list[str]:
        bare = _REMARK.sub("", name)
        for key in (negated, base_key, spec_key):
            bare = key.sub(" ", bare) if key is not None else bare
        return sorted(_WORDS.findall(bare.lower()))

    sides = [x for x in items if not _VS.match(x[1])]
    bases = [x for x in sides if is_base(x[1])]
    specs = [x for x in sides if spec_key.search(x[1]) and not is_base(x[1])]
    pairs: list[dict[str, Any]] = []
    for b in bases:
        same = [s for s in specs if s[3] == b[3] and rest(s[1]) == rest(b[1])]
        base, spec = cell_number(b[2]), cell_number(same[0][2]) if len(same) == 1 else None
        if base is None or spec is None:
            continue
        if not any(rate.search(u) for u in (b[1], same[0][1], base[1], spec[1])):
            continue
        s = same[0]
        pairs.append(
            {
                "offset": s[0],
                "row": s[3] or s[1],
                "column": s[1],
                "speculative": spec[0],
                "baseline": base[0],
            }
        )
    said = []
    for line, name, cell, _ in items:
        m = _VS.match(name)
        r = ratio_of(cell)
        if m and r and spec_key.search(m["a"]) and is_base(m["b"]) and not is_base(m["a"]):
            said.append((line, name, cell, r))
    if said:
        # The pairs the author's own ratio is of (a PR's against its baseline, not main's);
        # none: the ratio is of other sides than these.
        agreed = [
            p for p in pairs if any(agrees(x[3], p["speculative"], p["baseline"]) for x in said)
        ]
        if pairs and not agreed:
            return None
        pairs = agreed
    if pairs:
        decide = min(pairs, key=lambda p: p["speculative"] / p["baseline"])
        return {
            "stated_offset": decide["offset"],
            "stated_spec": decide["speculative"],
            "stated_base": decide["baseline"],
            "stated_unit": _unit(decide, items, rate),
            "stated_rows": pairs,
        }
    slower = [x for x in said if x[3] < 0.95]
    if len(said) != 1 or not slower:
        return None
    line, name, cell, r = slower[0]
    return {"stated_offset": line, "stated_claim": cell, "stated_ratio": r, "stated_what": name}


def _unit(
    pair: dict[str, Any], items: list[tuple[int, str, str, str]], rate: regex.Pattern[str]
) -> str | None:
    for _, name, cell, _ in items:
        if name == pair["column"]:
            for text in (name, n[1] if (n := cell_number(cell)) else ""):
                if (m := rate.search(text)) is not None:
                    return m.group(0)
    return None


# A column of the speedup alone ('| Config | Speedup |', 'MTP speedup vs baseline'): over the
# baseline, unless it names another reference ('speedup vs main', a version).
_SPEEDUP = regex.compile(
    r"(?:\bspeed-?ups?\b|加速比?)(?:.*?\b(?:vs\.?|versus|over|against|relative\s+to|"
    r"compared\s+(?:to|with))\s+(?P<ref>.+))?",
    regex.I,
)
# A row of a depth: a sweep whose best depth pays is k_too_large's, not a slowdown.
_DEPTH = regex.compile(r"\b(?:k|n|depth|draft\w*|num_spec\w*|steps?|block)\s*[=:]?\s*\d", regex.I)


def speedups(
    rows: list[tuple[int, list[str]]],
    keys: dict[str, regex.Pattern[str] | None],
) -> dict[str, Any] | None:
    """A column of the author's speedups alone, no sides beside it: each row naming
    speculation (or the column naming it) a configuration at the ratio its cell states
    ('0.78x', '-5%', '0.92'); the slowest, under 0.95, is the author's claim of a slowdown
    with the speedup it gives. Nothing when speculation is named nowhere, the reference is
    not the baseline, every ratio pays, or a sweep of depths has one that pays."""
    spec_key, base_key = keys.get("spec"), keys.get("base")
    if spec_key is None or base_key is None or len(rows) < 2:
        return None
    header, body = rows[0][1], rows[1:]
    found: list[tuple[float, int, str, str]] = []
    for c, head in enumerate(header):
        m = _SPEEDUP.fullmatch(head.strip()) or _SPEEDUP.search(head)
        if not c or (m is None and not _set_against(head, spec_key, base_key)):
            continue
        if m is not None and m["ref"] and not base_key.search(m["ref"]):
            continue
        for i, cells in body:
            if len(cells) != len(header) or base_key.search(" ".join(cells[:c])):
                continue
            if not (spec_key.search(" ".join(cells[:c])) or spec_key.search(head)):
                continue
            n = cell_number(cells[c])
            r = ratio_of(cells[c]) or (n[0] if n is not None and not n[1] else None)
            if r is not None:
                found.append((r, i, cells[c], head))
    if not found or (
        any(_DEPTH.search(" ".join(rows[k][1][:1])) for k in range(1, len(rows)))
        and max(found)[0] >= 1.0
    ):
        return None
    r, line, cell, head = min(found)
    # (under 0.95 a slowdown past one run's noise; parity the author's own word for none)
    if r >= 0.95 and not (r <= 1.0 and says_parity(cell)):
        return None
    return {"stated_offset": line, "stated_claim": cell, "stated_ratio": r, "stated_what": head}


def _set_against(head: str, spec_key: regex.Pattern[str], base_key: regex.Pattern[str]) -> bool:
    """A column named for speculation set against its baseline ('MTP vs plain decode',
    'EAGLE-3 over no-spec'): its cells are the one's speed over the other's."""
    m = _VS.match(head.strip())
    return (
        m is not None
        and spec_key.search(m["a"]) is not None
        and base_key.search(m["a"]) is None
        and base_key.search(m["b"]) is not None
    )


# The statistics a header names for the runs in its cells ('Decode tok/s (mean / median /
# max)'): the central one is the row's value, the median before the mean.
_STATISTICS = regex.compile(r"\(([^()]*/[^()]*)\)")
_CENTRAL = ("median", "p50", "mean", "avg", "average")


def named_statistic(head: str, cell: str) -> tuple[float, str] | None:
    """A cell's value where it holds one number, or the central statistic its header names
    among the numbers apart by '/' ('234.7 / 255.5 / 322.6' under '(mean / median / max)':
    255.5); None for runs the header does not name (which of them would be a guess)."""
    parts = [x.strip() for x in cell.split("/")]
    if len(parts) == 1:
        return cell_number(cell)
    m = _STATISTICS.search(head)
    names = [x.strip().lower() for x in m.group(1).split("/")] if m else []
    if len(names) != len(parts):
        return None
    at = next((names.index(c) for c in _CENTRAL if c in names), None)
    return cell_number(parts[at]) if at is not None else None


# A column of the load a row ran at ('conc', 'batch size', 'ISL'), its cells a count or a
# size ('64', '32K'; not an outcome such as '4.52×').
_LOAD_HEAD = regex.compile(
    r"\b(?:conc\w*|batch(?:[\s_-]*size)?|bs|ctx|context|isl|osl|input\w*|prompt\w*|"
    r"requests?|users?|clients?|np|parallel\w*|streams?)\b",
    regex.I,
)
_LOAD = regex.compile(r"\s*\d[\d,]*\s*[kKmM]?\s*")
# A cell of words, no measurement ('tree', 'chain'; not '38ms', '-', '53.5%').
_NAMED = regex.compile(r"[^\d|]*[^\W\d_][^\d|]*")


def sweep_alone(
    header: list[str],
    rows: list[tuple[int, list[str]]],
    depth: int,
    k_of: Callable[[str], int | None],
    rated: Callable[[str], bool],
) -> list[dict[str, Any]]:
    """A sweep of the draft depth with no row without drafting ('| Spec | k | Decode tok/s
    |' with 'DFlash2 | 7' and 'DFlash2 | 5'): the rows of one configuration (the cells
    before the depth's column, one at least) at two depths or more, each a pair of its k
    and its speed in the first column of a rate after the depth's (no baseline: speeds of
    one drafter set side by side, k_too_large's question, never no_speedup's). [] where no
    configuration is swept."""
    rate = next((c for c, h in enumerate(header) if c > depth and rated(h)), None)
    if rate is None:
        return []
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    loads = {c for c, h in enumerate(header) if c not in (depth, rate) and _LOAD_HEAD.search(h)}
    for i, cells in rows:
        k, said = k_of(cells[depth]), named_statistic(header[rate], cells[rate])
        if k is None or said is None:
            continue
        # (a depth first: the table's one configuration, rows apart by a name in a cell)
        group = tuple(cells[:depth]) or tuple(
            x for c, x in enumerate(cells) if c not in (depth, rate) and _NAMED.fullmatch(x)
        )
        # (a load beside the depth, 'conc | 1' against 'conc | 64', sets rows apart too)
        load = tuple(
            f"{header[c]} {cells[c]}"
            for c in range(len(cells))
            if c in loads and _LOAD.fullmatch(cells[c])
        )
        group += load
        groups.setdefault(group, []).append(
            {
                "offset": i,
                "row": " / ".join(cells[: depth + 1]),
                "column": header[rate],
                "speculative": said[0],
                "k": k,
            }
            | ({"group": " / ".join(group)} if group else {})
        )
    return [p for ps in groups.values() if len({p["k"] for p in ps}) >= 2 for p in ps]


# Milliseconds named in a header ('TPOT (ms)', 'ITL ms').
_MS = regex.compile(r"(?<![\w/])ms(?![\w/])", regex.I)


def in_ms(head: str, cells: list[str]) -> bool:
    """A column of times in milliseconds: 'ms' in its header, or after every cell's number
    ('2.91ms'); a time without its unit could be seconds (or a rate) and is not read."""
    if _MS.search(head):
        return True
    return bool(cells) and all((n := cell_number(c)) is not None and n[1] == "ms" for c in cells)


# A measure of time a row's label names: a latency or milliseconds ('decode TPOT (ms / output
# token)', 'TTFT (ms)', 'E2E latency'), whose lower value is the faster.
_TIME_LABEL = regex.compile(
    r"\b(?:TPOT|ITL|TBT|TTFT|E2E|latency|ms)\b|\((?:s|sec|seconds)\)|\bms\s*/\s*tok", regex.I
)


def names_time(label: str) -> bool:
    return _TIME_LABEL.search(label) is not None


_LABEL_UNIT = regex.compile(r"\(([^()]*)\)\s*$")


def unit_said(label: str, unit_of: Callable[[str], str | None]) -> str | None:
    """The unit a row's label gives at its end, in parentheses or not ('Output token
    throughput (tok/s)', 'Output tok/s'); a label that only names a test ('tg128') gives
    none."""
    m = _LABEL_UNIT.search(label)
    if m is not None:
        return unit_of(m.group(1))
    m = _LABEL_END.search(label)
    return unit_of(m.group(1)) if m is not None else None


# A unit of tokens a second after the measure's words ('Output tok/s', 'decode tokens/s').
_LABEL_END = regex.compile(r"(?<=\w\s+)((?:tok(?:en)?s?|t)\s*/\s*s(?:ec)?)\s*$", regex.I)


# A column named by a process of generation and no unit ('| config | prefill | decode |'),
# beside one of the prompt's processing: both are speeds, as engines print them ('prefill:
# 771 t/s, decode: 19 t/s'), when the prompt's is the faster (many tokens a forward); a table
# of times would give decode the longer time for fewer tokens, and is not read so.
_DECODE_HEAD = regex.compile(r"(?:decode|decoding|generation|gen|tg|eval)(?:\s+speed)?", regex.I)
_PREFILL_HEAD = regex.compile(
    r"(?:prefill|pp|prompt(?:\s+(?:processing|eval))?)(?:\s+speed)?", regex.I
)


def process_rates(
    header: list[str], base_row: list[str], measured: Callable[[str], tuple[float, str] | None]
) -> list[int]:
    """The columns of decode speed a unitless table of processes holds (see above)."""
    prefill = [c for c, h in enumerate(header) if _PREFILL_HEAD.fullmatch(h.strip())]
    decode = [c for c, h in enumerate(header) if _DECODE_HEAD.fullmatch(h.strip())]
    if len(prefill) != 1 or not decode or len(base_row) != len(header):
        return []
    p = measured(base_row[prefill[0]])
    out = []
    for c in decode:
        d = measured(base_row[c])
        if p is not None and d is not None and not p[1] and not d[1] and p[0] > d[0]:
            out.append(c)
    return out


__all__ = [
    "RULE",
    "agrees",
    "by_names",
    "caption_measure",
    "caption_unit",
    "cell_number",
    "cells_of",
    "clean_cell",
    "in_ms",
    "is_caption",
    "key_of",
    "named_depths",
    "named_statistic",
    "names_time",
    "process_rates",
    "rate_of",
    "ratio_of",
    "says_parity",
    "speedups",
    "sweep_alone",
    "switched",
    "transposed",
    "unit_said",
]
