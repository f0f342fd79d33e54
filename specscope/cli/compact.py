"""``specscope compact``: each table folder's many small files merged into few, as one
commit that readers and writers at work never notice (``store.compaction``)."""

from __future__ import annotations

from specscope.cli.options import JsonOption, StoreOption
from specscope.cli.output import fail, print_json, say
from specscope.errors import SpecscopeError
from specscope.store import DEFAULT_STORE

EXAMPLES = (
    "Examples:\n\n"
    "  specscope compact\n\n"
    "  specscope compact --store s3://fleet/specscope --json\n\n"
    "  specscope compact --store ./data && specscope check --store ./data"
)


def compact(store: StoreOption = DEFAULT_STORE, as_json: JsonOption = False) -> None:
    """Merge each table folder's small files into few, as one commit.

    A store on object storage gets a file per table per commit, and a fleet pulled a
    server a source gets a folder per server: readers open every file. Compaction
    rewrites the files of each folder that fewer would hold (up to 1,000,000 rows each),
    in the order readers read them, and commits them like an ingest. Readers read the
    same rows before, during and after it; the replaced files are deleted by the next
    compaction once a lease (SPECSCOPE_LOCK_LEASE_S, 10 minutes) has passed. Run it from
    cron, daily or hourly.
    """
    from specscope.store.compaction import compact as compacting

    try:
        done = compacting(store)
    except SpecscopeError as exc:
        raise fail(exc) from exc
    if as_json:
        print_json(done.to_dict())
    else:
        for line in done.lines():
            say(line)


__all__ = ["EXAMPLES", "compact"]
