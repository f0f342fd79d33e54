"""One line of a SpecDecoding record pasted alone: what a careful reader calls it.

People quote the part of the record that alarmed them: the per-position list, the rate,
the mean length, or the line cut off after the counts they cared about. Each is a line of
the log, not a sentence, and a rate of 0.0% is zero acceptance whatever else was cut
away; prose that quotes one value ('it works (Avg Draft acceptance rate: 85.8%):') is not
a record. The lines are pieces of real records: seed 003 (vLLM 0.19.0, INT4 target, MTP)
and world case 12.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope

from .helpers import findings_of_paste

SEED_003 = (
    "SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, "
    "Drafted throughput: 169.20 tokens/s, Accepted: 0 tokens, Drafted: 1692 tokens, "
    "Per-position acceptance rate: 0.000, 0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.0%"
)
BLAMES = {"zero_acceptance", "low_acceptance", "position_cliff", "concurrency_collapse"}


def _kinds(tmp_path: Path, text: str) -> dict[str, str]:
    return {f.kind: f.confidence.level for f in findings_of_paste(tmp_path, text + "\n")}


@pytest.mark.parametrize(
    "line",
    [
        "Per-position acceptance rate: 0.000, 0.000, 0.000, 0.000",
        "Mean acceptance length: 1.00",
        "Avg Draft acceptance rate: 0.0%",
        "> Avg Draft acceptance rate: 0.0%",
        "`Per-position acceptance rate: 0.000, 0.000, 0.000, 0.000`",
        # cut off by the paste after a whole value: what it printed is kept
        SEED_003[: SEED_003.index("Drafted: 1692")].rstrip(),
        SEED_003[: SEED_003.index("Accepted: 0")] + "...",
    ],
)
def test_a_zero_line_pasted_alone_is_zero_acceptance(tmp_path: Path, line: str) -> None:
    found = _kinds(tmp_path, line)
    assert found.get("zero_acceptance") == "suggestive", found  # no counts: at most that


@pytest.mark.parametrize(
    "line",
    [
        "it works right in base model (Avg Draft acceptance rate: 0.0% with the draft):",
        "Mean acceptance length: 1.00 after the fix",
        "Per-position acceptance rate: 0.000, 0.000,",  # cut inside the list
    ],
)
def test_prose_quoting_one_value_is_no_record(tmp_path: Path, line: str) -> None:

    log = tmp_path / "paste.log"
    log.write_text(line + "\n", encoding="utf-8")
    (source,) = specscope.ingest([log], store=tmp_path / "store", year=2026).sources
    assert source.found.get("spec_decode", 0) == 0


def test_a_healthy_line_pasted_alone_is_not_blamed_and_asks_for_counts(tmp_path: Path) -> None:
    text = "Per-position acceptance rate: 0.827, 0.632, 0.422\nAvg Draft acceptance rate: 62.7%\n"
    found = findings_of_paste(tmp_path, text)
    assert not {f.kind for f in found} & BLAMES
    (unsure,) = [f for f in found if f.kind == "insufficient_data"]
    assert "Accepted/Drafted counts" in unsure.explanation
    assert "more drafts" not in unsure.explanation


def test_a_low_rate_pasted_alone_is_low_for_an_unnamed_drafter(tmp_path: Path) -> None:
    found = _kinds(tmp_path, "Avg Draft acceptance rate: 12.0%")
    assert found.get("low_acceptance") == "suggestive"
    assert "zero_acceptance" not in found


def test_a_rate_stated_in_prose_is_what_the_finding_measured(tmp_path: Path) -> None:
    """A zero stated by its author has no counts: the finding says the rate it stands on,
    not an empty 'measured:' (the counts it does not have are left out, not shown as None)."""
    from specscope.cli.render import finding_text

    findings = findings_of_paste(
        tmp_path, "acceptance rate 0% with the int4 model, Mean acceptance length: 1.00\n"
    )
    zero = next(f for f in findings if f.kind == "zero_acceptance")
    assert zero.measured["acceptance_rate"] == 0.0
    text = finding_text(zero)
    assert "  measured: acceptance_rate 0.000" in text.splitlines(), text
    assert "None" not in text


def test_reports_leave_out_a_measure_line_with_nothing_in_it(tmp_path: Path) -> None:
    """The Markdown and HTML reports of a run whose only measure is unknown print no
    'measured:' with nothing after it."""
    from specscope.report.build import build_report
    from specscope.report.html import render_html
    from specscope.report.markdown import render_markdown

    paste = tmp_path / "paste.log"
    paste.write_text("Mean acceptance length: 1.00\n")
    store = tmp_path / "store"
    specscope.ingest([paste], store=store, year=2026)
    report = build_report(specscope.open_store(store), with_charts=False)
    markdown = render_markdown(report, tmp_path / "report.md")
    assert "zero\\_acceptance" in markdown
    assert "- measured: \n" not in markdown
    assert "<p>measured: </p>" not in render_html(report)
