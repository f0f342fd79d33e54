"""The author's label above a result (specscope/logs/run_labels.py): SGLang's MT-bench
line under 'w/o spec:' is the run without speculation, compared with the speculative
line of the same script; the bulk reader and the line parser read the label alike."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

import specscope
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_text
from specscope.logs.run_labels import MAX_GAP
from tests.helpers import FIXTURES
from tests.test_bulk import _same, write_server

GRAMMAR = Grammar(load_definitions())
CASE_262 = FIXTURES / "world" / "262_sglang_eagle3_llama33_70b_tp8_questions_lines_588.log"
BLAME = {"zero_acceptance", "low_acceptance", "position_cliff", "concurrency_collapse"}


def _bench(text: str) -> list[dict[str, Any]]:
    result = parse_text(text, GRAMMAR)
    assert not result.skipped, result.skipped
    return result.tables.get("bench", [])


def _kinds(path: Path) -> set[str]:
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "store"
        specscope.ingest([path], store=store, year=2026)
        return {f.kind for f in specscope.detect(specscope.open_store(store))}


def test_the_baseline_of_sglang_4716_is_no_speculative_run() -> None:
    """'w/o spec:' over 88.61 token/s at 'Acceptance length: 1.00', 'EAGLE3:' over 234.54
    at 5.88: one run without speculation, one with, and no blame (2.6x)."""
    result = parse_text(CASE_262.read_text(encoding="utf-8"), GRAMMAR)
    base, spec = result.tables["bench"]
    assert (base["line"], base["speculative"], base["output_throughput"]) == (10, False, 88.61)
    assert base.get("acceptance_length") is None  # the script's 1.0 without speculation
    assert json.loads(base["extra"]) == {"label": "w/o spec"}  # why it is no speculative run
    assert (spec["line"], spec["speculative"], spec["acceptance_length"]) == (14, True, 5.88)
    assert [r["line"] for r in result.tables["spec_decode"]] == [14]
    assert not _kinds(CASE_262) & (BLAME | {"no_speedup"})


def test_a_speculative_run_slower_than_its_labelled_baseline_has_no_speedup(
    tmp_path: Path,
) -> None:
    """The same two lines with the speculative one slower: the pair is the benchmark
    comparison detectors/speedup.py makes of bench rows with and without speculation."""
    text = CASE_262.read_text(encoding="utf-8").replace("234.54 token/s", "61.20 token/s")
    path = tmp_path / "slower.log"
    path.write_text(text, encoding="utf-8")
    kinds = _kinds(path)
    assert "no_speedup" in kinds and not kinds & BLAME


LINE = "#questions: 80, Throughput: {} token/s, Acceptance length: {}"


def test_a_script_s_speculative_line_is_compared_with_its_own_baseline(tmp_path: Path) -> None:
    """A serving benchmark's block in the same paste is another tool's count of another
    workload: the MT-bench line with speculation (234.54) is compared with the script's
    own line without it (88.61), not with the block's 300 tok/s."""
    block = "\n".join(
        [
            "============ Serving Benchmark Result ============",
            "Successful requests:                     100",
            "Benchmark duration (s):                  85.20",
            "Output token throughput (tok/s):         300.00",
            "==================================================",
        ]
    )
    path = tmp_path / "two_tools.log"
    path.write_text(block + "\n\n" + CASE_262.read_text(encoding="utf-8"), encoding="utf-8")
    assert "no_speedup" not in _kinds(path)


@pytest.mark.parametrize(
    ("label", "length", "speculative"),
    [
        ("w/o spec:", "1.00", False),
        ("**Baseline (no speculative decoding):**", "1.00", False),
        ("> without MTP", "1.00", False),
        ("### Vanilla", "1.00", False),
        ("*) base (concurrency = 1):", "1.00", False),  # vllm#12101's label
        # 'baseline' for the main branch, whose run is speculative: the script says so.
        ("baseline:", "2.25", True),
        # A label naming speculation over a run that accepted nothing is that run.
        ("EAGLE3:", "1.00", True),
        # Prose that names a baseline is no label.
        ("Compared with the baseline we see no change in the numbers below", "1.00", True),
    ],
)
def test_which_label_makes_a_run_without_speculation(
    label: str, length: str, speculative: bool
) -> None:
    text = f"{label}\n\n```\n{LINE.format(88.61, length)}\n```\n"
    (row,) = _bench(text)
    assert row["speculative"] is speculative


def test_labels_inside_one_fence_name_the_lines_under_them() -> None:
    """The same pair pasted in one fence: each label names the line under it."""
    text = "```\nw/o spec:\n{}\n\nEAGLE3:\n{}\n```".format(
        LINE.format(88.61, "1.00"), LINE.format(234.54, "5.88")
    )
    assert [(r["line"], r["speculative"]) for r in _bench(text)] == [(3, False), (6, True)]


def test_a_label_names_only_the_line_right_under_it() -> None:
    """A label further up than MAX_GAP lines, or with another line between, names
    something else: the result under it stays a speculative run."""
    far = "w/o spec:" + "\n" * (MAX_GAP + 1) + LINE.format(88.61, "1.00")
    between = "w/o spec:\npython3 bench_sglang_eagle.py --num-questions 80\n" + LINE.format(
        88.61, "1.00"
    )
    relabelled = "w/o spec:\nEAGLE3:\n" + LINE.format(88.61, "1.00")
    for text in (far, between, relabelled):
        (row,) = _bench(text)
        assert row["speculative"] is True, text
    near = "w/o spec:" + "\n" * MAX_GAP + LINE.format(88.61, "1.00")
    assert _bench(near)[0]["speculative"] is False


def test_the_bulk_reader_reads_a_label_in_a_server_log_as_the_line_parser(
    tmp_path: Path,
) -> None:
    """The paste of sglang#4716 in the middle of a server log read in bulk: the label's
    words make its line reach the line parser, the held label the lines after it (a
    label without those words, 'EAGLE3:', among them), so both readers give the same
    tables, with the baseline run not speculative."""
    server = tmp_path / "server.txt"
    with open(server, "w") as out:
        write_server(out, 60_000, 3, runs=2)
    lines = server.read_text(encoding="utf-8").splitlines()
    half = len(lines) // 2
    paste = CASE_262.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "mixed.log"
    path.write_text("\n".join([*lines[:half], *paste, *lines[half:]]) + "\n", encoding="utf-8")
    fast = _same(path, block_bytes=4096)
    bench = fast["tables"]["bench"].filter(
        fast["tables"]["bench"]["format"] == "sglang_bench_speculative"
    )
    assert bench["speculative"].to_list() == [False, True]
    assert bench["line"].to_list() == [half + 10, half + 14]


def test_the_definitions_name_what_their_baseline_prints() -> None:
    """Each definition that says what it prints without speculation also says which
    table's row makes a run speculative (has_row), and the label's words are literals."""
    defs = {d.name: d for d in load_definitions()}
    printing = [d for d in defs.values() if d.baseline_prints]
    assert {d.name for d in printing} >= {"sglang_bench_speculative"}
    assert all(d.has_row for d in printing)
    labelled = defs["labelled_result_blocks"]
    base = labelled.keys["baseline"]
    assert "w/o" in labelled.literals and "w/o" in base
    assert json.dumps(dict(defs["sglang_bench_speculative"].baseline_prints)) == (
        '{"mean_acceptance_length": 1.0}'
    )
