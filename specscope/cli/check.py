"""``specscope check``: is the store what its manifest says? One line per damaged, foreign,
missing or schema-swapped data file, exit 9 when there is any."""

from __future__ import annotations

import typer

from specscope.cli.options import JsonOption, StoreOption
from specscope.cli.output import fail, print_json, say
from specscope.errors import ExitStatus, SpecscopeError
from specscope.store import DEFAULT_STORE

EXAMPLES = (
    "Examples:\n\n"
    "  specscope check\n\n"
    "  specscope check --store ./data --json\n\n"
    "  specscope check || echo 'the store is not what its manifest says'"
)


def check(store: StoreOption = DEFAULT_STORE, as_json: JsonOption = False) -> None:
    """Check every data file of the store against its manifest.

    Each committed file must be there and hold the rows, bytes (SHA-256) and columns it
    was committed with. Prints one line per file that is damaged (unreadable, changed),
    schema-swapped (another table's columns), missing, or foreign (a Parquet file in a
    table folder that no ingest lists: specscope ignores it, a glob reads it). Exit 9
    when there is any.
    """
    from specscope.store.check import check_store

    try:
        report = check_store(store)
    except SpecscopeError as exc:
        raise fail(exc) from exc
    if as_json:
        print_json(report.to_dict())
    else:
        for line in report.lines():
            say(line)
    if not report.ok:
        raise typer.Exit(int(ExitStatus.STORE_ERROR))


__all__ = ["EXAMPLES", "check"]
