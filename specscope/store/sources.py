"""A source of telemetry as the store knows it: a log file, a Prometheus target, a
``/metrics`` endpoint. One rule names it (``source_id``), one builder makes its row in
``sources`` (``sources_row``), whoever wrote it.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from specscope.schema import SOURCES

# The first letter of an id says what kind of source it is.
_KIND_LETTER = {"log": "s", "prometheus": "p", "scrape": "m", "watch": "w"}


def source_id(kind: str, identity: str) -> str:
    """The id of a source: a letter for its kind and ten hex digits of a SHA-256. For a log,
    ``identity`` is already the hash of its bytes; otherwise it is what identifies the
    source (a URL with its selector), hashed here."""
    digest = identity if kind == "log" else hashlib.sha256(identity.encode()).hexdigest()
    return _KIND_LETTER[kind] + digest[:10]


def sources_row(source: str, path: str, kind: str, ingest_id: str, **values: Any) -> dict[str, Any]:
    """A row of ``sources``: every column of the table, null where ``values`` says nothing,
    stamped with the ingest that wrote it."""
    unknown = set(values) - set(SOURCES.names)
    if unknown:
        raise ValueError(f"not columns of sources: {sorted(unknown)}")
    row: dict[str, Any] = dict.fromkeys(SOURCES.names)
    row.update(values)
    row.update(
        source_id=source,
        path=path,
        kind=kind,
        ingest_id=ingest_id,
        ingested_at=datetime.now(UTC).replace(tzinfo=None),
    )
    return row


__all__ = ["source_id", "sources_row"]
