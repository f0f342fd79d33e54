# ruff: noqa: E501  (the tables are verbatim: a box drawn by rich is as wide as it is)
"""Tables drawn with boxes read as the pipe tables they are (specscope/logs/box_tables.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import specscope
from specscope.logs.box_tables import unboxed
from specscope.logs.clean import clean_line

WORLD = Path(__file__).resolve().parent.parent / "fixtures" / "world"


def _lines(name: str) -> list[str]:
    path = next(WORLD.glob(f"{name}_*.log"))
    return path.read_text(encoding="utf-8").splitlines()


def test_real_box_rules_and_rows_become_pipes() -> None:
    # sglang send_one's tabulate table (world 341), evalscope's box (world 320), a bench's
    # double-ruled box (world 229)
    send_one = _lines("341")
    assert unboxed(send_one[9]) == "|-------------|--------|------------|-----------------|"
    assert unboxed(send_one[10]) == send_one[10]  # already a pipe row
    evalscope = _lines("320")
    top, row = unboxed(evalscope[5]), unboxed(evalscope[8])
    assert top.startswith("|-----------------|-----------|") and set(top) <= {"|", "-"}
    assert row.startswith("| Qwen3.6-35B-A3B | gsm8k     | mean_acc |")
    bench = _lines("229")
    assert set(unboxed(bench[2])) <= {"|", "-"}
    assert unboxed(bench[3]).startswith("| E2EL                     | total   |")


@pytest.mark.parametrize(
    "line",
    [
        "============ Serving Benchmark Result ============",
        "---------------Speculative Decoding---------------",
        "-----",
        "x + y = 3",
        "+= a =+",
        "+ added line in a diff",
        "│ a lone bar, no row",
        "国产卡上 accept len 约为 2-3.5",
    ],
)
def test_lines_that_are_no_box_stay(line: str) -> None:
    assert unboxed(line) == line
    assert clean_line(line).text == line.rstrip()


PIPES = """| Workload/state | Decoded tokens/iteration | Speculative accept rate | Decode tokens/s/user |
|---|---:|---:|---:|
| 50K random raw completion, 500 output tokens | 3.93 | 74.6% | 149.37 |
| 50K random chat completion, 500 output tokens | 1.94 | 48.5% | 74.74 |"""

BOXED = """┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━┓
┃ Workload/state                               ┃ Decoded tokens/iteration ┃ Speculative accept rate ┃ Decode tokens/s/user ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━┩
│ 50K random raw completion, 500 output tokens │ 3.93                     │ 74.6%                   │ 149.37               │
│ 50K random chat completion, 500 output tokens│ 1.94                     │ 48.5%                   │ 74.74                │
└──────────────────────────────────────────────┴──────────────────────────┴─────────────────────────┴──────────────────────┘"""

TABULATE_GRID = """+------------------+-------------------------+
| Workload/state   | Speculative accept rate |
+==================+=========================+
| raw completion   | 74.6%                   |
+------------------+-------------------------+
| chat completion  | 48.5%                   |
+------------------+-------------------------+"""


def _records(text: str) -> list[dict]:
    rows = specscope.parse_text(text).tables.get("spec_decode", [])
    keys = ("extra", "reported_rate", "mean_acceptance_length")
    return [{k: r.get(k) for k in keys} for r in rows]


def test_a_table_in_boxes_reads_as_its_pipe_table() -> None:
    # world 350's table (lightseekorg/tokenspeed#1305) as rich draws it: the same records.
    # Its rate is 1 - 1/length in both rows, a share of emitted tokens (spec tables keep it
    # in extra); the length is the record's.
    piped, boxed = _records(PIPES), _records(BOXED)
    assert [r["mean_acceptance_length"] for r in piped] == [3.93, 1.94]
    assert [json.loads(r["extra"])["emitted_share"] for r in piped] == [0.746, 0.485]
    assert boxed == piped
    # and as tabulate's grid draws it, a rule between every row (a rate alone: a rate)
    assert [r["reported_rate"] for r in _records(TABULATE_GRID)] == [0.746, 0.485]


@pytest.mark.parametrize(
    "line",
    [
        "┌" + "─" * 500_000 + " x",  # a rule that never closes: no corner at its end
        "╞" + "═╪" * 250_000,
        "+-----" * 170_000,  # tabulate's rule, cut before its last '+' (a hostile paste)
        "│" + " a" * 250_000,
    ],
    ids=["open-rule", "joints", "plus-rule", "open-row"],
)
def test_a_megabyte_line_of_box_characters_is_looked_at_once(line: str) -> None:
    """Overlapping classes under stars backtracked in the square of the line: an open rule
    of 8,000 characters took 0.7 s, a megabyte's would take hours (CI's guard on long
    lines of tabulate's '+-----' failed at 42 s). Bounded in CPU seconds, far above a
    linear read (about 0.02 s) and far below a square's."""
    start = time.process_time()
    unboxed(line)
    assert time.process_time() - start < 2
