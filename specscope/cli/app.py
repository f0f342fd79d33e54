"""The ``specscope`` command: a thin layer over the library (the only module importing typer).

Domain errors become one line on stderr and the exit status their class names
(``specscope.errors.ExitStatus``); a traceback is shown only with ``SPECSCOPE_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, Protocol, runtime_checkable

import typer

import specscope.cli.analyse as store_commands
import specscope.cli.collect as input_commands
import specscope.cli.sql as sql_command
from specscope.cli.check import EXAMPLES as CHECK_EXAMPLES
from specscope.cli.check import check
from specscope.cli.compact import EXAMPLES as COMPACT_EXAMPLES
from specscope.cli.compact import compact
from specscope.cli.conventions import conventional
from specscope.cli.formats import EXAMPLES as FORMATS_EXAMPLES
from specscope.cli.formats import formats
from specscope.cli.output import fail, say
from specscope.cli.triage import EXAMPLES as TRIAGE_EXAMPLES
from specscope.cli.triage import triage
from specscope.errors import ExitStatus, SpecscopeError

# What a command needs is imported in its body: `specscope --help` and a mistyped option
# answer at once, without loading polars, pyarrow or the charts (tests/test_docs.py holds it).

app = typer.Typer(
    name="specscope",
    help="Speculative-decoding telemetry from vLLM and SGLang, into Parquet and answers.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            said = version("specscope")
        except PackageNotFoundError:  # run from a checkout that was never installed
            said = "(not installed)"
        say(f"specscope {said}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Speculative-decoding telemetry from vLLM and SGLang, into Parquet and answers."""


# The first command a user needs: from a paste to a verdict (and a report) in one step.
app.command(epilog=TRIAGE_EXAMPLES)(triage)

app.command(epilog=CHECK_EXAMPLES)(check)
app.command(epilog=COMPACT_EXAMPLES)(compact)
app.command(epilog=sql_command.EXAMPLES)(sql_command.sql)

# Telemetry in (ingest, pull, scrape), then the store read (detect, advise, report,
# compare, runs): each module lists its commands, added here in that order.
for command, epilog in input_commands.COMMANDS.listed + store_commands.COMMANDS.listed:
    app.command(epilog=epilog)(command)


@app.command(
    epilog="Examples:\n\n  specscope rules --out specscope-rules.yml\n\n"
    "  specscope rules --selector '{job=\"vllm\"}' --config detect.toml > rules.yml\n\n"
    "  promtool check rules specscope-rules.yml",
)
def rules(
    out: Annotated[Path | None, typer.Option(help="Write here (default: standard output).")] = None,
    selector: Annotated[str | None, typer.Option(help='Label matchers, e.g. {job="vllm"}.')] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="TOML with thresholds to change (the same file as detect's)."),
    ] = None,
) -> None:
    """Write Prometheus recording and alerting rules that mirror the detectors.

    Recording rules: acceptance rate, mean acceptance length and per-position acceptance per
    instance, model and engine (rates summed before dividing). Alerts: zero acceptance while
    drafting, low acceptance, concurrency collapse, KV cache saturated with a queue.
    """
    from specscope.prometheus.rules import rules_yaml

    try:
        text = rules_yaml(str(config) if config else None, selector)
    except SpecscopeError as exc:
        raise fail(exc) from exc
    if out is None:
        say(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise fail(SpecscopeError(f"cannot write ({exc.strerror})", path=str(out))) from exc
    say(f"wrote {out}")


@app.command(
    epilog="Examples:\n\n  specscope watch /var/log/vllm/server.log\n\n"
    "  docker logs -f vllm 2>&1 | specscope watch -\n\n"
    "  specscope watch http://localhost:8000/metrics --interval 5s\n\n"
    "  specscope watch server.log --store ./data   # keeps what it saw at Ctrl-C",
)
def watch(
    source: Annotated[
        str,
        typer.Argument(
            help="A log being written, '-' for standard input (a pipe), or a /metrics URL.",
            show_default=False,
        ),
    ],
    interval: Annotated[str, typer.Option(help="How often to look (10s, 1s).")] = "10s",
    store: Annotated[
        str | None,
        typer.Option(
            help="Ingest the log into this store (a folder, or s3://bucket/prefix) when the "
            "watch ends."
        ),
    ] = None,
) -> None:
    """A live view: acceptance now and recently, mean acceptance length, per-position bars,
    requests running and waiting, KV cache usage; findings printed as they appear. Follows
    a growing log (and its rotation) or polls /metrics. Ctrl-C ends it with a summary."""
    from specscope.cli.watch import watch as run_watch
    from specscope.durations import parse_duration

    try:
        summary = run_watch(source, interval=parse_duration(interval).total_seconds(), store=store)
    except SpecscopeError as exc:
        raise fail(exc) from exc
    say(summary)


app.command(epilog=FORMATS_EXAMPLES)(formats)


@runtime_checkable
class _Shows(Protocol):
    """A click exception (click's own or the copy typer vendors): it prints itself."""

    def show(self) -> None: ...


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (``ExitStatus``) instead of exiting."""
    try:
        command = conventional(typer.main.get_command(app))
        status = command.main(args=argv, prog_name="specscope", standalone_mode=False)
        if isinstance(status, int):
            return status
    except typer.Exit as exc:
        return exc.exit_code
    except SpecscopeError as exc:
        say(f"specscope: error: {exc.one_line()}", err=True)
        return int(exc.exit_status)
    except Exception as exc:
        # Usage errors and aborts come from click, or from the copy of it typer vendors.
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        if "ClickException" in kinds and isinstance(exc, _Shows):
            exc.show()
            return int(ExitStatus.USAGE)
        if "Abort" in kinds:
            say("specscope: aborted", err=True)
            return int(ExitStatus.ERROR)
        # An internal bug: one line, the traceback on request.
        if os.environ.get("SPECSCOPE_DEBUG"):
            traceback.print_exc()
        say(
            f"specscope: internal error: {type(exc).__name__}: {exc} "
            "(set SPECSCOPE_DEBUG=1 for the traceback, and please report it)",
            err=True,
        )
        return int(ExitStatus.ERROR)
    return int(ExitStatus.SUCCESS)


def entry_point() -> None:
    sys.exit(main())


__all__ = ["app", "main"]
