"""The command line: the only importer of typer and rich (TODO)."""

from specscope.cli.app import entry_point, main

__all__ = ["entry_point", "main"]
