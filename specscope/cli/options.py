"""What the commands share: the store and JSON options, and how a domain error ends one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from specscope.errors import SpecscopeError
from specscope.store.layout import DEFAULT_STORE

StoreOption = Annotated[
    Path,
    typer.Option(
        "--store",
        envvar="SPECSCOPE_STORE",
        help=f"Store directory (default ./{DEFAULT_STORE}, or $SPECSCOPE_STORE).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
FailOnOption = Annotated[
    str | None,
    typer.Option(help="Exit 11 when a finding is at least this severe: warning or critical."),
]
ConfigOption = Annotated[Path | None, typer.Option(help="TOML with thresholds to change.")]
ReferenceOption = Annotated[Path | None, typer.Option(help="TOML with more reference entries.")]
FollowRedirectsOption = Annotated[
    bool,
    typer.Option(
        "--follow-redirects",
        help="Follow a redirect to another host (refused otherwise), without the credentials.",
    ),
]


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def fail(exc: SpecscopeError) -> typer.Exit:
    typer.echo(f"specscope: error: {exc.one_line()}", err=True)
    return typer.Exit(int(exc.exit_status))


__all__ = [
    "ConfigOption",
    "FailOnOption",
    "FollowRedirectsOption",
    "JsonOption",
    "ReferenceOption",
    "StoreOption",
    "fail",
    "print_json",
]
