"""What the bulk reader (``specscope.logs.bulk``) knows before it reads a line: the log
header it takes as it is, the grammar's plain shapes and literals (``BulkGrammar``), and a
block as both of its classifiers hand it over (``Prepared``): the compiled scanner
(``specscope.logs.core``) and, without it, polars (``specscope.logs.bulk_polars``).

The patterns here are the reference: the polars classifier runs them, the compiled one
parses the same headers by hand (``rust/src/header.rs``, checked against them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import polars as pl
import regex

from specscope.logs.definitions import Definition, PlainShape
from specscope.logs.grammar import Envelope, Grammar
from specscope.logs.limits import max_k
from specscope.logs.plain import FRAME_DERIVATIONS, contradicts, convert

LEVELS = "DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL"
# The vLLM logger's header as it prints it; anything looser is left to the line parser.
HEAD = r"^\((?P<_proc>[A-Za-z][A-Za-z0-9_]{0,60}) pid=(?P<_pid>[0-9]{1,9})\) "
# The dated header up to the message, which must start with a non-space: the message is
# the rest of the line, cut off by length (capturing it would scan the whole line again).
DATED = (
    r"(?P<_head>"
    + HEAD
    + rf"(?P<_level>{LEVELS}) (?P<_month>0[1-9]|1[0-2])-(?P<_day>0[1-9]|[12][0-9]|3[01]) "
    r"(?P<_time>(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]) \[[A-Za-z0-9_./-]{1,200}:[0-9]{1,6}\] "
    r")\S"
)
UNDATED = HEAD + r"(?P<_body>\S.*)$"
# What the line parser would clean away or read as more than one line's worth: colour,
# markdown, full-width punctuation, trailing space, a carriage return.
WRAPPED = ("[\x1b\r`*<\uff1a\uff0c]", r"\s$")  # two searches: far faster than one
# Of the prefixes ``clean.clean_line`` peels, those the bulk reader peels too (the rest go
# to the line parser): a compose service name, a docker/kubectl/CRI timestamp (the year).
PREFIX = (
    r"^(?:[A-Za-z0-9][\w.-]{0,80}\s*\|\s?)?"
    r"(?:(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"(?:\s+(?:stdout|stderr)\s+[FP])?\s+)?"
)
# A second header inside the message (records glued on one line): a process's `pid=`, a
# level and a date, a bracketed timestamp (SGLang's envelope); or a parenthesis left open
# at the end, which ``grammar.unfinished`` holds for the next line. Other brackets (a
# request's `SamplingParams(n=1, ...)`, `prompt_token_ids: [1, 2]`) hold none of these.
INNER_HEAD = rf"pid=|\[\d{{4}}-\d\d-\d\d|\([^)]*$|(?:{LEVELS})\s+\d\d-\d\d"

SLOW, QUIET, ENVELOPE, RECORD = 0, 1, 2, 3
REST = -1  # the rest of a record wrapped over the line before (the core's ``wrapped``)


@dataclass(frozen=True)
class Shape:
    definition: Definition
    shape: PlainShape
    prefix: str  # the literal start of the message, to skip the regex on other lines
    pattern: str
    names: frozenset[str]  # its groups


def literal_prefix(pattern: str) -> str:
    out = []
    for ch in pattern:
        if ch in "\\()[]{}.*+?|^$":
            break
        out.append(ch)
    return "".join(out)


def escape(text: str) -> str:
    return "".join("\\" + c if c in "\\.^$|?*+()[]{}-&~#" or c.isspace() else c for c in text)


class BulkGrammar:
    """The grammar's plain shapes, and the literals that make a line worth a closer look."""

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.shapes = [
            Shape(
                d,
                s,
                literal_prefix(s.pattern),
                "^(?P<__m>)" + s.pattern + "$",
                frozenset(regex.findall(r"\(\?P<(\w+)>", s.pattern)),
            )
            for d in grammar.definitions
            for s in d.plain
        ]
        self.max_k = max_k()
        self.literals = list(grammar.literals)
        self.prefixes = sorted(grammar.literal_prefixes, key=len, reverse=True)
        self.ends_in_literal = (
            "(?:" + "|".join(escape(p) for p in self.prefixes) + ")$" if self.prefixes else None
        )
        # Bulk reading needs every definition to be found by a literal (none always looked for).
        self.usable = (
            bool(self.shapes) and not grammar.always and all(e.literals for e in grammar.events)
        )
        self.compiled: Any = None  # the core's scanner of this plan, built when first asked


# Plans kept for the process (issue 17: a paste's ingest paid ~0.03 s to build them and the
# core's scanner again), keyed by the definitions' identities and the list limit they were
# built with; a plan holds its definitions alive, so an identity is not reused while kept.
_PLANS: dict[tuple[int, ...], BulkGrammar] = {}
_KEPT = 8  # a test may load many sets of definitions: the oldest plan goes


def plan_for(grammar: Grammar) -> BulkGrammar:
    """The plan of ``grammar``'s definitions, built once a process (as is its scanner)."""
    key = (max_k(), *map(id, grammar.definitions))
    plan = _PLANS.get(key)
    if plan is None:
        while len(_PLANS) >= _KEPT:
            # Tolerant: two threads reading at once may both evict (one builds in vain).
            _PLANS.pop(next(iter(_PLANS), key), None)
        plan = _PLANS[key] = BulkGrammar(grammar)
    return plan


