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
    store: StoreOption = Path(DEFAULT_STORE),
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

    try:
        text = script(engine, store, query, location)
    except SpecscopeError as exc:
        raise fail(exc) from exc
    say(text, nl=False)


__all__ = ["EXAMPLES", "sql"]
