"""``specscope sql``: the fleet queries as views an engine runs (``specscope.queries``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from specscope.cli.options import StoreOption
from specscope.cli.output import fail, say
from specscope.errors import SpecscopeError
from specscope.store import DEFAULT_STORE

EXAMPLES = (
    "Examples:\n\n"
    "  specscope sql acceptance_by_model | duckdb\n\n"
    "  specscope sql --engine clickhouse positions_by_model > fleet.sql\n"
    "  clickhouse local --queries-file fleet.sql\n\n"
    "  specscope sql --engine clickhouse --location http://s3.local:9000/fleet/store\n\n"
    "  specscope sql --engine spark acceptance_by_day > fleet.py && python fleet.py"
)

QUERY_HELP = (
    "A query to print after the views, its rows sorted: acceptance_by_model, "
    "acceptance_by_server, acceptance_by_day, acceptance_by_run, positions_by_model, "
    "positions_by_run."
)


def sql(
    query: Annotated[str | None, typer.Argument(help=QUERY_HELP, show_default=False)] = None,
    engine: Annotated[
        str, typer.Option(help="duckdb, clickhouse (clickhouse-local, chDB) or spark.")
    ] = "duckdb",
    store: StoreOption = DEFAULT_STORE,
    location: Annotated[
        str | None,
        typer.Option(
            help="Where the engine reads the store's files, if not --store: the folder "
            "copied to object storage (http://host:port/bucket/prefix, s3://bucket/prefix).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print views of the store and the fleet queries for DuckDB, ClickHouse or Spark.

    Each table is a view over the files the store's manifest commits, each read to the
    rows it committed: the answers are the store as it was when printed, to the last
    digit what specscope says (acceptance = sum of accepted / sum of drafted tokens,
    τ = 1 + accepted / drafts, a_i = accepted at i / drafts: sums divided, never ratios
    averaged). Paths are written as --store gives them (a relative store is read from
    the folder the engine runs in), or under --location. DuckDB and ClickHouse get SQL,
    Spark a PySpark script.
    """
    from specscope.queries.engines import script
    from specscope.store.objects import is_url

    try:
        if is_url(store):
            text = _remote_script(engine, store, query, location)
        else:
            text = script(engine, Path(store), query, location)
    except SpecscopeError as exc:
        raise fail(exc) from exc
    say(text, nl=False)


def _remote_script(engine: str, url: str, query: str | None, location: str | None) -> str:
    """The views of a store on object storage, read where it is (or at ``location``): its
    committed files are listed from a snapshot of it (``RemoteStore.snapshot``)."""
    import tempfile

    from specscope.queries.engines import script
    from specscope.store.reading import RemoteStore, open_store

    store = open_store(url)
    assert isinstance(store, RemoteStore)  # a URL's
    with tempfile.TemporaryDirectory(prefix="specscope-sql-") as folder:
        store.snapshot(Path(folder))
        return script(engine, Path(folder), query, location or url)


__all__ = ["EXAMPLES", "sql"]
