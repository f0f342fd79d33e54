"""Pasted ``/metrics`` text (issue 21): vLLM, SGLang, llama.cpp and TensorRT-LLM counters
read on one definition, one paste as the totals since the server started, two pastes of one
server as the interval between them; and what ``triage`` says of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from specscope.errors import ExitStatus
from specscope.exposition import metric_name, parse_sample
from specscope.logs.ingest import ingest
from specscope.logs.parser import parse_text
from specscope.store.reading import Store

from .helpers import FIXTURES

ENGINES = FIXTURES / "engines"
PASTES = sorted(p for p in ENGINES.iterdir() if p.suffix in (".txt", ".md") and p.stem != "README")
SEED = FIXTURES / "seeds" / "003_83783f5568908b19.txt"


def _rows(text: str) -> list[dict[str, Any]]:
    return parse_text(text).tables.get("spec_decode", [])


def _stored(tmp_path: Path, *paths: Path, bulk: bool = True) -> pl.DataFrame:
    store = tmp_path / f"store-{bulk}"
    ingest([str(p) for p in paths], store=store, bulk=bulk).raise_for_errors()
    return Store(store).spec_decode.collect().sort("source", "line", "engine")


def test_every_excerpt_has_its_readme_line() -> None:
    readme = (ENGINES / "README.md").read_text(encoding="utf-8")
    assert PASTES and all(f"`{p.name}`" in readme for p in PASTES)


# -- verdicts through triage -------------------------------------------------------------


def test_zero_acceptance_in_a_pasted_metrics_text_is_certain(cli) -> None:
    r = cli("triage", ENGINES / "vllm_metrics_mtp_int4_zero.txt", "--fail-on", "critical", "--json")
    assert r.status == ExitStatus.FINDINGS, r.err
    finding = json.loads(r.out)["findings"][0]
    assert finding["kind"] == "zero_acceptance"
    assert finding["confidence"]["level"] == "certain"
    assert finding["sample"]["drafts"] == 423 and finding["lines"][0] == 6


def test_counters_at_zero_are_speculation_that_never_ran(cli) -> None:
    r = cli("triage", ENGINES / "llamacpp_metrics_spec_off.txt")
    assert r.status == ExitStatus.NO_TELEMETRY
    assert "never ran" in r.err and "not 0%" in r.err and "line 1 skipped" in r.err
    assert "zero_acceptance" not in r.out


def test_drafts_without_accepted_counts_are_not_zero_acceptance(cli) -> None:
    """vLLM #24049's console rows hold drafts and one position: what was accepted in all
    is not there, and reading it as nothing accepted would be a false critical."""
    r = cli("triage", ENGINES / "vllm_metrics_dp_console.txt")
    assert r.status == ExitStatus.NO_TELEMETRY
    assert "not what was accepted" in r.err
    assert "zero_acceptance" not in r.out


def test_a_healthy_llamacpp_paste_has_no_warning(cli) -> None:
    r = cli("triage", ENGINES / "llamacpp_metrics_mtp.txt", "--fail-on", "warning", "--json")
    assert r.status == ExitStatus.SUCCESS, r.out
    assert "2,060 drafts" in json.loads(r.out)["verdict"]


def test_low_acceptance_between_two_pastes(cli) -> None:
    r = cli("triage", ENGINES / "vllm_metrics_two_pastes.md", "--json")
    kinds = [f["kind"] for f in json.loads(r.out)["findings"]]
    assert "low_acceptance" in kinds


# -- what is stored --------------------------------------------------------------------


def test_two_pastes_are_the_totals_then_the_interval(tmp_path: Path) -> None:
    rows = _stored(tmp_path, ENGINES / "vllm_metrics_two_pastes.md").to_dicts()
    first, second = rows
    assert (first["counts"], second["counts"]) == ("since_engine_start", "delta")
    assert (first["line"], first["end_line"], second["line"], second["end_line"]) == (6, 11, 16, 21)
    assert (first["drafts"], first["draft_tokens"], first["accepted_tokens"]) == (1200, 3600, 1920)
    assert first["accepted_per_pos"] == [876, 624, 420]
    # The interval: the second paste less the first, exactly.
    assert (second["drafts"], second["draft_tokens"], second["accepted_tokens"]) == (
        8000,
        24000,
        2400,
    )
    assert second["accepted_per_pos"] == [1600, 600, 200]
    assert second["acceptance_rate"] == pytest.approx(0.1)
    assert second["mean_acceptance_length"] == pytest.approx(1.3)
    assert first["k"] == second["k"] == 3 and first["partial"] is False


def test_bulk_and_line_reading_agree(tmp_path: Path) -> None:
    mixed = tmp_path / "issue.md"
    paste = (ENGINES / "vllm_metrics_two_pastes.md").read_text(encoding="utf-8")
    mixed.write_text(SEED.read_text(encoding="utf-8") + "\n" + paste, encoding="utf-8")
    for path in (mixed, *PASTES):
        if "spec_off" in path.name or "console" in path.name:
            continue
        bulk = _stored(tmp_path / path.stem, path, bulk=True)
        line = _stored(tmp_path / path.stem, path, bulk=False)
        assert bulk.drop("run_id").equals(line.drop("run_id")), path.name


def test_a_paste_in_a_log_is_a_run_of_its_own(tmp_path: Path) -> None:
    """Totals since a start are no interval of the log around them: the log's runs keep
    their own acceptance, the paste's rows are in a run with nothing else."""
    log = tmp_path / "server.log"
    log.write_text(SEED.read_text(encoding="utf-8"), encoding="utf-8")
    both = tmp_path / "both.log"
    paste = (ENGINES / "llamacpp_metrics_mtp.txt").read_text(encoding="utf-8")
    both.write_text(log.read_text(encoding="utf-8") + paste, encoding="utf-8")
    alone = _stored(tmp_path / "a", log)
    mixed = _stored(tmp_path / "b", both)
    pasted = mixed.filter(pl.col("format") == "prometheus_text_llamacpp")
    assert len(pasted) == 1 and pasted["drafts"].item() == 2060
    assert pasted["run_id"].item() not in set(
        mixed.filter(pl.col("format") != "prometheus_text_llamacpp")["run_id"]
    )
    logged = mixed.filter(pl.col("format") != "prometheus_text_llamacpp")
    same = ("run_id", "source", "source_id")
    assert logged.drop(same).equals(alone.drop(same))


