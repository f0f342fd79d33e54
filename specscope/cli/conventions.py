"""What the commands' help looks like to a user of other command-line tools: placeholders
that are words (``--store DIR``, ``--set KEY=VALUE``, ``LOG...``), not the types typer
shows (``<path>``, ``<list[str]>``, ``{paths}``), and examples printed as written, so a
line pasted from ``--help`` runs as it is (a ``# from cron`` comment stays on its line).

Typer builds the click command anew for each call; ``conventional`` takes it and sets
each parameter's placeholder. The names below are the options' parameter names; any
other gets its name in capitals. ``tests/test_docs.py`` reads every command's help for
a placeholder left as a type.
"""

from __future__ import annotations

from typing import Any

# An option's value, by what it holds.
OPTION_WORDS = {
    "cost_ratio": "RATIO",
    "count": "N",
    "deadline": "DURATION",
    "duration": "DURATION",
    "end": "TIME",
    "fail_on": "LEVEL",
    "interval": "DURATION",
    "jobs": "N",
    "max_answer_mb": "MB",
    "max_body_mb": "MB",
    "out": "FILE",
    "config": "FILE",
    "reference": "FILE",
    "ca_bundle": "FILE",
    "prometheus": "URL",
    "retries": "N",
    "run": "RUN",
    "selector": "MATCHERS",
    "set_": "KEY=VALUE",
    "since": "DURATION",
    "start": "TIME",
    "store": "DIR",
    "timeout": "SECONDS",
    "year": "YEAR",
}
ARGUMENT_WORDS = {"paths": "LOG", "source": "LOG|URL", "url": "URL"}


def _word(name: str, table: dict[str, str]) -> str:
    return table.get(name, name.strip("_").upper())


def conventional(command: Any) -> Any:
    """``command`` (the click group typer made) with word placeholders and verbatim
    examples, for it and each of its subcommands."""
    for sub in getattr(command, "commands", {}).values():
        conventional(sub)
    if command.epilog and command.epilog.startswith("Examples:"):
        lines = [line for line in command.epilog.splitlines()[1:] if line.strip()]
        # "\b" on a line of its own: click prints the paragraph after it unwrapped.
        command.epilog = "Examples:\n\n\b\n" + "\n".join(lines)
    for param in command.params:
        if param.param_type_name == "argument":
            word = _word(param.name, ARGUMENT_WORDS)
            many = param.nargs != 1
            shown = word + ("..." if many else "")
            param.metavar = shown
            # typer would add its type after the name, and braces in the usage line
            param.display_type_rich = lambda ctx: None
            param._usage_display_name = lambda shown=shown, req=param.required: (
                shown if req else f"[{shown}]"
            )
        elif param.param_type_name == "option" and not param.is_flag and param.metavar is None:
            param.metavar = _word(param.name, OPTION_WORDS)
    return command


__all__ = ["ARGUMENT_WORDS", "OPTION_WORDS", "conventional"]
