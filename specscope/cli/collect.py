"""The commands that bring telemetry in: ``ingest`` (logs), ``pull`` (Prometheus) and
``scrape`` (a /metrics endpoint). Each calls the library and prints its report."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from specscope.cli.commands import Commands
from specscope.cli.options import FollowRedirectsOption, JsonOption, StoreOption
from specscope.cli.output import fail, print_json, say
from specscope.errors import ExitStatus, SpecscopeError
from specscope.store import DEFAULT_STORE

if TYPE_CHECKING:
    from specscope.prometheus.pull import PullReport

COMMANDS = Commands()

PROGRESS_BYTES = 50_000_000  # logs smaller than this are read before a bar would help


@contextlib.contextmanager
def _progress_bar(paths: list[str]) -> Iterator[Callable[[str, int, int], None] | None]:
    """A progress bar on standard error for big logs, when it is a terminal."""
    sizes = [os.path.getsize(p) for p in paths if p != "-" and os.path.isfile(p)]
    least = int(os.environ.get("SPECSCOPE_PROGRESS_BYTES", PROGRESS_BYTES))
    if not sys.stderr.isatty() or max(sizes, default=0) < least:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    tasks: dict[str, Any] = {}
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:

        def update(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], completed=done)
            bar.refresh()  # a block takes a fraction of a second: show each one

        yield update


@COMMANDS.command(
    epilog="Examples:\n\n"
    "  specscope ingest server.log\n\n"
    "  docker logs -t vllm 2>&1 | specscope ingest - --set hardware=H100\n\n"
    "  specscope ingest run1.log.gz run2.log --store ./data --json\n\n"
    "  specscope ingest --jobs 2 server.log.1.gz server.log.2.gz   # two cores, two logs\n\n"
    "  specscope ingest server.log --set quantization=awq   # say what the log did not\n\n"
    "  specscope ingest server.log --run s54e95cd2ea-3 --set spec_method=mtp",
)
def ingest(
    paths: Annotated[
        list[str],
        typer.Argument(help="Log files (.gz too); '-' reads standard input.", show_default=False),
    ],
    store: StoreOption = DEFAULT_STORE,
    year: Annotated[
        int | None,
        typer.Option(
            help="Year of the log's first timestamp (vLLM prints none); "
            "default: from the file's modification time."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Add what the log does not say, as key=value "
            "(quantization, hardware, k, enable_prefix_caching, ...). Repeatable.",
        ),
    ] = None,
    label: Annotated[str | None, typer.Option(help="A label for the runs of these logs.")] = None,
    run: Annotated[
        list[str] | None,
        typer.Option(
            help="Set --set/--label on this run of the store only (repeatable; "
            "specscope runs lists them). Without it, a log already in the store gets them "
            "on all its runs, without being read again.",
        ),
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            min=1,
            help="Read up to this many logs side by side, a process each (each takes the "
            "memory one log takes). Logs that may hold the same text are read in turn.",
        ),
    ] = 1,
    as_json: JsonOption = False,
) -> None:
    """Read server logs into the store and summarise what was found.

    Prints, per log: the spec-decode, engine-stats and run counts, each run's configuration
    and weighted acceptance (sum of counts, then divide), and the lines skipped and why.
    Ingesting the same file again adds nothing; a file that grew adds only its new records.
    """
    from specscope.cli.render import ingest_text
    from specscope.logs.ingest import ingest as run_ingest
    from specscope.logs.ingest import parse_overrides

    try:
        overrides = parse_overrides(set_ or [])
        with _progress_bar(paths) as progress:
            report = run_ingest(
                paths,
                store=store,
                year=year,
                overrides=overrides,
                label=label,
                progress=progress,
                jobs=jobs,
                runs=run,
            )
    except SpecscopeError as exc:
        raise fail(exc) from exc
    if as_json:
        print_json(report.to_dict())
    else:
        say(ingest_text(report))
    for error in report.errors:
        say(f"specscope: error: {error.one_line()}", err=True)
    if report.errors:
        raise typer.Exit(int(report.errors[0].exit_status))


@COMMANDS.command(
    epilog="Examples:\n\n"
    "  specscope pull --prometheus http://prom:9090 --since 6h\n\n"
    "  specscope pull --prometheus http://prom:9090 --selector '{job=\"vllm\"}'   # from cron\n\n"
    "  specscope pull --prometheus http://mimir:8080/prometheus --chunk-series 500\n\n"
    "  specscope pull --prometheus https://thanos.example/prometheus --start 2026-11-20T00:00Z "
    "--end 2026-11-20T06:00Z",
)
def pull(
    prometheus: Annotated[
        str,
        typer.Option(
            "--prometheus",
            help="Prometheus (or Thanos, Mimir, VictoriaMetrics) "
            "base URL, with a path prefix if it has one.",
            show_default=False,
        ),
    ],
    since: Annotated[
        str | None,
        typer.Option(
            help="How far back the first pull goes "
            "(6h, 90m). Later pulls continue from the "
            "last one."
        ),
    ] = None,
    start: Annotated[str | None, typer.Option(help="Window start (RFC 3339 or unix).")] = None,
    end: Annotated[str | None, typer.Option(help="Window end (default: now).")] = None,
    selector: Annotated[str | None, typer.Option(help='Label matchers, e.g. {job="vllm"}.')] = None,
    store: StoreOption = DEFAULT_STORE,
    timeout: Annotated[float, typer.Option(help="Seconds per request.")] = 30.0,
    retries: Annotated[int, typer.Option(help="Retries on 429/5xx, with backoff.")] = 3,
    deadline: Annotated[
        str | None,
        typer.Option(
            help="Give up the whole pull after this long (10m); what came before is kept."
        ),
    ] = None,
    max_answer_mb: Annotated[
        float | None,
        typer.Option(
            help="Refuse a Prometheus answer over this many MB "
            "(default 100, or $SPECSCOPE_MAX_ANSWER_MB)."
        ),
    ] = None,
    chunk_series: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Read at most this many series a request, a chunk of instances at a time "
            "(default 2000; memory follows the chunk: 2000 takes a 1,000-server fleet to "
            "about 500 MB, 500 to under 400 MB for 2.5x the requests); 0 reads every series "
            "at once.",
        ),
    ] = None,
    follow_redirects: FollowRedirectsOption = False,
    ca_bundle: Annotated[str | None, typer.Option(help="CA bundle for https.")] = None,
    insecure: Annotated[bool, typer.Option(help="Do not verify https certificates.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Pull the speculative-decoding counters and their neighbours from Prometheus.

    Stores interval rows (differences between raw samples, reset-aware) in the same tables
    that log ingest fills. Auth: $SPECSCOPE_PROMETHEUS_TOKEN (bearer), or
    $SPECSCOPE_PROMETHEUS_USER / _PASSWORD, or netrc. Credentials are never printed or stored.
    """
    from specscope.durations import parse_duration
    from specscope.prometheus.pull import pull as run_pull

    chunking: dict[str, Any] = (
        {} if chunk_series is None else {"chunk_series": chunk_series or None}
    )
    try:
        report = run_pull(
            prometheus,
            store=store,
            since=since,
            start=start,
            end=end,
            selector=selector,
            timeout=timeout,
            retries=retries,
            ca_bundle=ca_bundle,
            insecure=insecure,
            deadline=parse_duration(deadline).total_seconds() if deadline else None,
            max_answer_mb=max_answer_mb,
            follow_redirects=follow_redirects,
            **chunking,
        )
    except SpecscopeError as exc:
        raise fail(exc) from exc
    _print_pull(report, as_json, "what came before is stored and the next pull starts there")


