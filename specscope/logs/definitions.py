"""Format definitions: one TOML file per log format under ``parsers/``, loaded and compiled.

A definition says where a record starts (``anchor``), how its body is read (label: value
``fields``, a Python-literal or ``key=value`` ``config`` line, or an ``event``), and carries
the sample lines and the values they must give. The reading code knows no format by name.
A ``fields`` definition may also list ``plain`` shapes: its record exactly as releases
print it, which the bulk reader (``specscope.logs.bulk``) parses over whole blocks.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import regex

from specscope.errors import DefinitionError
from specscope.logs.derive import CONFIG_DERIVATIONS, RECORD_DERIVATIONS
from specscope.schema import TABLES

# exposition: Prometheus text as pasted (`keys` maps metric names to roles; specscope.logs.pasted)
KINDS = ("envelope", "fields", "block", "json", "config", "event", "exposition")
FIELD_TYPES = ("int", "float", "percent", "fraction", "float_list", "percent_list", "str", "bool")
COUNTS = ("interval", "cumulative")
# table, pairs: an author's comparison in a block (tables.read_table, tables.read_pairs);
# spec_table: an author's table of spec-decode counts, one record a row (tables.read_spec_table);
# json_keys: a JSON document's keys pasted a line each (fields.read_json_keys)
# bullets: an author's settings a bullet each, one with speculation off (bullets.read_bullets)
# bare_table: an author's table without outer pipes (bare.read_bare_table)
# joined_tables: a baseline's table and speculation's in one paste (joined.read_joined_tables)
# assignments: a program's summary, 'label = value' a line (assignments.read_assignments)
# claims: an author's verdict in a sentence, its lexicons in `keys` (claims.ClaimWatch)
PARSE_MODES = (
    "python_dict",
    "key_value",
    "table",
    "pairs",
    "spec_table",
    "json_keys",
    "labelled",
    "claims",
    "bullets",
    "bare_table",
    "joined_tables",
    "assignments",
    None,
)


@dataclass(frozen=True)
class FieldSpec:
    label: str
    column: str
    type: str
    set: Mapping[str, Any] = field(default_factory=dict)
    complete: regex.Pattern[str] | None = None  # how the value looks when nothing cut it
    table: str | None = None  # another table than the definition's, for this value
    indexed: bool = False  # "Position *": the label ends with an index into a list column
    also: str | None = None  # a column of the definition's own table that gets it too


@dataclass(frozen=True)
class EventSpec:
    code: str
    anchor: regex.Pattern[str]
    literals: tuple[str, ...]
    # A crash: a paste of it alone is worth storing and judging (``error_signature``),
    # though it holds no telemetry.
    crash: bool = False
    max_line: int | None = None  # its definition's (Definition.max_line)

    def reads(self, text: str) -> bool:
        return self.max_line is None or len(text) <= self.max_line


@dataclass(frozen=True)
class PlainShape:
    """A record's message exactly as a release prints it, read in bulk (``specscope.logs.bulk``):
    a Rust-syntax regex over the whole message, its groups named after columns."""

    pattern: str
    set: Mapping[str, Any] = field(default_factory=dict)  # constant columns it implies


@dataclass(frozen=True)
class Sample:
    text: str
    source: str
    records: tuple[Mapping[str, Any], ...] = ()
    run: Mapping[str, Any] | None = None
    expect: Mapping[str, Any] | None = None
    runs: int | None = None  # how many runs the sample holds
    table: str | None = None  # the table `records` are rows of (default: the definition's)


@dataclass(frozen=True)
class Definition:
    name: str
    kind: str
    engine: str
    title: str
    versions: str
    path: Path
    table: str | None = None
    anchor: regex.Pattern[str] | None = None
    pattern: regex.Pattern[str] | None = None
    literals: tuple[str, ...] = ()
    terminal: regex.Pattern[str] | None = None
    ends_with: regex.Pattern[str] | None = None  # a record without it was cut off ...
    ends_with_when: regex.Pattern[str] | None = None  # ... when its body starts like this
    list_tail: bool = False
    required: tuple[str, ...] = ()
    required_for: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # other tables
    min_fields: int = 0
    # ... and when the record stands alone on its line (no prose before it, nothing after
    # its last whole value): a pasted log line, not a sentence quoting a number.
    min_fields_alone: int | None = None
    derive: Mapping[str, str] = field(default_factory=dict)  # table -> derivation
    counts: str = "interval"
    cumulative: tuple[str, ...] = ()  # columns that count since the engine started
    attach_to: str | None = None  # values complete the last record of that table
    fragment: bool = False  # a piece of a record as people paste it: marked partial
    # A record that stops inside a value or after a separator was cut off: refused, not
    # kept (for forms told apart from a cut record only by ending whole: a trimmed paste).
    refuse_cut: bool = False
    end: regex.Pattern[str] | None = None  # blocks: the line that closes one
    continues: regex.Pattern[str] | None = None  # blocks: lines that carry no field but belong
    match_keys: tuple[str, ...] = ()  # json: the keys that make an object one of these
    has_row: Mapping[str, str] = field(default_factory=dict)  # column: whether table got a row
    # What a record prints for a run without speculation (SGLang's bench script: 'Acceptance
    # length: 1.00'): under an author's label naming the baseline (logs.run_labels), such
    # a record is that run, and the tables of ``has_row`` get no row of it.
    baseline_prints: Mapping[str, Any] = field(default_factory=dict)
    parse: str | None = None
    starts_run: bool | str = False  # True, or "after_records": only once the run has records
    fields: Mapping[str, FieldSpec] = field(default_factory=dict)  # keyed by squashed label
    keys: Mapping[str, str] = field(default_factory=dict)
    events: tuple[EventSpec, ...] = ()
    samples: tuple[Sample, ...] = ()
    plain: tuple[PlainShape, ...] = ()  # released shapes the bulk reader takes as they are
    # The longest text (characters) its regexes run on: a longer line is not read by it,
    # and still by the others. Prose patterns weigh each place of a line against hundreds of
    # characters around it (README → Limits and safety). None: the line limit (telemetry).
    max_line: int | None = None

    def reads(self, text: str) -> bool:
        """Is ``text`` short enough for this definition to run its regexes on?"""
        return self.max_line is None or len(text) <= self.max_line

    def field_for(self, label: str) -> FieldSpec | None:
        return self.fields.get(squash(label))

    def indexed_field(self, label: str) -> tuple[FieldSpec, int] | None:
        """``Position 3`` -> (the ``Position *`` field, 3)."""
        key = squash(label)
        for spec in self.fields.values():
            if spec.indexed:
                head = squash(spec.label[:-1])
                rest = key[len(head) :]
                if key.startswith(head) and rest.isdigit():
                    return spec, int(rest)
        return None

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table a record of this definition writes to, its own first."""
        own = self.table or self.name
        others = sorted({f.table for f in self.fields.values() if f.table and f.table != own})
        return (own, *others)


