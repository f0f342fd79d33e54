"""The command line: each command calls the library and prints its result.

Input: argv and the environment. Output: text or JSON, and an ``ExitStatus``.
Imports: anything in the package; it is the only importer of typer and rich, and
nothing in the package imports it (``specscope.cli:entry_point`` is the script).
"""

from specscope.cli.app import entry_point, main

__all__ = ["entry_point", "main"]
