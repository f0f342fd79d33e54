"""Where a store keeps what: the manifest that commits ingests, the data files of each
table and how their names order them.

    STORE/specscope.json                               schema version, committed ingests
    STORE/<table>/source_id=<id>/part-<ingest>.parquet  spec_decode, engine_stats, events
    STORE/runs/source_id=<id>/runs-<ingest>.parquet     the runs of a source (latest wins)
    STORE/sources/sources-<ingest>.parquet              one row per ingested source
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from specscope.errors import StoreError
from specscope.schema import SCHEMA_VERSION

MANIFEST = "specscope.json"
STAGE = "stage"  # rows on their way in, during an ingest
LOCK = ".lock"
DEFAULT_STORE = "specscope-data"


def default_store_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    return Path(env.get("SPECSCOPE_STORE") or DEFAULT_STORE)


def read_manifest(path: Path) -> dict[str, Any]:
    """The store's manifest (an empty one where there is none yet); a newer schema is refused."""
    file = path / MANIFEST
    if not file.is_file():
        return {"schema_version": SCHEMA_VERSION, "ingests": []}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"unreadable manifest ({exc})", path=str(file)) from exc
    if not isinstance(data, dict):
        raise StoreError("manifest is not a JSON object", path=str(file))
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise StoreError("manifest has no schema_version", path=str(file))
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"written by a newer specscope (schema {version}; this one reads up to "
            f"{SCHEMA_VERSION}): upgrade specscope",
            path=str(path),
        )
    return data


def committed_files(path: Path, table: str) -> list[Path]:
    """The committed data files of ``table`` (latest only, for runs and sources)."""
    root = path / table
    if not root.is_dir():
        return []
    # The committed ingests, in the order they were committed.
    order = {i["id"]: n for n, i in enumerate(read_manifest(path).get("ingests", []))}
    found = [p for p in root.rglob("*.parquet") if ingest_of(p) in order]
    if table in ("runs", "sources"):
        latest: dict[Path, Path] = {}
        for p in found:
            best = latest.get(p.parent)
            if best is None or order[ingest_of(p)] > order[ingest_of(best)]:
                latest[p.parent] = p
        found = list(latest.values())
    # As written: by folder, by ingest (in the order they were committed: two ingests
    # in one second have ids in random order), then by number within an ingest.
    return sorted(found, key=lambda p: (str(p.parent), order[ingest_of(p)], file_number(p)))


def ingest_of(path: Path) -> str:
    """The ingest id in a data file's name (``part-<id>.parquet``, ``part-<id>.<n>.parquet``
    for the next files of one write)."""
    return path.name.split("-", 1)[-1].split(".", 1)[0]


def file_number(path: Path) -> int:
    """A data file's place among the files of one write (``part-<id>.<n>.parquet``)."""
    pieces = path.name.split(".")
    return int(pieces[1]) if len(pieces) == 3 and pieces[1].isdigit() else 0