def squash(label: str) -> str:
    """A label with case and white space removed, so that a wrap that ate a space still matches."""
    return "".join(label.split()).lower()


def _flags(raw: Sequence[str], where: str) -> int:
    value = 0
    for name in raw:
        flag = getattr(regex, name, None)
        if not isinstance(flag, int):
            hint = _hint(name, regex.RegexFlag.__members__)
            raise _error(where, f"flags: unknown regex flag {name!r} ({hint})")
        value |= flag
    return value


def _compile(source: str, flags: int, where: str, at: str) -> regex.Pattern[str]:
    try:
        return regex.compile(source, flags | regex.V0)
    except regex.error as exc:
        raise _error(where, f"{at}: bad regex {_show(source)}: {exc}") from exc


def _literals(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    return tuple(str(x) for x in raw)


def _samples(raw: Sequence[Mapping[str, Any]], where: str) -> tuple[Sample, ...]:
    out = []
    for i, s in enumerate(raw):
        if "text" not in s:
            raise _error(where, f"sample {i + 1} has no text")
        out.append(
            Sample(
                text=s["text"],
                source=s.get("source", ""),
                records=tuple(s.get("records", ())),
                run=s.get("run"),
                expect=s.get("expect"),
                runs=s.get("runs"),
                table=s.get("table"),
            )
        )
    return tuple(out)


_GROUP_NAME = regex.compile(r"\(\?P<(\w+)>")


def _plain(
    raw: Mapping[str, Any], fields: Mapping[str, FieldSpec], where: str
) -> tuple[PlainShape, ...]:
    """Plain shapes, checked to be what the bulk reader can take: a one-table record of
    interval counts, groups that name the definition's own columns."""
    shapes = raw.get("plain", ())
    if not shapes:
        return ()
    if (
        raw.get("kind") != "fields"
        or raw.get("attach_to")
        or raw.get("counts", "interval") != "interval"
        or raw.get("fragment")
        or any(f.table or f.also for f in fields.values())
    ):
        raise _error(where, "plain shapes are for one-table interval records")
    types = {f.column: f.type for f in fields.values()}
    out = []
    for i, shape in enumerate(shapes):
        pattern = shape.get("pattern", "")
        names = _GROUP_NAME.findall(pattern)
        unknown = [n for n in names if n not in types and n not in ("engine",)]
        if not pattern or unknown:
            hint = _hint(unknown[0], [*types, "engine"]) if unknown else "it has no pattern"
            raise _error(where, f"plain shape {i + 1} names unknown columns {unknown} ({hint})")
        out.append(PlainShape(pattern, dict(shape.get("set", {}))))
    return tuple(out)


# --- validation ------------------------------------------------------------------------
# A misspelled key would otherwise load without a word (the loader only reads the keys it
# knows) and the format would quietly read less. Hand-written rather than pydantic or
# jsonschema: the loader runs on every ingest and this costs no import.


def _error(where: str, message: str) -> DefinitionError:
    # One line whatever a value or a library message holds: the CLI prints errors as lines.
    return DefinitionError(" ".join(message.splitlines()), path=where)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _hint(name: str, known: Sequence[str] | Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"


def _label(key: str) -> str:
    """A key a definition chose (a field label, a table name) as TOML writes it in a path."""
    return json.dumps(key, ensure_ascii=False)


@dataclass(frozen=True)
class _Type:
    what: str  # as an error says it: "min_fields must be <what>"
    test: Callable[[Any], bool]


def _is_strs(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _is_str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(x, str) for x in value.values())


_STR = _Type("a string", lambda v: isinstance(v, str))
_INT = _Type("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
_POSITIVE = _Type("an integer above 0", lambda v: _INT.test(v) and v > 0)
_BOOL = _Type("true or false", lambda v: isinstance(v, bool))
_TABLE = _Type("a table", lambda v: isinstance(v, dict))
# Arrays of tables: each entry is checked on its own, so that the error names its index.
_ARRAY = _Type("an array of tables", lambda v: isinstance(v, list))
_STRS = _Type("a list of strings", _is_strs)
_STR_OR_STRS = _Type("a string or a list of strings", lambda v: isinstance(v, str) or _is_strs(v))
_STR_MAP = _Type("a table of strings", _is_str_map)
_STRS_MAP = _Type(
    "a table of lists of strings",
    lambda v: isinstance(v, dict) and all(_is_strs(x) for x in v.values()),
)
_DERIVE = _Type("a string or a table of strings", lambda v: isinstance(v, str) or _is_str_map(v))
_STARTS_RUN = _Type(
    "true, false or 'after_records'", lambda v: isinstance(v, bool) or v == "after_records"
)

# Every key each level of a definition may have, and what its value must be.
_TOP_KEYS: dict[str, _Type] = {
    "name": _STR,
    "kind": _STR,
    "engine": _STR,
    "title": _STR,
    "versions": _STR,
    "table": _STR,
    "flags": _STRS,
    "anchor": _STR,
    "pattern": _STR,
    "literal": _STR_OR_STRS,
    "terminal": _STR,
    "ends_with": _STR,
    "ends_with_when": _STR,
    "list_tail": _BOOL,
    "required": _STRS,
    "required_for": _STRS_MAP,
    "min_fields": _INT,
    "min_fields_alone": _INT,
    "max_line": _POSITIVE,
    "derive": _DERIVE,
    "counts": _STR,
    "cumulative": _STRS,
    "attach_to": _STR,
    "fragment": _BOOL,
    "refuse_cut": _BOOL,
    "end": _STR,
    "continues": _STR,
    "match_keys": _STRS,
    "has_row": _STR_MAP,
    "baseline_prints": _TABLE,
    "parse": _STR,
    "starts_run": _STARTS_RUN,
    "fields": _TABLE,
    "keys": _STR_MAP,
    "events": _ARRAY,
    "plain": _ARRAY,
    "samples": _ARRAY,
}
_FIELD_KEYS = {
    "column": _STR,
    "type": _STR,
    "set": _TABLE,
    "complete": _STR,
    "table": _STR,
    "also": _STR,
}
_EVENT_KEYS = {"code": _STR, "anchor": _STR, "literal": _STR_OR_STRS, "crash": _BOOL}
_PLAIN_KEYS = {"pattern": _STR, "set": _TABLE}
# `records`, `run` and `expect` hold values by column or group name: see _check_samples.
_SAMPLE_KEYS = {
    "text": _STR,
    "source": _STR,
    "records": _ARRAY,
    "run": _TABLE,
    "expect": _TABLE,
    "runs": _INT,
    "table": _STR,
}


def _check_keys(
    raw: Mapping[str, Any],
    allowed: Mapping[str, _Type],
    at: str,
    where: str,
    needed: Sequence[str] = (),
) -> None:
    """Every key of ``raw`` (at path ``at``) known and of its type, and the ``needed`` ones
    there."""
    for key, value in raw.items():
        kind = allowed.get(key)
        path = f"{at}.{key}" if at else key
        if kind is None:
            hint = _hint(key, allowed)
            if at:
                raise _error(where, f"{path}: unknown key ({hint})")
            raise _error(where, f"unknown key {key!r} ({hint})")
        if not kind.test(value):
            raise _error(where, f"{path} must be {kind.what}, not {_show(value)}")
    missing = [k for k in needed if k not in raw]
    if missing:
        raise _error(where, f"{at}: missing key {missing[0]!r} (needs {', '.join(needed)})")


def _entries(raw: Mapping[str, Any], key: str, at: str, where: str) -> list[tuple[str, Any]]:
    """The tables of the array ``key`` with their paths (1-based, as a reader counts the
    ``[[key]]`` blocks)."""
    out = []
    for i, entry in enumerate(raw.get(key, ())):
        path = f"{at}.{key}[{i + 1}]" if at else f"{key}[{i + 1}]"
        if not isinstance(entry, dict):
            raise _error(where, f"{path} must be a table, not {_show(entry)}")
        out.append((path, entry))
    return out


def _check_shape(raw: Mapping[str, Any], where: str) -> None:
    """Keys and value types, at every level."""
    _check_keys(raw, _TOP_KEYS, "", where)
    for label, spec in raw.get("fields", {}).items():
        at = f"fields.{_label(label)}"
        if not isinstance(spec, dict):
            raise _error(where, f"{at} must be a table, not {_show(spec)}")
        _check_keys(spec, _FIELD_KEYS, at, where, needed=("column", "type"))
    for at, event in _entries(raw, "events", "", where):
        _check_keys(event, _EVENT_KEYS, at, where, needed=("code", "anchor"))
    for at, shape in _entries(raw, "plain", "", where):
        _check_keys(shape, _PLAIN_KEYS, at, where, needed=("pattern",))
    for at, sample in _entries(raw, "samples", "", where):
        _check_keys(sample, _SAMPLE_KEYS, at, where)
        _entries(sample, "records", at, where)


def _check_table(
    name: str, known: Sequence[str], at: str, where: str, what: str = "a table"
) -> None:
    if name not in known:
        raise _error(where, f"{at}: {name!r} is not {what} ({_hint(name, known)})")


def _check_names(raw: Mapping[str, Any], kind: str, name: str, where: str) -> None:
    """What names something elsewhere: derivations, tables, and the columns samples expect.

    A field's ``column`` is not held to its table's columns: a derivation may read a value
    that is never stored (vllm_v0_spec_decode's ``printed_cumulative_rate``).
    """
    if "table" in raw:
        _check_table(raw["table"], list(TABLES), "table", where)
    if "attach_to" in raw:
        _check_table(raw["attach_to"], list(TABLES), "attach_to", where)
    own = raw.get("table") or name
    tables = [own]
    for label, spec in raw.get("fields", {}).items():
        if "table" in spec:
            _check_table(spec["table"], list(TABLES), f"fields.{_label(label)}.table", where)
            tables += [spec["table"]] if spec["table"] not in tables else []
    mine = "one of this definition's tables"
    for table in raw.get("required_for", {}):
        _check_table(table, tables, f"required_for.{_label(table)}", where, mine)
    for column, table in raw.get("has_row", {}).items():
        _check_table(table, tables, f"has_row.{_label(column)}", where, mine)
    columns = [spec.get("column") for spec in raw.get("fields", {}).values()]
    for column in raw.get("baseline_prints", {}):
        at = f"baseline_prints.{_label(column)}"
        _check_table(column, columns, at, where, "a field's column")
    _check_derive(raw, kind, tables, where, mine)
    for at, sample in _entries(raw, "samples", "", where):
        table = sample.get("table", own)
        if "table" in sample:
            _check_table(table, tables, f"{at}.table", where, mine)
        if table not in TABLES:
            continue  # rows of no table: the sample fails in tests/test_definitions.py
        columns = TABLES[table].names
        for path, record in _entries(sample, "records", at, where):
            for column in record:
                if column not in columns:
                    hint = _hint(column, columns)
                    raise _error(where, f"{path}.{column}: not a column of {table} ({hint})")


def _check_derive(
    raw: Mapping[str, Any], kind: str, tables: Sequence[str], where: str, mine: str
) -> None:
    derive = raw.get("derive")
    if derive is None:
        return
    # Config derivations complete a run's configuration, record derivations a table's row:
    # the parser calls each from its own place.
    known, other = (
        (CONFIG_DERIVATIONS, RECORD_DERIVATIONS)
        if kind == "config"
        else (RECORD_DERIVATIONS, CONFIG_DERIVATIONS)
    )
    if isinstance(derive, str):
        named = [("derive", derive)]
    else:
        named = [(f"derive.{_label(table)}", d) for table, d in derive.items()]
        if kind != "config":  # a config's derivations complete no table
            for table in derive:
                _check_table(table, tables, f"derive.{_label(table)}", where, mine)
    for at, derivation in named:
        if derivation in known:
            continue
        if derivation in other:
            hint = f"that one is for {'records' if kind == 'config' else 'config'} definitions;"
            hint += f" known: {', '.join(known)}"
        else:
            hint = _hint(derivation, list(known))
        raise _error(where, f"{at} {derivation!r} is not a derivation ({hint})")


def load_definition(path: Path) -> Definition:
    where = path.name
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise _error(where, str(exc)) from exc
    _check_shape(raw, where)
    kind = raw.get("kind")
    if kind not in KINDS:
        raise _error(where, f"kind must be one of {KINDS}, not {kind!r}")
    name = raw.get("name") or path.stem
    _check_names(raw, kind, name, where)
    flags = _flags(raw.get("flags", ()), where)
    fields: dict[str, FieldSpec] = {}
    for label, spec in raw.get("fields", {}).items():
        if spec["type"] not in FIELD_TYPES:
            hint = _hint(spec["type"], FIELD_TYPES)
            raise _error(where, f"field {label!r} has type {spec['type']!r} ({hint})")
        complete = spec.get("complete")
        at = f"fields.{_label(label)}.complete"
        fields[squash(label)] = FieldSpec(
            label,
            spec["column"],
            spec["type"],
            spec.get("set", {}),
            _compile(complete, flags, where, at) if complete else None,
            spec.get("table"),
            label.endswith(" *"),
            spec.get("also"),
        )
    events = tuple(
        EventSpec(
            e["code"],
            _compile(e["anchor"], flags, where, f"{at}.anchor"),
            _literals(e.get("literal")),
            bool(e.get("crash", False)),
            raw.get("max_line"),
        )
        for at, e in _entries(raw, "events", "", where)
    )
    counts = raw.get("counts", "interval")
    if counts not in COUNTS:
        raise _error(where, f"counts must be one of {COUNTS}, not {counts!r}")
    derive = raw.get("derive")
    if isinstance(derive, str):
        derive = {raw.get("table") or name: derive}
    if raw.get("parse") not in PARSE_MODES:
        raise _error(where, f"parse must be one of {PARSE_MODES}, not {raw.get('parse')!r}")
    anchor = raw.get("anchor")
    pattern = raw.get("pattern")
    if kind in ("fields", "block", "config") and not anchor:
        raise _error(where, f"a {kind} definition needs an anchor")
    if kind == "json" and not raw.get("match_keys"):
        raise _error(where, "a json definition needs match_keys")
    if kind == "envelope" and not pattern:
        raise _error(where, "an envelope definition needs a pattern")

    def compiled(key: str) -> regex.Pattern[str] | None:
        return _compile(raw[key], flags, where, key) if raw.get(key) else None

    return Definition(
        name=name,
        kind=kind,
        engine=raw.get("engine", ""),
        title=raw.get("title", name),
        versions=raw.get("versions", ""),
        path=path,
        table=raw.get("table"),
        anchor=compiled("anchor"),
        pattern=compiled("pattern"),
        literals=_literals(raw.get("literal")),
        terminal=compiled("terminal"),
        ends_with=compiled("ends_with"),
        ends_with_when=compiled("ends_with_when"),
        list_tail=raw.get("list_tail", False),
        required=tuple(raw.get("required", ())),
        required_for={t: tuple(c) for t, c in raw.get("required_for", {}).items()},
        min_fields=raw.get("min_fields", 0),
        min_fields_alone=raw.get("min_fields_alone"),
        derive=dict(derive or {}),
        counts=counts,
        cumulative=tuple(raw.get("cumulative", ())),
        attach_to=raw.get("attach_to"),
        fragment=raw.get("fragment", False),
        refuse_cut=raw.get("refuse_cut", False),
        end=compiled("end"),
        continues=compiled("continues"),
        match_keys=tuple(raw.get("match_keys", ())),
        has_row=dict(raw.get("has_row", {})),
        baseline_prints=dict(raw.get("baseline_prints", {})),
        parse=raw.get("parse"),
        starts_run=raw.get("starts_run", False),
        fields=fields,
        keys=dict(raw.get("keys", {})),
        events=events,
        samples=_samples(raw.get("samples", ()), where),
        plain=_plain(raw, fields, where),
        max_line=raw.get("max_line"),
    )


def definitions_dir() -> Path:
    """Where the definitions are: the source tree's ``parsers/`` when the package runs from
    a checkout (a build may leave a copy in ``specscope/_parsers`` that an edit to
    ``parsers/`` would not reach), else the copy inside the installed wheel."""
    tree = Path(__file__).resolve().parent.parent.parent / "parsers"
    if tree.is_dir() and (tree.parent / "specscope").is_dir():
        return tree
    packaged = resources.files("specscope") / "_parsers"
    if packaged.is_dir():
        return Path(str(packaged))
    raise DefinitionError("no format definitions found (neither specscope/_parsers nor parsers/)")


@cache
def load_definitions(directory: Path | None = None) -> tuple[Definition, ...]:
    """Every definition, in file-name order (which is also the order candidates are tried)."""
    root = directory or definitions_dir()
    defs = tuple(load_definition(p) for p in sorted(root.glob("*.toml")))
    names = [d.name for d in defs]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise DefinitionError(f"duplicate definition names: {sorted(dupes)}")
    return defs


__all__ = [
    "Definition",
    "EventSpec",
    "FieldSpec",
    "PlainShape",
    "Sample",
    "definitions_dir",
    "load_definition",
    "load_definitions",
    "squash",
]