def _print_pull(report: PullReport, as_json: bool, kept: str) -> None:
    """A pull's or a scrape's report; a window that failed is exit 10, after the report."""
    from specscope.cli.render import pull_text

    if as_json:
        print_json(report.to_dict())
    else:
        say(pull_text(report))
    if report.failed:
        say(f"specscope: error: {report.url}: stopped at {report.failed[0]}; {kept}", err=True)
        raise typer.Exit(int(ExitStatus.PROMETHEUS))


@COMMANDS.command(
    epilog="Examples:\n\n"
    "  specscope scrape http://localhost:8000/metrics --interval 10s --duration 10m\n\n"
    "  specscope scrape http://localhost:30000/metrics --count 7 --interval 5s --json",
)
def scrape(
    url: Annotated[str, typer.Argument(help="A vLLM or SGLang /metrics URL.", show_default=False)],
    interval: Annotated[str, typer.Option(help="Time between polls (10s, 1m).")] = "10s",
    count: Annotated[int | None, typer.Option(help="Polls to make (at least 2).")] = None,
    duration: Annotated[str | None, typer.Option(help="Poll for this long (10m).")] = None,
    store: StoreOption = DEFAULT_STORE,
    timeout: Annotated[
        float, typer.Option(help="Seconds per poll, all of it (a trickling answer included).")
    ] = 10.0,
    max_body_mb: Annotated[
        float | None,
        typer.Option(
            help="Refuse a /metrics body over this many MB (default 64, or $SPECSCOPE_MAX_BODY_MB)."
        ),
    ] = None,
    follow_redirects: FollowRedirectsOption = False,
    as_json: JsonOption = False,
) -> None:
    """Read a /metrics endpoint directly (no Prometheus) and store the intervals.

    Polls the endpoint, differences consecutive polls of each counter (reset-aware), and
    stores interval rows in the same tables as ingest and pull.
    """
    from specscope.durations import parse_duration
    from specscope.prometheus.scrape import scrape as run_scrape

    try:
        report = run_scrape(
            url,
            store=store,
            interval=parse_duration(interval).total_seconds(),
            count=count,
            duration=parse_duration(duration).total_seconds() if duration else None,
            timeout=timeout,
            max_body_mb=max_body_mb,
            follow_redirects=follow_redirects,
        )
    except SpecscopeError as exc:
        raise fail(exc) from exc
    _print_pull(report, as_json, "the polls before are stored")


__all__ = ["COMMANDS"]