def test_trtllm_positions_keep_their_own_denominators(tmp_path: Path) -> None:
    (row,) = _stored(tmp_path, ENGINES / "trtllm_metrics_dynamic_k.txt").to_dicts()
    assert row["drafted_per_pos"] == [100, 100, 60]
    assert row["accepted_per_pos"] == [80, 50, 18]
    assert row["per_position_rate"] == pytest.approx([0.8, 0.5, 0.3])
    assert (row["drafts"], row["draft_tokens"], row["accepted_tokens"], row["k"]) == (
        100,
        260,
        148,
        3,
    )
    extra = json.loads(row["extra"])
    assert extra["iteration_draft_tokens"] == 262 and extra["draft_overhead"] == 0.12


def test_sglang_verify_steps_give_the_exact_mean_length(tmp_path: Path) -> None:
    (row,) = _stored(tmp_path, ENGINES / "sglang_metrics_verify.txt").to_dicts()
    assert row["mean_acceptance_length"] == pytest.approx(279587 / 77000)
    assert json.loads(row["extra"])["gauge_mean_acceptance_length"] == 3.41
    assert row["draft_tokens"] is None and row["partial"] is False


def test_a_gauge_alone_is_partial() -> None:
    (row,) = _rows('sglang:spec_accept_length{model_name="m"} 2.7\n')
    assert row["partial"] is True and row["mean_acceptance_length"] == 2.7
    assert row.get("drafts") is None and row.get("accepted_tokens") is None


