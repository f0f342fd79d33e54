"""``specscope triage``: one command from each seed and each real excerpt to a report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specscope.errors import ExitStatus

from .helpers import FIXTURES

SEEDS = sorted((FIXTURES / "seeds").glob("*.txt"))
WORLD = sorted((FIXTURES / "world").glob("*.log"))


@pytest.mark.parametrize("log", SEEDS + WORLD, ids=lambda p: p.stem)
def test_triage_turns_every_fixture_into_a_report(cli, tmp_path: Path, log: Path) -> None:
    """Exit 0 (or 8 when the excerpt holds no spec-decode telemetry), a report written
    either way, no traceback, and nothing left in the folder but the report."""
    out = tmp_path / ("triage.md" if log.suffix == ".txt" else "triage.html")
    r = cli("triage", log, "--out", out)
    assert r.status in (ExitStatus.SUCCESS, ExitStatus.NO_TELEMETRY), r.err
    # A traceback of specscope's own (a quoted log line may say "Traceback" itself: a
    # crash the log shows is a finding).
    assert 'Traceback (most recent call last):\n  File "' not in r.err + r.out
    assert "Traceback" not in r.err and "internal error" not in r.err
    assert out.is_file() and out.stat().st_size > 0
    text = out.read_text(encoding="utf-8")
    if r.status == ExitStatus.NO_TELEMETRY:
        assert "Nothing to judge" in r.out and "Nothing to judge" in text
    else:
        assert "Findings" in text
    assert {p.name for p in tmp_path.iterdir()} <= {out.name, "triage_files"}


def test_triage_reads_a_paste_and_fails_on_a_finding(cli, monkeypatch, tmp_path) -> None:
    import io
    import sys

    paste = (FIXTURES / "seeds" / "003_83783f5568908b19.txt").read_text(encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(paste.encode())))
    r = cli("triage", "-", "--fail-on", "critical", "--json")
    assert r.status == ExitStatus.FINDINGS
    data = json.loads(r.out)
    assert data["findings"][0]["kind"] == "zero_acceptance"
    assert data["findings"][0]["confidence"]["level"] == "certain"
    assert data["verdict"].startswith("2 runs with speculative decoding")


def test_triage_keeps_a_store_only_when_asked(cli, tmp_path) -> None:
    log = FIXTURES / "seeds" / "003_83783f5568908b19.txt"
    assert cli("triage", log).status == 0
    assert not (tmp_path / "specscope-data").exists()
    assert cli("triage", log, "--store", tmp_path / "kept").status == 0
    assert cli("runs", "--store", tmp_path / "kept").status == 0


def test_triage_refuses_a_report_name_before_reading(cli, tmp_path) -> None:
    r = cli("triage", FIXTURES / "seeds" / "003_83783f5568908b19.txt", "--out", "x.pdf")
    assert r.status == ExitStatus.USAGE and ".md or an .html" in r.err


def test_a_number_the_log_does_not_print_is_left_out_not_written_none(cli, tmp_path):
    """A lone SGLang line prints an accept length and no counts: the finding measures the
    length only, and no renderer writes the missing counts as 'None'."""
    log = tmp_path / "one_sglang_line.log"
    log.write_text(
        "[2026-03-02 10:11:12 TP0] Decode batch, #running-req: 1, #token: 2345, token usage: "
        "0.01, accept len: 1.00, accept rate: 0.00, cuda graph: True, gen throughput "
        "(token/s): 45.12, #queue-req: 0\n"
    )
    result = cli("triage", log, "--out", tmp_path / "t.md")
    assert "zero_acceptance" in result.out
    measured = [line for line in result.out.splitlines() if "measured:" in line]
    assert measured and all("None" not in line for line in measured)
    assert "mean_acceptance_length 1.000" in measured[0]
    report = (tmp_path / "t.md").read_text()
    assert "- measured: " in report and "None" not in report.split("- measured: ")[1].split("\n")[0]
