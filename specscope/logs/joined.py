"""A baseline and speculation in two tables of one paste, joined where they share a
condition (a batch size, a concurrency)::

    The base model speed:

    bs | throughput
    -- | --
    1 | 222.47

    And the results of EAGLE3 combined:

    bs | steps | topk | num_draft | throughput | acc len
    -- | -- | -- | -- | -- | --
    1 | 3 | 3 | 4 | 207.62 | 1.99

The baseline's table is the one under a caption that names it ('The base model speed:',
'### Baseline (no spec)'), or whose rows name it; the others are speculation's when their
caption, their header or their rows name a drafter or its settings (steps, acc len). Each
speculative row meets the baseline's row of the same condition, in the measure both
tables hold (a throughput, a rate of tokens): a configuration at that condition, as a
baseline row among configurations is in one table (``tables.read_table``); in each
condition the fastest configuration, then the slowest condition decides. Tables with or
without outer pipes. A block whose tables join nowhere reads as nothing here, and the
parser reads its lines again as they would have been without the caption
(``parser.LineParser._replay``): a comparison or a table of counts under 'Baseline vs
EAGLE:' is read by its own definition.
"""

from __future__ import annotations

from typing import Any

import regex

from specscope.logs.bare import rows_of
from specscope.logs.definitions import Definition
from specscope.logs.reading import Reading
from specscope.logs.table_shapes import cell_number, key_of

_RULE = regex.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)+\|?\s*$")
# A caption an author takes back or borrows: a target, a paper's figure, a guess.
_HEDGE = regex.compile(
    r"\b(?:expected|should|might|would|could|target|goal|paper|reported|claimed|"
    r"according|estimated?|theoretical|ideal)\b",
    regex.I,
)


def _tables(lines: list[str]) -> list[tuple[str, list[tuple[int, list[str]]]]]:
    """The tables of the block, each with its caption (the last line above its header that
    is no line of a table) and its rows (``bare.rows_of``: outer pipes or none)."""
    rules = [i for i, line in enumerate(lines) if i and _RULE.match(line)]
    out = []
    for n, rule in enumerate(rules):
        end = rules[n + 1] - 1 if n + 1 < len(rules) else len(lines)
        rows = rows_of("\n".join([""] * (rule - 1) + lines[rule - 1 : end]))
        above = [x for x in lines[: rule - 1] if x.strip()]
        caption = above[-1] if above and "|" not in above[-1] else ""
        if len(rows) >= 2:
            out.append((caption.strip(), rows))
    return out


def _column(header: list[str], key: regex.Pattern[str] | None) -> int | None:
    found = [c for c, h in enumerate(header) if key is not None and key.search(h)]
    return found[0] if len(found) == 1 else None


def read_joined_tables(defn: Definition, text: str) -> Reading:
    """The comparison two tables of the block make together (see above); nothing when they
    join nowhere."""
    lines = text.splitlines()
    reading = _joined(defn, _tables(lines))
    if reading.values:
        reading.values["stated"] = lines[reading.values["stated_offset"]].strip()
    return reading


def _joined(defn: Definition, tables: list[tuple[str, list[tuple[int, list[str]]]]]) -> Reading:
    reading = Reading()
    keys = {
        role: key_of(defn, role)
        for role in (
            "base_caption",
            "speculative",
            "negated",
            "join",
            "measure",
            "rate",
            "drafting",
            "depth",
            "width",
        )
    }
    base_key, spec_key, negated = keys["base_caption"], keys["speculative"], keys["negated"]
    join_key, measure_key, width = keys["join"], keys["measure"], keys["width"]
    drafting = keys["drafting"]
    if base_key is None or spec_key is None or join_key is None or measure_key is None:
        return reading

    def names_base(words: str) -> bool:
        if not base_key.search(words) or _HEDGE.search(words):
            return False
        return not spec_key.search(words) or bool(negated is not None and negated.search(words))

    def names_spec(caption: str, header: list[str]) -> bool:
        if _HEDGE.search(caption) or names_base(caption):
            return False
        said = spec_key.search(caption) or any(spec_key.search(h) for h in header)
        return bool(said or any(drafting is not None and drafting.search(h) for h in header))

    bases = [rows for caption, rows in tables if names_base(caption)]
    specs = [rows for caption, rows in tables if names_spec(caption, rows[0][1])]
    if len(bases) != 1 or not specs:
        return reading
    base = bases[0]
    bj, bm = _column(base[0][1], join_key), _column(base[0][1], measure_key)
    if bj is None or bm is None:
        return reading
    base_at = {_norm(cells[bj]): cells for _, cells in base[1:]}
    pairs: list[dict[str, Any]] = []
    units = set()
    for rows in specs:
        header = rows[0][1]
        sj, sm = _column(header, join_key), _column(header, measure_key)
        if sj is None or sm is None or _norm(header[sj]) != _norm(base[0][1][bj]):
            continue
        depth = _column(header, keys["depth"])
        # A sweep of k where nothing else changes: rows whose tree differs too ('topk',
        # 'num_draft') are configurations, not depths.
        widths = [c for c, h in enumerate(header) if width is not None and width.search(h)]
        if any(len({cells[c] for _, cells in rows[1:]}) > 1 for c in widths):
            depth = None
        for i, cells in rows[1:]:
            said = base_at.get(_norm(cells[sj]))
            b = cell_number(said[bm]) if said is not None else None
            s = cell_number(cells[sm])
            if b is None or s is None or ((b[1] or s[1]) and b[1] != s[1]):
                continue
            units |= {u for u in (b[1], s[1], header[sm], base[0][1][bm]) if u}
            k = _whole(cells[depth]) if depth is not None else None
            pairs.append(
                {
                    "offset": i,
                    "row": ", ".join(
                        f"{h} {x}"
                        for h, x in zip(header, cells, strict=True)
                        if x and not measure_key.search(h)
                    ),
                    "column": header[sm],
                    "speculative": s[0],
                    "baseline": b[0],
                    "group": f"{header[sj]} {cells[sj]}",
                }
                | ({"k": k} if k else {})
            )
    if not pairs:
        return reading
    rate = keys["rate"]
    unit = next((m.group(0) for u in units if rate is not None and (m := rate.search(u))), None)
    best: dict[str, dict[str, Any]] = {}
    for p in pairs:  # in each condition the fastest configuration; then the slowest
        kept = best.get(p["group"])
        if (
            kept is None
            or p["speculative"] / p["baseline"] > kept["speculative"] / kept["baseline"]
        ):
            best[p["group"]] = p
    decide = min(best.values(), key=lambda p: p["speculative"] / p["baseline"])
    reading.values = {
        "stated_offset": decide["offset"],
        "stated_spec": decide["speculative"],
        "stated_base": decide["baseline"],
        "stated_unit": unit,
        "stated_direction": None if unit else "rate",
        "stated_rows": pairs,
    }
    return reading


def _norm(cell: str) -> str:
    return " ".join(cell.lower().replace("*", "").split())


def _whole(cell: str) -> int | None:
    n = cell_number(cell)
    return int(n[0]) if n is not None and not n[1] and n[0].is_integer() and n[0] < 65 else None


__all__ = ["read_joined_tables"]
