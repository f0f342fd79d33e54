"""llama.cpp server log lines (issue 21): a request's ``draft acceptance = ...`` line and
the since-start ``statistics <implementation>:`` line stand side by side in the log; each
is stored for what it is, in a run of its own, and never added to the other."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from specscope.errors import ExitStatus
from specscope.logs.ingest import ingest
from specscope.logs.parser import parse_text
from specscope.store.reading import Store

from .helpers import FIXTURES

ENGINES = FIXTURES / "engines"
TWO = ENGINES / "llamacpp_server_mtp_two_requests.log"


def _store(tmp_path: Path, path: Path, bulk: bool = True) -> Store:
    store = Store(tmp_path / f"store-{bulk}")
    ingest(str(path), store=store, bulk=bulk).raise_for_errors()
    return store


def test_request_and_statistics_lines_are_never_summed(tmp_path: Path) -> None:
    store = _store(tmp_path, TWO)
    spec = store.spec_decode.collect()
    sums = (
        spec.group_by("format")
        .agg(
            pl.col("draft_tokens").sum(),
            pl.col("accepted_tokens").sum(),
            pl.col("run_id").n_unique(),
        )
        .sort("format")
        .rows()
    )
    # The requests' own counts, and the statistics' totals at the last line: two runs.
    assert sums == [
        ("llamacpp_request", 4077 + 200, 3610 + 100, 1),
        ("llamacpp_statistics", 5173, 4467, 1),
    ]
    runs = store.runs.collect().sort("ordinal")
    assert len(runs) == 2
    stats = runs.filter(pl.col("spec_method_raw") == "draft-mtp")
    assert stats["spec_method"].item() == "mtp" and stats["server"].item() == "llama.cpp"


def test_statistics_are_deltas_with_the_drafters_time(tmp_path: Path) -> None:
    rows = (
        _store(tmp_path, TWO)
        .spec_decode.filter(pl.col("format") == "llamacpp_statistics")
        .collect()
        .sort("line")
        .to_dicts()
    )
    assert [(r["counts"], r["drafts"], r["draft_tokens"], r["accepted_tokens"]) for r in rows] == [
        ("since_engine_start", 2060, 4973, 4367),
        ("delta", 70, 200, 100),
    ]
    extra = json.loads(rows[0]["extra"])
    assert extra["calls"] == [2, 3027, 2060] and extra["dur_ms"] == [0.0, 21997.581, 0.738]
    assert extra["accepted_drafts"] == 1953  # as printed: since the start


def test_two_implementations_are_two_runs_with_their_methods() -> None:
    result = parse_text(
        "statistics ngram_mod: #calls = 810, #gen drafts = 15, #acc drafts = 15, "
        "#gen tokens = 960, #acc tokens = 730, dur(b,g,a) = 0.149, 0.347, 0.005 ms\n"
        "statistics draft-mtp: #calls(b,g,a) = 1 20 20, #gen drafts = 20, #acc drafts = 18, "
        "#gen tokens = 60, #acc tokens = 41\n"
        "statistics ngram_mod: #calls = 900, #gen drafts = 17, #acc drafts = 16, "
        "#gen tokens = 1088, #acc tokens = 790, dur(b,g,a) = 0.152, 0.351, 0.005 ms\n"
    )
    methods = {r.ordinal: r.config.get("spec_method") for r in result.runs}
    assert sorted(methods.values()) == ["mtp", "ngram"]
    rows = result.tables["spec_decode"]
    # The third line is the change since the first of its own implementation, not the second.
    assert (rows[2]["counts"], rows[2]["drafts"], rows[2]["draft_tokens"]) == ("delta", 2, 128)
    assert rows[0]["_run"] == rows[2]["_run"] != rows[1]["_run"]


def test_k_is_what_was_drafted() -> None:
    """The per-position list says how many positions were drafted, whatever the flag."""
    (row,) = parse_text(
        "draft acceptance = 0.54671 (  158 accepted /   289 generated), mean acceptance "
        "length =  2.63, acceptance rate per position = (0.811, 0.582, 0.236, 0.000)"
    ).tables["spec_decode"]
    assert row["k"] == 4 and row["per_position_rate"] == [0.811, 0.582, 0.236, 0.0]
    assert row.get("drafts") is None  # verify steps are not printed: never made up


def test_zero_acceptance_through_triage(cli) -> None:
    r = cli("triage", ENGINES / "llamacpp_server_mtp_zero.log", "--fail-on", "critical", "--json")
    assert r.status == ExitStatus.FINDINGS, r.err
    findings = json.loads(r.out)["findings"]
    # One server, one fault: the statistics run's finding (it counts drafts), which names
    # the request lines' run; that run gets neither a second finding nor insufficient_data.
    (finding,) = findings
    assert finding["kind"] == "zero_acceptance"
    assert finding["confidence"]["level"] == "certain"
    assert finding["sample"]["drafts"] == 400 and finding["lines"] == [2, 2]
    request_run = finding["run_id"].rsplit("-", 1)[0] + "-1"
    assert f"(run {request_run}) count the same tokens" in finding["explanation"]


def test_request_lines_alone_still_get_their_finding(cli, tmp_path: Path) -> None:
    # Without the statistics line (an older llama-server) the request line is all there is.
    log = tmp_path / "requests.log"
    lines = (ENGINES / "llamacpp_server_mtp_zero.log").read_text(encoding="utf-8").splitlines()
    log.write_text(lines[0] + "\n", encoding="utf-8")
    r = cli("triage", log, "--json")
    findings = json.loads(r.out)["findings"]
    assert [f["kind"] for f in findings] == ["zero_acceptance"]
    assert "same tokens" not in findings[0]["explanation"]


@pytest.mark.parametrize(
    "path", [TWO, ENGINES / "llamacpp_server_mtp_zero.log"], ids=lambda p: p.stem
)
def test_bulk_and_line_reading_agree(tmp_path: Path, path: Path) -> None:
    bulk = _store(tmp_path, path, True).spec_decode.collect().sort("line")
    line = _store(tmp_path, path, False).spec_decode.collect().sort("line")
    assert bulk.drop("run_id", "source_id").equals(line.drop("run_id", "source_id"))


def test_lines_that_cannot_be_kept_are_skipped_with_their_line() -> None:
    result = parse_text(
        "draft acceptance = 0.5 ( 99999999999999999999999 accepted / 10 generated)\n"
        "statistics x: #calls = 1, #gen drafts = 5, #acc drafts = 9, #gen tokens = 10, "
        "#acc tokens = 20\n"
        "draft acceptance = 0.5 ( 5 accepted / 10 generated)\n"
    )
    reasons = {s.line: s.reason for s in result.skipped}
    assert sorted(reasons) == [1, 2]
    assert "expected a count" in reasons[1] and "above draft tokens" in reasons[2]
    (row,) = result.tables["spec_decode"]
    assert (row["line"], row["accepted_tokens"]) == (3, 5)
