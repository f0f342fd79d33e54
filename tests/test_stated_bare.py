"""A table without outer pipes (parsers/stated_speedup_table_bare.toml, specscope/logs/bare.py):
its rows read whole, its first cell no service name, its columns in pairs."""

from __future__ import annotations

import pytest

from specscope.logs.parser import parse_text

from .helpers import findings_of_paste

GLM_OCR = """\
| Case | no_mtp_eager | mtp_eager | eager speedup | no_mtp_graph | mtp_graph | graph ratio
-- | -- | -- | -- | -- | -- | --
receipt | 60.08 tok/s | 91.79 tok/s | 1.53× | 465.31 tok/s | 260.37 tok/s | 0.56×
ocr_demo | 59.48 tok/s | 90.69 tok/s | 1.53× | 397.39 tok/s | 277.29 tok/s | 0.70×
"""


def test_the_slowest_pair_of_columns_is_no_speedup(tmp_path) -> None:
    (slow,) = [f for f in findings_of_paste(tmp_path, GLM_OCR) if f.kind == "no_speedup"]
    assert slow.lines == (3, 3)
    assert slow.measured["speedup"] == pytest.approx(260.37 / 465.31)
    assert "receipt | 60.08 tok/s" in slow.explanation  # the author's row, its first cell kept


def test_the_eager_path_alone_is_faster_and_no_finding(tmp_path) -> None:
    eager = "\n".join(line.rsplit(" | ", 3)[0] for line in GLM_OCR.splitlines()) + "\n"
    (row,) = parse_text(eager).tables["bench"]
    assert row["output_throughput"] == pytest.approx(90.69)  # the slowest condition decides
    kinds = {f.kind for f in findings_of_paste(tmp_path, eager)}
    assert "no_speedup" not in kinds


def test_a_blank_first_header_cell_keeps_the_columns_in_place() -> None:
    table = """  | E2E P50 | TTFT P50 | Output tok/s
-- | -- | -- | --
baseline | 941 | 47 | 285
DFlash | 811 | 76 | 347
"""
    (row,) = parse_text(table).tables["bench"]
    assert row["output_throughput"] == pytest.approx(347.0)
    assert '"baseline": 285.0' in row["extra"]