def group_kinds(shape: Shape) -> dict[str, str]:
    """What each of a shape's groups is read as (``plain.convert``'s kinds)."""
    types = {f.column: f.type for f in shape.definition.fields.values()}
    return {name: types.get(name, "int") for name in shape.names if not name.startswith("_")}


def typed_records(plan: BulkGrammar, index: int, fields: pl.DataFrame) -> pl.DataFrame:
    """One shape's records as rows of its table: its groups typed as the line parser types
    them (those still text: the compiled scanner reads most as their type already), with
    the definition's constants and derivations."""
    shape = plan.shapes[index]
    d = shape.definition
    kinds = group_kinds(shape)
    conv = [
        convert(name, kinds.get(name, "int"))
        if fields[name].dtype == pl.String
        else pl.col(name).cast(pl.Int32)
        if name == "engine"
        else pl.col(name)
        for name in fields.columns
        if not name.startswith("_")
    ]
    fields = fields.with_columns(conv).with_columns(
        pl.lit(d.name).alias("format"),
        pl.lit(d.table or d.name).alias("_table"),
        *(pl.lit(v).alias(k) for k, v in shape.shape.set.items()),
    )
    for derivation in d.derive.values():
        fields = FRAME_DERIVATIONS[derivation](fields)
    return fields


class Lines(Protocol):
    """A block's lines as the walk reads them: by index, and where the filled ones are."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> str: ...

    def filled(self) -> np.ndarray: ...

    def opens(self) -> np.ndarray:
        """The lines that open a JSON document after an indent or a quote, or an array by
        its ``[`` (``jsonpaste.OPENS``): the line parser watches them."""
        ...


@dataclass
class Prepared:
    """What the walk needs of a block, made beside the walk of the block before."""

    lines: Lines
    kind: np.ndarray
    # With ``_i`` (the line in the block) and ``_key`` (its process), in the order of the
    # text: a line of two records glued holds both, the first first.
    records: pl.DataFrame
    dated: np.ndarray  # the line has a timestamp
    key_of: np.ndarray  # the line's process as a number (0: none)
    process: Callable[[int], tuple[str, int]]  # a line's (process name, pid)
    envelope: Callable[[int], Envelope]  # a dated line's header
    slow: np.ndarray  # the lines fed one by one, and their text
    slow_texts: list[str]
    # The records' lines (within the block, ascending) and tables (codes into
    # ``table_names``): arrays, since a block holds thousands of records and the walk
    # looks up a few of them per stretch.
    positions: np.ndarray
    rec_table: np.ndarray
    table_names: list[str]


def prepared(
    lines: Lines,
    kind: np.ndarray,
    records: pl.DataFrame,
    *,
    dated: np.ndarray,
    key_of: np.ndarray,
    process: Callable[[int], tuple[str, int]],
    envelope: Callable[[int], Envelope],
) -> Prepared:
    """The block's lines classified and its plain records read: the records the line
    parser would refuse go to it, as do the quiet lines that follow a record."""
    bad = contradicts(records) if len(records) else None
    if bad is not None and bad.any():  # the line parser says what is wrong with them
        kind = kind.copy()
        refused = records.filter(bad)["_i"].to_numpy()
        kind[refused] = SLOW
        # Every record of such a line (two records glued on one) goes with it.
        records = records.filter(pl.Series(~np.isin(records["_i"].to_numpy(), refused)))
    # The rest of a wrapped record goes with its first line when that one is fed.
    rests = np.flatnonzero(kind == REST)
    if len(rests) and (orphan := rests[kind[rests - 1] != RECORD]).size:
        kind = kind.copy()
        kind[orphan] = SLOW
    # After a record the line parser holds it until the next line shows it ended, so a
    # line it would otherwise pass over is read then (offered to an open record, or held
    # as the start of a wrapped one): such lines go to the parser.
    after_record = np.zeros(len(kind), bool)
    after_record[1:] = ((kind[:-1] == RECORD) | (kind[:-1] == REST)) & (kind[1:] == QUIET)
    kind = np.where(after_record, SLOW, kind)
    # The first line of a JSON document pasted indented, quoted or as an array: the line
    # parser watches it (and holds the document, so the lines after it come one by one).
    opens = lines.opens()
    kind[opens[kind[opens] == QUIET]] = SLOW
    slow = np.flatnonzero(kind == SLOW)
    positions, rec_table, table_names = np.zeros(0, np.int64), np.zeros(0, np.int64), []
    if len(records):
        positions = records["_i"].to_numpy().astype(np.int64, copy=False)
        table_names = sorted(records["_table"].unique().to_list())
        codes = records["_table"].cast(pl.Enum(table_names)).to_physical()
        rec_table = codes.to_numpy().astype(np.int64)
    return Prepared(
        lines,
        kind,
        records,
        dated=dated,
        key_of=key_of,
        process=process,
        envelope=envelope,
        slow=slow,
        slow_texts=[lines[i] for i in slow.tolist()],
        positions=positions,
        rec_table=rec_table,
        table_names=table_names,
    )


__all__ = [
    "DATED",
    "ENVELOPE",
    "HEAD",
    "INNER_HEAD",
    "LEVELS",
    "PREFIX",
    "QUIET",
    "RECORD",
    "REST",
    "SLOW",
    "UNDATED",
    "WRAPPED",
    "BulkGrammar",
    "Lines",
    "Prepared",
    "Shape",
    "escape",
    "group_kinds",
    "literal_prefix",
    "plan_for",
    "prepared",
    "typed_records",
]
