"""``specscope triage``: from a pasted log to a verdict and a report, in one step.

Ingest into a store that lives only as long as the command (unless ``--store`` names one),
detect on the runs just read, print the verdict and the findings, and with ``--out`` write
the report to attach. The library calls are the same as ``ingest``, ``detect`` and
``report``; this only strings them together.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from specscope.cli.options import (
    ConfigOption,
    FailOnOption,
    JsonOption,
    ReferenceOption,
)
from specscope.cli.output import fail, print_json, say
from specscope.errors import ExitStatus, SpecscopeError, UsageError

if TYPE_CHECKING:
    from specscope.logs.ingest import IngestReport

EXAMPLES = (
    "Examples:\n\n"
    "  specscope triage server.log\n\n"
    "  pbpaste | specscope triage - --out triage.md      # a paste, to a GitHub comment\n\n"
    "  docker logs vllm 2>&1 | specscope triage - --out triage.html\n\n"
    "  specscope triage run.log --set spec_method=mtp --set quantization=awq\n\n"
    "  specscope triage server.log --fail-on critical    # exit 11 on a critical finding"
)


def triage(
    paths: Annotated[
        list[str],
        typer.Argument(help="Log files (.gz too); '-' reads standard input.", show_default=False),
    ],
    out: Annotated[
        Path | None,
        typer.Option(help="Also write the report: report.md (PNG charts beside it) or .html."),
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option(
            help="Keep what was read in this store (default: a throw-away one).",
            show_default=False,
        ),
    ] = None,
    year: Annotated[int | None, typer.Option(help="Year of the log's first timestamp.")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Add what the log does not say, as key=value (spec_method, quantization, k, "
            "hardware, ...). Repeatable.",
        ),
    ] = None,
    label: Annotated[str | None, typer.Option(help="A label for the runs of these logs.")] = None,
    fail_on: FailOnOption = None,
    config: ConfigOption = None,
    reference: ReferenceOption = None,
    redact: Annotated[
        bool,
        typer.Option(
            "--redact/--no-redact", help="Hide tokens, keys and paths in the report (on)."
        ),
    ] = True,
    redact_hosts: Annotated[
        bool,
        typer.Option(
            "--redact-hosts/--no-redact-hosts",
            help="Hide host names and IP addresses in the report (on).",
        ),
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """Give the verdict on a log or a paste: ingest, detect and (with --out) report at once.

    Prints the verdict and every finding with its confidence. Nothing is left behind unless
    --store is given. The exit status is detect's: 11 when a finding reaches --fail-on, the
    input's own status when no input could be read.
    """
    from specscope.analysis.detectors import findings_of
    from specscope.analysis.evidence import gather
    from specscope.analysis.findings import Severity
    from specscope.analysis.verdict import verdict_of
    from specscope.cli.render import finding_text
    from specscope.logs.ingest import ingest as run_ingest
    from specscope.logs.ingest import parse_overrides
    from specscope.store.reading import open_store
    from specscope.thresholds import load_config, load_reference

    try:
        threshold = Severity.parse(fail_on) if fail_on else None
        overrides = parse_overrides(set_ or [])
        cfg, refs = load_config(config), load_reference(reference)
        if out is not None:
            from specscope.report.write import report_kind

            report_kind(out)  # a wrong name fails before the work, not after it
    except ValueError as exc:
        raise fail(UsageError(str(exc))) from exc
    except SpecscopeError as exc:
        raise fail(exc) from exc
    with tempfile.TemporaryDirectory(prefix="specscope-triage-") as scratch:
        where = store if store is not None else Path(scratch) / "store"
        try:
            read = run_ingest(paths, store=where, year=year, overrides=overrides, label=label)
            run_ids = [r.run_id for s in read.sources if s.error is None for r in s.runs]
            found = []
            if run_ids:
                ev = gather(open_store(where), run_ids=run_ids, config=cfg, reference=refs)
                found = findings_of(ev)
                verdict = verdict_of(ev, found)
            else:
                verdict = _nothing_read(read)
            written = None
            if out is not None:
                written = _write_report(
                    where if run_ids else None,
                    run_ids,
                    verdict,
                    out,
                    cfg,
                    refs,
                    redact,
                    redact_hosts,
                )
        except SpecscopeError as exc:
            raise fail(exc) from exc
        except OSError as exc:
            raise fail(SpecscopeError(f"cannot write ({exc.strerror})", path=str(out))) from exc
    if as_json:
        print_json(
            {
                "verdict": verdict,
                "findings": [f.to_dict() for f in found],
                "sources": read.to_dict()["sources"],
                "report": str(written) if written else None,
            }
        )
    else:
        # With nothing read the verdict is the errors, which are said once, on stderr.
        say(verdict if run_ids or not read.errors else "Nothing to judge.")
        if found:
            say("\n" + "\n\n".join(finding_text(f) for f in found))
        if written:
            say(f"\nwrote {written}")
    for error in read.errors:
        say(f"specscope: error: {error.one_line()}", err=True)
    if threshold is not None and any(f.severity >= threshold for f in found):
        raise typer.Exit(int(ExitStatus.FINDINGS))
    if read.errors:
        raise typer.Exit(int(read.errors[0].exit_status))


def _nothing_read(read: IngestReport) -> str:
    """The verdict when no input held speculative-decoding telemetry: what each one held."""
    if not read.errors:
        return "No speculative-decoding telemetry in the input."
    why = "; ".join(e.one_line() for e in read.errors)
    return f"Nothing to judge: {why}"


def _write_report(
    where: Path | None,
    run_ids: list[str],
    verdict: str,
    out: Path,
    cfg: dict[str, object],
    refs: list[dict[str, object]],
    redact: bool,
    redact_hosts: bool,
) -> Path:
    # Here, not at the top: the report and its charts take a while to import.
    from specscope.report.build import Report, build_report
    from specscope.report.redact import Redactor
    from specscope.report.write import write_report

    redactor = Redactor(enabled=redact, hosts=redact_hosts)
    if where is None:  # nothing was read: a report that says so, to attach all the same
        empty = Report(redactor(verdict) or verdict, [], [], [], [], [])
        empty.redaction = redactor.summary()
        return write_report(empty, out)
    from specscope.store.reading import open_store

    built = build_report(
        open_store(where), run_ids=run_ids, redactor=redactor, config=cfg, reference=refs
    )
    return write_report(built, out)


__all__ = ["EXAMPLES", "triage"]
