"""The ``specscope`` command: a thin layer over the library (the only module importing typer).

Domain errors become one line on stderr and the exit status their class names
(``specscope.errors.ExitStatus``); a traceback is shown only with ``SPECSCOPE_DEBUG=1``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, runtime_checkable

import typer

import specscope.cli.sql as sql_command
from specscope.cli.check import EXAMPLES as CHECK_EXAMPLES
from specscope.cli.check import check
from specscope.cli.conventions import conventional
from specscope.cli.formats import EXAMPLES as FORMATS_EXAMPLES
from specscope.cli.formats import formats
from specscope.cli.options import (
    ConfigOption,
    FailOnOption,
    FollowRedirectsOption,
    JsonOption,
    ReferenceOption,
    StoreOption,
)
from specscope.cli.output import fail, print_json, say
from specscope.cli.triage import EXAMPLES as TRIAGE_EXAMPLES
from specscope.cli.triage import triage
from specscope.errors import ExitStatus, SpecscopeError, UsageError
from specscope.store import DEFAULT_STORE

# What a command needs is imported in its body: `specscope --help` and a mistyped option
# answer at once, without loading polars, pyarrow or Altair (tests/test_docs.py holds it).
if TYPE_CHECKING:
    from specscope.prometheus.pull import PullReport

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
app.command(epilog=sql_command.EXAMPLES)(sql_command.sql)

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


@app.command(
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
    store: StoreOption = Path(DEFAULT_STORE),
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


@app.command(
    epilog="Examples:\n\n"
    "  specscope pull --prometheus http://prom:9090 --since 6h\n\n"
    "  specscope pull --prometheus http://prom:9090 --selector '{job=\"vllm\"}'   # from cron\n\n"
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
    store: StoreOption = Path(DEFAULT_STORE),
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


@app.command(
    epilog="Examples:\n\n"
    "  specscope scrape http://localhost:8000/metrics --interval 10s --duration 10m\n\n"
    "  specscope scrape http://localhost:30000/metrics --count 7 --interval 5s --json",
)
def scrape(
    url: Annotated[str, typer.Argument(help="A vLLM or SGLang /metrics URL.", show_default=False)],
    interval: Annotated[str, typer.Option(help="Time between polls (10s, 1m).")] = "10s",
    count: Annotated[int | None, typer.Option(help="Polls to make (at least 2).")] = None,
    duration: Annotated[str | None, typer.Option(help="Poll for this long (10m).")] = None,
    store: StoreOption = Path(DEFAULT_STORE),
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


@app.command(
    epilog="Examples:\n\n"
    "  specscope detect\n\n"
    "  specscope detect --run s54e95cd2ea-2 --json\n\n"
    "  specscope detect --since 2h --fail-on critical   # from cron: exit 11 on a finding",
)
def detect(
    store: StoreOption = Path(DEFAULT_STORE),
    run: Annotated[list[str] | None, typer.Option(help="Only this run (repeatable).")] = None,
    since: Annotated[str | None, typer.Option(help="Only records of the last 2h, 30m, ...")] = None,
    fail_on: FailOnOption = None,
    config: ConfigOption = None,
    reference: ReferenceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Find what is wrong with speculative decoding in the store's runs, worst first.

    Kinds: zero_acceptance, low_acceptance, position_cliff, k_too_large,
    concurrency_collapse, prefix_cache_penalty, no_speedup, kv_cache_saturation,
    acceptance_drift, insufficient_data, error_signature. Each finding gives the evidence
    (source lines, window, numbers and sample size), what was expected, why, and what to do.
    """
    from specscope.analysis.detectors import detect as run_detect
    from specscope.analysis.findings import Severity
    from specscope.cli.render import finding_text
    from specscope.durations import parse_duration
    from specscope.store.reading import open_store
    from specscope.thresholds import load_config, load_reference

    try:
        threshold = Severity.parse(fail_on) if fail_on else None
        # The configuration first: a mistake in it is the user's to fix before any work.
        cfg, refs = load_config(config), load_reference(reference)
        window = parse_duration(since) if since else None
        found = run_detect(open_store(store), run_ids=run, since=window, config=cfg, reference=refs)
    except ValueError as exc:
        raise fail(UsageError(str(exc))) from exc
    except SpecscopeError as exc:
        raise fail(exc) from exc
    if as_json:
        print_json([f.to_dict() for f in found])
    else:
        say("\n\n".join(finding_text(f) for f in found) if found else "no findings")
    if threshold is not None and any(f.severity >= threshold for f in found):
        raise typer.Exit(int(ExitStatus.FINDINGS))


