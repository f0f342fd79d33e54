"""``specscope formats``: the log formats specscope reads, one definition each under
``parsers/``, with their sample lines on request."""

from __future__ import annotations

from typing import Annotated

import typer

from specscope.cli.options import JsonOption
from specscope.cli.output import print_json, say

EXAMPLES = "Examples:\n\n  specscope formats\n\n  specscope formats --samples"


def formats(
    samples: Annotated[
        bool, typer.Option("--samples", help="Show each format's sample lines.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """List the log formats specscope reads (one definition each under parsers/)."""
    from specscope.logs.definitions import load_definitions

    defs = load_definitions()
    if as_json:
        print_json(
            [
                {
                    "name": d.name,
                    "kind": d.kind,
                    "engine": d.engine,
                    "title": d.title,
                    "versions": d.versions,
                    "table": d.table,
                    "samples": [s.text for s in d.samples],
                }
                for d in defs
            ]
        )
        return
    for d in defs:
        say(f"{d.name}  [{d.kind}{', ' + d.table if d.table else ''}]  {d.title}")
        if d.versions:
            say(f"    versions: {d.versions}")
        if samples:
            for s in d.samples:
                for line in s.text.splitlines():
                    say(f"    | {line}")
                say("")


__all__ = ["EXAMPLES", "formats"]
