"""The formats read for the world corpus' later excerpts (cases 49-92): pasted and
trimmed forms of vLLM and SGLang records, and the prose beside them that must stay prose.

The counts themselves are checked by tests/test_world.py; here are the rules behind them:
what shape a trimmed or quoted record must have, what is refused and reported, and the
SGLang engine-stats convention the expected counts follow.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from specscope.logs.definitions import definitions_dir, load_definitions
from specscope.logs.fields import split_labels
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_text
from specscope.logs.results import ParseResult
from tests.helpers import FIXTURES

GRAMMAR = Grammar(load_definitions())
WORLD = FIXTURES / "world"


def _parse(text: str) -> ParseResult:
    return parse_text(text, GRAMMAR)


def _rows(text: str, table: str = "spec_decode") -> list[dict[str, Any]]:
    return _parse(text).tables.get(table, [])


def _world(name: str) -> str:
    (path,) = WORLD.glob(f"{name}_*.log")
    return path.read_text(encoding="utf-8")


# -- samples that say "no record" -------------------------------------------------------


def _empty_samples() -> list[Any]:
    """Samples written with ``records = []`` (the loaded definition cannot tell those from
    samples that list no records, so the TOML is read again)."""
    out = []
    for path in sorted(definitions_dir().glob("*.toml")):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        for i, sample in enumerate(raw.get("samples", ())):
            if sample.get("records") == []:
                table = sample.get("table") or raw.get("table") or raw.get("name")
                out.append(pytest.param(sample["text"], table, id=f"{path.stem}-{i + 1}"))
    return out


@pytest.mark.parametrize(("text", "table"), _empty_samples())
def test_samples_that_hold_no_record_give_none(text: str, table: str) -> None:
    assert _rows(text, table) == []


# -- prose is not telemetry --------------------------------------------------------------

PROSE = [
    # SGLang values talked about, not printed (cases 70-73, 78)
    "Healthy Qwen3.5-family MTP reports `accept len ≈ 3.0` at these steps",
    "  accept len 1.00 means the target's own bonus token and nothing else — zero",
    "`accept len 1.00 / accept rate 0.00 / cuda graph False` is precisely the intended",
    # (full-width commas, as the excerpt has them)
    "根据服务器日志\uff0c典型的 accept rate 约为 0.12-0.22\uff0caccept len 约为 2-3.5 tokens",
    "ever matches — forever. Healthy is roughly `accept rate 0.4-0.8`. Watch it with:",
    # one value with a colon, in a sentence
    "With MTP on we saw accept len: 2.50 on average, which is fine.",
    "After the fix the decode log showed accept len: 3.20",
    "it works right in base model / (Avg Draft acceptance rate: 85.8%):",
    # a label of the speculative section, in prose or a heading
    "## Speculative Decoding",
    "Acceptance rate (%): 47.2 was the best we got",
    # config dumps
    "server_args=ServerArgs(speculative_algorithm='EAGLE', speculative_num_steps=3, "
    "speculative_eagle_topk=1, speculative_num_draft_tokens=4, "
    "speculative_accept_threshold_single=1.0, speculative_accept_threshold_acc=1.0)",
    '--speculative-config {"method":"dflash","num_speculative_tokens":15}',
    # the summary line of case 77
    "n=1265  p10=2.01  MEDIAN=2.88  p90=3.84  at-4.00=59 (4.7%)",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_is_not_a_record(text: str) -> None:
    result = _parse(text)
    assert {t: rows for t, rows in result.tables.items() if rows} == {}
    assert result.skipped == []


# -- the shapes of trimmed and quoted records --------------------------------------------


def test_fields_parted_by_semicolons_or_runs_of_spaces() -> None:
    assert split_labels("Mean acceptance length: 1.08; per-position acceptance: 0.078, 0.000") == [
        ("Mean acceptance length", "1.08"),
        ("per-position acceptance", "0.078, 0.000"),
    ]
    assert split_labels("Mean acceptance length: 1.12   Accepted: 9   Drafted: 78") == [
        ("Mean acceptance length", "1.12"),
        ("Accepted", "9"),
        ("Drafted", "78"),
    ]
    # one space is part of a label or a value, not a separator
    assert split_labels("gen throughput (token/s): 1.41 tok/s: x") == [
        ("gen throughput (token/s)", "1.41 tok/s: x")
    ]


def test_a_record_cut_inside_a_value_is_reported_not_kept() -> None:
    """A record that stops inside a value was cut off there: the whole definition reports
    what it lacks."""
    head = "SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s"
    result = _parse(head + ", Drafted throughput: 16")
    assert result.tables.get("spec_decode", []) == []
    assert [s.line for s in result.skipped] == [1]
    assert "without 'Accepted', 'Drafted'" in result.skipped[0].reason


def test_a_record_cut_after_a_whole_value_keeps_what_it_printed() -> None:
    """One that stops after a separator or at an ellipsis (case 12) printed each value
    whole: they are kept, marked partial, and no count is made up for what was cut."""
    head = "SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s"
    for tail, drafted in ((", Drafted throughput: 169.20 tokens/s,", 169.2), (",...", None)):
        (row,) = _rows(head + tail)
        assert row["format"] == "vllm_v1_spec_decode_trimmed" and row["partial"] is True
        assert (row["mean_acceptance_length"], row.get("drafted_throughput")) == (1.0, drafted)
        assert row.get("accepted_tokens") is None and row.get("draft_tokens") is None


def test_a_trimmed_record_keeps_what_it_prints() -> None:
    (row,) = _rows(
        "SpecDecoding metrics: Mean acceptance length: 1.00\n"
        "Per-position acceptance rate: 0.000, 0.000\n"
        "Avg Draft acceptance rate: 0.0%"
    )
    assert row["format"] == "vllm_v1_spec_decode_trimmed" and row["partial"] is True
    assert (row["line"], row["end_line"], row["k"]) == (1, 3, 2)
    assert row.get("accepted_tokens") is None and row.get("drafts") is None  # never invented


def test_an_unreadable_count_is_not_papered_over_by_the_trimmed_form() -> None:
    text = (
        "SpecDecoding metrics: Mean acceptance length: 1.75, Accepted throughput: 7.50 "
        "tokens/s, Drafted throughput: 20.00 tokens/s, Accepted: 99999999999999999999999 "
        "tokens, Drafted: 200 tokens, Per-position acceptance rate: 0.500, 0.250, "
        "Avg Draft acceptance rate: 37.5%"
    )
    result = _parse(text)
    assert result.tables.get("spec_decode", []) == []
    assert "unreadable value" in result.skipped[0].reason


def test_sglang_values_cut_short_are_reported() -> None:
    result = _parse("accept len: 2.73, accept rate: 0.")
    assert result.tables.get("spec_decode", []) == []
    assert [s.line for s in result.skipped] == [1] and "cut off" in result.skipped[0].reason
    assert _parse("accept len: 2.7").tables.get("spec_decode", []) == []


def test_sglang_values_alone_are_spec_records_only() -> None:
    rows = _rows("- accept len: 3.20\n> accept len: 2.73, accept rate: 0.43   @ ~10,072 tok")
    assert [(r["line"], r["mean_acceptance_length"], r["partial"]) for r in rows] == [
        (1, 3.2, True),
        (2, 2.73, True),
    ]
    assert rows[1]["reported_rate"] == 0.43
    assert _rows("accept len: 3.20", "engine_stats") == []


@pytest.mark.parametrize("ellipsis", ["...", "\u2026"])
def test_an_elided_decode_line_is_partial_and_no_stats_record(ellipsis: str) -> None:
    text = f"Decode batch {ellipsis} accept len: 1.00, accept rate: 0.00"
    result = _parse(text)
    (row,) = result.tables["spec_decode"]
    assert row["format"] == "sglang_decode_batch_elided" and row["partial"] is True
    assert (row["mean_acceptance_length"], row["reported_rate"]) == (1.0, 0.0)
    assert result.tables.get("engine_stats", []) == []
    # without speculation an elided line holds nothing to keep, and says so
    result = _parse(f"Decode batch {ellipsis} gen throughput (token/s): 30.00")
    assert result.tables == {} or all(not rows for rows in result.tables.values())
    assert "'#running-req'" in result.skipped[0].reason


def test_the_speculative_section_alone_is_a_bench_result() -> None:
    text = _world("57")
    result = _parse(text)
    (bench,) = result.tables["bench"]
    (spec,) = result.tables["spec_decode"]
    assert bench["speculative"] is True and bench.get("successful_requests") is None
    assert (spec["k"], spec["drafts"], spec["accepted_per_pos"]) == (1, 26407, [22021])
    assert "partial" not in spec  # the section is whole: its counts are all there


# -- the SGLang engine-stats convention --------------------------------------------------

SGLANG_CASES = ["36", "45", "71", "73", "74", "75", "76", "79", "82"]


@pytest.mark.parametrize("case", SGLANG_CASES)
def test_sglang_decode_lines_with_running_requests_are_stats_records(case: str) -> None:
    """A decode line that prints '#running-req' is one engine_stats record, and with
    'accept len' one spec_decode record too; elided lines without it are spec only."""
    text = _world(case)
    result = _parse(text)
    lines = text.split("\n")
    stats = [
        r["line"]
        for r in result.tables.get("engine_stats", [])
        if r["format"] == "sglang_decode_batch"  # (case 36 has vLLM stats lines too)
    ]
    want = [
        i for i, line in enumerate(lines, 1) if "Decode batch" in line and "#running-req" in line
    ]
    assert stats == want
    spec = [r["line"] for r in result.tables.get("spec_decode", [])]
    assert spec == [
        i for i, line in enumerate(lines, 1) if "Decode batch" in line and "accept len:" in line
    ]


def test_expected_counts_follow_the_sglang_convention() -> None:
    """fixtures/world/expected.toml counts SGLang decode lines the same way."""
    cases = tomllib.loads((WORLD / "expected.toml").read_text(encoding="utf-8"))["case"]
    for case in cases:
        # (case 36 counts vLLM stats lines too: its one decode line is checked above)
        if case["file"][:2] not in SGLANG_CASES[1:] or case.get("ingest_gap"):
            continue
        lines = (WORLD / case["file"]).read_text(encoding="utf-8").split("\n")
        running = sum("Decode batch" in line and "#running-req" in line for line in lines)
        assert case["engine_stats"] == running, case["file"]


def test_world_definitions_name_their_excerpts() -> None:
    """Every sample taken from a world excerpt names a file that exists."""
    for path in sorted(Path(definitions_dir()).glob("*.toml")):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        for sample in raw.get("samples", ()):
            source = sample.get("source", "")
            if source.startswith("fixtures/world/"):
                name = source.split(":", 1)[0].removeprefix("fixtures/world/")
                assert (WORLD / name).is_file(), f"{path.name}: {name}"


@pytest.mark.parametrize("block_bytes", [700, 1 << 24])
def test_bulk_reader_reads_the_new_forms_as_the_line_parser(
    tmp_path: Path, block_bytes: int
) -> None:
    """Trimmed and quoted forms between lines in plain shapes (which the bulk reader takes
    itself) give the same tables both ways, also in blocks that cut them anywhere."""
    from tests.test_bulk import _same

    head = "(APIServer pid=7) INFO 04-07 17:{:02d}:00 [{}] "
    engine = (
        "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.0 "
        "tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
        "Prefix cache hit rate: 0.0%"
    )
    spec = (
        "SpecDecoding metrics: Mean acceptance length: 1.75, Accepted throughput: 7.50 "
        "tokens/s, Drafted throughput: 20.00 tokens/s, Accepted: 75 tokens, Drafted: 200 "
        "tokens, Per-position acceptance rate: 0.500, 0.250, Avg Draft acceptance rate: 37.5%"
    )
    trimmed = (
        "SpecDecoding metrics: Mean acceptance length: 1.00, Per-position acceptance rate: "
        "0.000, 0.000, Avg Draft acceptance rate: 0.0%"
    )
    lines = []
    for i in range(40):
        lines.append(head.format(i, "loggers.py:259") + engine)
        lines.append(head.format(i, "metrics.py:101") + (trimmed if i % 7 == 3 else spec))
        if i % 9 == 4:
            lines += [
                "```",
                "accept len: 2.73, accept rate: 0.43",
                "Decode batch ... accept len: 1.00",
            ]
            lines += ["Mean acceptance length: 1.08; per-position acceptance: 0.078, 0.000", "```"]
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fast = _same(path, block_bytes)
    formats = set(fast["tables"]["spec_decode"]["format"].to_list())
    assert {"vllm_v1_spec_decode_trimmed", "sglang_accept_len"} <= formats
    assert {"sglang_decode_batch_elided", "vllm_v1_spec_decode_paraphrase"} <= formats
    assert fast["bulk_rows"] > 0
