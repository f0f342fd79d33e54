"""Per-request counts in responses (issue 21): vLLM's ``metrics.speculative_decoding`` and
SGLang's ``meta_info``, wherever they sit in a captured response, one record a request."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from specscope.errors import ExitStatus
from specscope.logs.ingest import ingest
from specscope.logs.parser import parse_text
from specscope.store.reading import Store

from .helpers import FIXTURES

CAPTURE = FIXTURES / "engines" / "vllm_responses_spec_metrics.jsonl"
SEED = FIXTURES / "seeds" / "003_83783f5568908b19.txt"


def _spec(tmp_path: Path, path: Path, bulk: bool = True) -> pl.DataFrame:
    store = tmp_path / f"store-{bulk}"
    ingest(str(path), store=store, bulk=bulk).raise_for_errors()
    return Store(store).spec_decode.collect().sort("line")


def test_a_capture_is_one_record_a_request(tmp_path: Path) -> None:
    spec = _spec(tmp_path, CAPTURE)
    assert spec["format"].unique().to_list() == ["vllm_request_spec_decode"]
    assert spec["run_id"].n_unique() == 1
    assert spec.select("line", "drafts", "draft_tokens", "accepted_tokens", "k").rows() == [
        (1, 43, 129, 10, 3),
        (2, 120, 360, 9, 3),
        (3, 88, 264, 4, 3),
    ]


def test_bulk_and_line_reading_agree(tmp_path: Path) -> None:
    mixed = tmp_path / "issue.log"
    mixed.write_text(
        SEED.read_text(encoding="utf-8") + "\n" + CAPTURE.read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    bulk, line = _spec(tmp_path, mixed, True), _spec(tmp_path, mixed, False)
    assert bulk.drop("run_id", "source_id").equals(line.drop("run_id", "source_id"))
    # The responses are a run of their own beside the log's runs.
    responses = bulk.filter(pl.col("format") == "vllm_request_spec_decode")
    assert len(responses) == 3
    assert set(responses["run_id"]).isdisjoint(
        bulk.filter(pl.col("format") != "vllm_request_spec_decode")["run_id"]
    )


def test_low_acceptance_through_triage(cli) -> None:
    r = cli("triage", CAPTURE, "--json")
    assert r.status == ExitStatus.SUCCESS, r.err
    findings = json.loads(r.out)["findings"]
    assert findings[0]["kind"] == "low_acceptance"
    assert findings[0]["sample"]["drafts"] == 43 + 120 + 88


def test_sglang_meta_info_without_accepted_counts_is_skipped() -> None:
    """Verify steps and completion tokens alone: nothing says what was accepted (it is
    not 0), so the record is not kept, and the reason names the line."""
    result = parse_text(
        '{"meta_info": {"prompt_tokens": 37, "spec_verify_ct": 101, "completion_tokens": 256}}\n'
        '{"meta_info": {"spec_verify_ct": 30, "spec_accept_token_num": 98,'
        ' "spec_draft_token_num": 120}}\n'
    )
    assert [s.line for s in result.skipped] == [1]
    assert "without" in result.skipped[0].reason
    (row,) = result.tables["spec_decode"]
    assert (row["line"], row["drafts"], row["accepted_tokens"]) == (2, 30, 98)
