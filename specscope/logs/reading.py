"""What one record body said, as every reader of a body returns it (``specscope.logs.fields``
reads labelled bodies and blocks, ``specscope.logs.tables`` an author's tables and lines)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reading:
    """What one record body said."""

    values: dict[str, Any] = field(default_factory=dict)  # by column
    extra: dict[str, Any] = field(default_factory=dict)  # labels no definition knows
    problems: list[str] = field(default_factory=list)  # values that did not read
    cut: bool = False  # the body stops before its terminal field, or inside its last one
    trails: bool = False  # the body stops after a separator or an ellipsis: more was to come
    dropped: str | None = None  # the last field, left out because it may be cut short
    ends_whole: bool = False  # the last field is a value that shows it is complete
    whole: int = 0  # fields whose value shows it is complete
    items: int = 0  # entries of the list values read
    chars: int = 0  # characters of the values read (known fields only)
    alone: bool = False  # nothing but markup before it on its line (see min_fields_alone)
    refused: str | None = None  # why the record cannot be kept (a list over the limit)
    under_baseline: str | None = None  # the author's label above, naming the baseline (run_labels)
    # A block of several records (a table, one a row): which line of the block this one is
    # on, and the records after it.
    offset: int | None = None
    more: list[Reading] = field(default_factory=list)

    @property
    def notes(self) -> list[str]:
        return self.problems + ([self.dropped] if self.dropped else [])


__all__ = ["Reading"]