@app.command(
    epilog="Examples:\n\n  specscope advise\n\n  specscope advise --run s54e95cd2ea-3 "
    "--cost-ratio 0.1 --json",
)
def advise(
    store: StoreOption = Path(DEFAULT_STORE),
    run: Annotated[list[str] | None, typer.Option(help="Only this run (repeatable).")] = None,
    cost_ratio: Annotated[
        float | None, typer.Option(help="Cost of one draft position relative to a target pass (c).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Which k to draft: tau(k') and the expected speedup for each k' up to the run's k."""
    from specscope.analysis.advise import advice_text
    from specscope.analysis.advise import advise as run_advise
    from specscope.store.reading import open_store

    try:
        items = run_advise(open_store(store), run_ids=run, cost=cost_ratio)
    except SpecscopeError as exc:
        raise fail(exc) from exc
    if as_json:
        print_json([a.to_dict() for a in items])
    else:
        say(advice_text(items))


@app.command(
    epilog="Examples:\n\n"
    "  specscope report --out report.md        # PNG charts in report_files/\n\n"
    "  specscope report --run s09b4732cdd-5 --out triage.html\n\n"
    "  specscope report --per-run --out fleet.html   # every run listed, not by setup\n\n"
    "  specscope report --json",
)
def report(
    out: Annotated[
        Path | None,
        typer.Option(help="report.md (Markdown, PNG charts beside it) or report.html (one file)."),
    ] = None,
    store: StoreOption = Path(DEFAULT_STORE),
    run: Annotated[list[str] | None, typer.Option(help="Only this run (repeatable).")] = None,
    redact: Annotated[
        bool,
        typer.Option(
            "--redact/--no-redact", help="Hide tokens, keys and home paths (on by default)."
        ),
    ] = True,
    redact_hosts: Annotated[
        bool,
        typer.Option(
            "--redact-hosts/--no-redact-hosts", help="Hide host names and IP addresses (on)."
        ),
    ] = True,
    per_run: Annotated[
        bool,
        typer.Option(
            "--per-run",
            help="List every run and every finding, charts by run (over 20 runs the report "
            "groups them by setup and names the worst and the outliers).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Write a triage report to attach to a GitHub issue (Markdown or HTML).

    A verdict, the runs, the findings with redacted log lines, per-position acceptance and
    the k advice, charts, and what moves acceptance across the runs of the store. Over
    many runs: the setups, the worst findings of each kind and the outliers (--per-run for
    all).
    """
    # Here, not at the top: Altair takes a while to import and most commands need none of it.
    from specscope.report.build import build_report
    from specscope.report.redact import Redactor
    from specscope.report.write import report_kind, write_report
    from specscope.store.reading import open_store

    try:
        if out is not None and not as_json:
            report_kind(out)  # before the work, not after it
        redactor = Redactor(enabled=redact, hosts=redact_hosts)
        built = build_report(
            open_store(store),
            run_ids=run,
            redactor=redactor,
            with_charts=not as_json,
            per_run=per_run,
        )
        if as_json:
            print_json(built.to_dict(), redact=redact)
            return
        if out is None:
            raise UsageError("--out report.md or --out report.html is needed (or --json)")
        path = write_report(built, out)
    except SpecscopeError as exc:
        raise fail(exc) from exc
    except OSError as exc:
        raise fail(SpecscopeError(f"cannot write ({exc.strerror})", path=str(out))) from exc
    say(
        f"wrote {path} ({len(built.findings)} findings, {len(built.charts)} charts). "
        f"{built.redaction}"
    )


@app.command(
    epilog="Examples:\n\n  specscope compare s54e95cd2ea-2 s54e95cd2ea-3\n\n"
    "  specscope compare RUN_A RUN_B --json",
)
def compare(
    run_a: Annotated[str, typer.Argument(help="The first run (A).", show_default=False)],
    run_b: Annotated[str, typer.Argument(help="The second run (B).", show_default=False)],
    store: StoreOption = Path(DEFAULT_STORE),
    as_json: JsonOption = False,
) -> None:
    """Two runs side by side: what differs in their configuration, and each measure's
    difference with its 95% interval (Newcombe, drafts as trials)."""
    from specscope.analysis.compare import compare as run_compare
    from specscope.analysis.compare import comparison_text
    from specscope.store.reading import open_store

    try:
        result = run_compare(open_store(store), run_a, run_b)
    except SpecscopeError as exc:
        raise fail(exc) from exc
    if as_json:
        print_json(result.to_dict())
    else:
        say(comparison_text(result))


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
        Path | None, typer.Option(help="Ingest the log into this store when the watch ends.")
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


@app.command(
    epilog="Examples:\n\n  specscope runs\n\n  specscope runs --store ./data --json",
)
def runs(store: StoreOption = Path(DEFAULT_STORE), as_json: JsonOption = False) -> None:
    """List the server runs in a store with their configuration and weighted acceptance."""
    from specscope.analysis.runs import runs_overview
    from specscope.cli.render import runs_text
    from specscope.store.reading import open_store

    try:
        frame = runs_overview(open_store(store))
    except SpecscopeError as exc:
        raise fail(exc) from exc
    rows = frame.to_dicts()
    if as_json:
        print_json(rows)
    else:
        say(runs_text(rows))


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
