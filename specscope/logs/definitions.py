"""Format definitions: one TOML file per log format under ``parsers/``, loaded and compiled.

A definition says where a record starts (``anchor``), how its body is read (label: value
``fields``, a Python-literal or ``key=value`` ``config`` line, or an ``event``), and carries
the sample lines and the values they must give. The reading code knows no format by name.
A ``fields`` definition may also list ``plain`` shapes: its record exactly as releases
print it, which the bulk reader (``specscope.logs.bulk``) parses over whole blocks.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import regex

from specscope.errors import DefinitionError

KINDS = ("envelope", "fields", "block", "json", "config", "event")
FIELD_TYPES = ("int", "float", "percent", "fraction", "float_list", "percent_list", "str", "bool")
COUNTS = ("interval", "cumulative")
PARSE_MODES = ("python_dict", "key_value", None)


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
    derive: Mapping[str, str] = field(default_factory=dict)  # table -> derivation
    counts: str = "interval"
    cumulative: tuple[str, ...] = ()  # columns that count since the engine started
    attach_to: str | None = None  # values complete the last record of that table
    fragment: bool = False  # a piece of a record as people paste it: marked partial
    end: regex.Pattern[str] | None = None  # blocks: the line that closes one
    continues: regex.Pattern[str] | None = None  # blocks: lines that carry no field but belong
    match_keys: tuple[str, ...] = ()  # json: the keys that make an object one of these
    has_row: Mapping[str, str] = field(default_factory=dict)  # column: whether table got a row
    parse: str | None = None
    starts_run: bool | str = False  # True, or "after_records": only once the run has records
    fields: Mapping[str, FieldSpec] = field(default_factory=dict)  # keyed by squashed label
    keys: Mapping[str, str] = field(default_factory=dict)
    events: tuple[EventSpec, ...] = ()
    samples: tuple[Sample, ...] = ()
    plain: tuple[PlainShape, ...] = ()  # released shapes the bulk reader takes as they are

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


def _flags(raw: Sequence[str]) -> int:
    value = 0
    for name in raw:
        flag = getattr(regex, name, None)
        if not isinstance(flag, int):
            raise DefinitionError(f"unknown regex flag {name!r}")
        value |= flag
    return value


def _compile(source: str, flags: int, where: str) -> regex.Pattern[str]:
    try:
        return regex.compile(source, flags | regex.V0)
    except regex.error as exc:
        raise DefinitionError(f"{where}: bad regex {source!r}: {exc}") from exc


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
            raise DefinitionError(f"{where}: sample {i + 1} has no text")
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
        raise DefinitionError(f"{where}: plain shapes are for one-table interval records")
    types = {f.column: f.type for f in fields.values()}
    out = []
    for i, shape in enumerate(shapes):
        pattern = shape.get("pattern", "")
        names = _GROUP_NAME.findall(pattern)
        unknown = [n for n in names if n not in types and n not in ("engine",)]
        if not pattern or unknown:
            raise DefinitionError(f"{where}: plain shape {i + 1} names unknown columns {unknown}")
        out.append(PlainShape(pattern, dict(shape.get("set", {}))))
    return tuple(out)


def load_definition(path: Path) -> Definition:
    where = path.name
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DefinitionError(f"{where}: {exc}") from exc
    kind = raw.get("kind")
    if kind not in KINDS:
        raise DefinitionError(f"{where}: kind must be one of {KINDS}, not {kind!r}")
    flags = _flags(raw.get("flags", ()))
    name = raw.get("name") or path.stem
    fields: dict[str, FieldSpec] = {}
    for label, spec in raw.get("fields", {}).items():
        if spec.get("type") not in FIELD_TYPES:
            raise DefinitionError(f"{where}: field {label!r} has type {spec.get('type')!r}")
        complete = spec.get("complete")
        indexed = label.endswith(" *")
        fields[squash(label)] = FieldSpec(
            label,
            spec["column"],
            spec["type"],
            spec.get("set", {}),
            _compile(complete, flags, f"{where} field {label}") if complete else None,
            spec.get("table"),
            indexed,
            spec.get("also"),
        )
    events = tuple(
        EventSpec(
            e["code"],
            _compile(e["anchor"], flags, f"{where} event {e['code']}"),
            _literals(e.get("literal")),
        )
        for e in raw.get("events", ())
    )
    if raw.get("counts", "interval") not in COUNTS:
        raise DefinitionError(f"{where}: counts must be one of {COUNTS}")
    derive = raw.get("derive")
    if isinstance(derive, str):
        derive = {raw.get("table") or name: derive}
    if raw.get("parse") not in PARSE_MODES:
        raise DefinitionError(f"{where}: parse must be one of {PARSE_MODES}")
    anchor = raw.get("anchor")
    pattern = raw.get("pattern")
    if kind in ("fields", "block", "config") and not anchor:
        raise DefinitionError(f"{where}: a {kind} definition needs an anchor")
    if kind == "json" and not raw.get("match_keys"):
        raise DefinitionError(f"{where}: a json definition needs match_keys")
    if kind == "envelope" and not pattern:
        raise DefinitionError(f"{where}: an envelope definition needs a pattern")
    return Definition(
        name=name,
        kind=kind,
        engine=raw.get("engine", ""),
        title=raw.get("title", name),
        versions=raw.get("versions", ""),
        path=path,
        table=raw.get("table"),
        anchor=_compile(anchor, flags, where) if anchor else None,
        pattern=_compile(pattern, flags, where) if pattern else None,
        literals=_literals(raw.get("literal")),
        terminal=_compile(raw["terminal"], flags, where) if raw.get("terminal") else None,
        ends_with=_compile(raw["ends_with"], flags, where) if raw.get("ends_with") else None,
        ends_with_when=(
            _compile(raw["ends_with_when"], flags, where) if raw.get("ends_with_when") else None
        ),
        list_tail=bool(raw.get("list_tail", False)),
        required=tuple(raw.get("required", ())),
        required_for={t: tuple(c) for t, c in raw.get("required_for", {}).items()},
        min_fields=int(raw.get("min_fields", 0)),
        derive=dict(derive or {}),
        counts=raw.get("counts", "interval"),
        cumulative=tuple(raw.get("cumulative", ())),
        attach_to=raw.get("attach_to"),
        fragment=bool(raw.get("fragment", False)),
        end=_compile(raw["end"], flags, where) if raw.get("end") else None,
        continues=_compile(raw["continues"], flags, where) if raw.get("continues") else None,
        match_keys=tuple(raw.get("match_keys", ())),
        has_row=dict(raw.get("has_row", {})),
        parse=raw.get("parse"),
        starts_run=raw.get("starts_run", False),
        fields=fields,
        keys=dict(raw.get("keys", {})),
        events=events,
        samples=_samples(raw.get("samples", ()), where),
        plain=_plain(raw, fields, where),
    )


def definitions_dir() -> Path:
    """Where the definitions are: inside the installed wheel, else the source tree."""
    packaged = resources.files("specscope") / "_parsers"
    if packaged.is_dir():
        return Path(str(packaged))
    tree = Path(__file__).resolve().parent.parent.parent / "parsers"
    if tree.is_dir():
        return tree
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
