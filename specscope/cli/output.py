"""The one way the CLI prints: every line a command writes to the terminal, its JSON
included, passes here, so no command can print a secret or a terminal control sequence
that a log carried (``tests/test_redaction.py`` checks that nothing else in ``cli/``
prints)."""

from __future__ import annotations

import json
from typing import Any

import typer

from specscope.errors import SpecscopeError
from specscope.report.redact import Redactor, redact_json

_SAFE = Redactor(hosts=False, args=False)


def safe(text: str) -> str:
    """Text as specscope prints it: no terminal controls, no secrets (tokens, keys,
    passwords, credentials in URLs, e-mail addresses, home folders). Hosts are kept: this
    is the user's own terminal; reports hide them too."""
    return _SAFE.text(text)


def say(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Print text (on stderr with ``err``), secrets hidden and terminal controls stripped."""
    typer.echo(safe(text), err=err, nl=nl)


def print_json(data: Any, *, redact: bool = True) -> None:
    """Print data as JSON, every string redacted as text is (hosts kept: a terminal);
    ``redact=False`` only for a user's explicit ``--no-redact``."""
    # Redacted as data, not as text: a pattern must never cut through JSON's quoting.
    # Unredacted, it is still stripped of terminal controls (json.dumps keeps C1 ones raw).
    shown = redact_json(data, None if redact else Redactor(enabled=False))
    text = json.dumps(shown, indent=2, default=str, ensure_ascii=False)
    typer.echo(text)


def fail(exc: SpecscopeError) -> typer.Exit:
    """Print a domain error as one line on stderr; the Exit carries its status."""
    say(f"specscope: error: {exc.one_line()}", err=True)
    return typer.Exit(int(exc.exit_status))


__all__ = ["fail", "print_json", "safe", "say"]
