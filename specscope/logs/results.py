"""What reading lines gives: rows by table, the server runs they belong to, and the lines
skipped with why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specscope.logs.grammar import Envelope


@dataclass(slots=True)
class Skip:
    line: int
    reason: str
    text: str


@dataclass
class Run:
    """One server run: from a server start (or a new process id) to the next."""

    ordinal: int
    first_line: int
    last_line: int
    config: dict[str, Any] = field(default_factory=dict)
    procs: dict[str, int] = field(default_factory=dict)
    # More pids under one singleton name, side by side (several API servers of one server).
    side_pids: dict[str, list[int]] = field(default_factory=dict)
    starts_seen: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    last_seen: Envelope | None = None  # the last envelope with a timestamp
    from_block: bool = False  # opened by a result block (bench output), not a server log
    # The last telemetry record of each process: the spec line follows its engine's line.
    last_record: dict[tuple[str | None, int | None], tuple[str, Row]] = field(default_factory=dict)
    # The depth each labelled spec record's label sets (None: none): ``logs.label_config``.
    labelled: list[int | None] = field(default_factory=list)

    @property
    def used(self) -> bool:
        return bool(self.config or self.counts)

    @property
    def has_records(self) -> bool:
        """Telemetry seen (events alone, such as a start-up warning, do not count)."""
        return any(n for table, n in self.counts.items() if table != "events")

    def update_config(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            if value is not None:
                self.config.setdefault(key, value)


Row = dict[str, Any]


class BulkRow(dict[str, Any]):
    """What the line parser keeps of a record read in bulk (its line, its engine): the
    record before a later one of the same process. What a later line adds to it (a
    prefix-cache line) is kept in ``LineParser.patches`` for the bulk reader to apply."""


@dataclass
class ParseResult:
    tables: dict[str, list[Row]]
    runs: list[Run]
    skipped: list[Skip]
    lines: int
    telemetry_lines: int = 0  # lines that held a record of any table
    # Records read in bulk that a later line completed (see BulkRow).
    patches: list[tuple[str, BulkRow]] = field(default_factory=list)
    long_lines: list[tuple[int, int]] = field(default_factory=list)  # (line, bytes) not read
    scanner: str = ""  # what classified the blocks read in bulk: "core", "polars" ("": none)