def test_a_subset_of_positions_is_no_list() -> None:
    """Positions 0 and 2 pasted, 1 left out: position 1 is not known to be 0."""
    text = "\n".join(
        f'vllm:spec_decode_num_{name}_total{{model_name="m"{pos}}} {value}'
        for name, pos, value in (
            ("drafts", "", 10),
            ("accepted_tokens", "", 12),
            ("accepted_tokens_per_pos", ',position="0"', 8),
            ("accepted_tokens_per_pos", ',position="2"', 1),
        )
    )
    (row,) = _rows(text)
    assert row.get("accepted_per_pos") is None and row["accepted_tokens"] == 12
    assert json.loads(row["extra"])["positions_pasted"] == [0, 2]


# -- bad input ---------------------------------------------------------------------------


def test_bad_samples_are_skipped_with_their_line(monkeypatch) -> None:
    monkeypatch.setenv("SPECSCOPE_MAX_K", "8")
    text = "\n".join(
        [
            'vllm:spec_decode_num_drafts_total{model_name="m"} 10',
            'vllm:spec_decode_num_accepted_tokens_total{model_name="m" 7',  # cut label set
            'vllm:spec_decode_num_draft_tokens_total{model_name="m"} NaN',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="9"} 1',
            'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 6',
        ]
    )
    result = parse_text(text)
    reasons = {s.line: s.reason for s in result.skipped}
    assert sorted(reasons) == [2, 3, 4]
    assert "does not read" in reasons[2] and "not a count" in reasons[3]
    assert "position '9'" in reasons[4]
    (row,) = result.tables["spec_decode"]
    assert (row["drafts"], row["accepted_tokens"], row.get("draft_tokens")) == (10, 6, None)


def test_more_accepted_than_drafted_is_refused() -> None:
    result = parse_text(
        "llamacpp:spec_decode_num_draft_tokens_total 10\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 11\n"
        "llamacpp:spec_decode_num_drafts_total 5\n"
    )
    assert result.tables.get("spec_decode", []) == []
    assert "contradict" in result.skipped[0].reason


def test_no_draft_between_two_pastes_says_so() -> None:
    once = "vllm:spec_decode_num_drafts_total 7\nvllm:spec_decode_num_accepted_tokens_total 3\n"
    result = parse_text(once + "\n" + once)
    assert len(result.tables["spec_decode"]) == 1
    assert result.skipped[0].line == 4 and "between this paste and the one before" in (
        result.skipped[0].reason
    )


@pytest.mark.parametrize(
    ("line", "name", "labels", "value"),
    [
        (
            'vllm_spec_decode_num_drafts_total{engine="0"} 3.0',
            "vllm:spec_decode_num_drafts",
            {"engine": "0"},
            3.0,
        ),
        (
            "llamacpp:spec_decode_num_drafts_total 2060",
            "llamacpp:spec_decode_num_drafts",
            {},
            2060.0,
        ),
        (
            'trtllm_spec_decode_drafted_tokens_total{token_position="1"} 1e2',
            "trtllm:spec_decode_drafted_tokens",
            {"token_position": "1"},
            100.0,
        ),
    ],
)
def test_one_spelling_per_metric(
    line: str, name: str, labels: dict[str, str], value: float
) -> None:
    parsed = parse_sample(line)
    assert parsed is not None
    assert (metric_name(parsed[0]), parsed[1], parsed[2]) == (name, labels, value)


def test_a_counter_split_by_is_streaming_is_added_up() -> None:
    # A label that splits one counter into parts (is_streaming on SGLang's generated
    # tokens) makes no target of its own: the parts add up beside the verify steps, and a
    # second paste is the change of their sum.
    first = (
        'sglang:generation_tokens_total{is_streaming="true",model_name="m"} 200000.0\n'
        'sglang:generation_tokens_total{is_streaming="false",model_name="m"} 79587.0\n'
        'sglang:spec_verify_calls_total{model_name="m"} 77000.0\n'
    )
    second = first.replace("200000.0", "210000.0").replace("77000.0", "80000.0")
    rows = _rows(first + second)
    assert [(r["drafts"], r["accepted_tokens"], r["counts"]) for r in rows] == [
        (77000, 202587, "since_engine_start"),
        (3000, 7000, "delta"),
    ]
