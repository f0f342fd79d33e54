"""The options the commands share: the store, JSON, thresholds and redirects."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from specscope.store import DEFAULT_STORE

# A string, not a Path: ``s3://bucket/prefix`` would lose its ``//`` as a Path.
StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        envvar="SPECSCOPE_STORE",
        help=f"Store directory, or s3://bucket/prefix (AWS_* variables) "
        f"(default ./{DEFAULT_STORE}, or $SPECSCOPE_STORE).",
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


__all__ = [
    "ConfigOption",
    "FailOnOption",
    "FollowRedirectsOption",
    "JsonOption",
    "ReferenceOption",
    "StoreOption",
]
