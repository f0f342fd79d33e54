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
    from specscope.exposition import NAMES

    # By engine, as users look for theirs; formats of no one engine (an author's stated
    # comparison) last. Each engine's /metrics names are read by pull, scrape and pastes.
    engines = sorted({d.engine for d in defs} | set(NAMES), key=lambda e: (not e, e))
    for engine in engines:
        say(f"{engine or 'any engine'}:")
        for d in defs:
            if d.engine != engine:
                continue
            say(f"  {d.name}  [{d.kind}{', ' + d.table if d.table else ''}]  {d.title}")
            if d.versions:
                say(f"      versions: {d.versions}")
            if samples:
                for s in d.samples:
                    for line in s.text.splitlines():
                        say(f"      | {line}")
                    say("")
        if engine in NAMES:
            say(f"  /metrics (pull, scrape, pasted): {', '.join(NAMES[engine])}")


__all__ = ["EXAMPLES", "formats"]
