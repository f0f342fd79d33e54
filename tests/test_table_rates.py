"""A table's acceptance rate without counts is the author's stated rate
(parsers/spec_decode_table.toml's partial rows, analysis.evidence.STATED_RATE_FORMATS): judged
as a stated rate is, so fixtures/world/185's n-gram row at 11.2 % is low acceptance."""

from __future__ import annotations

from .helpers import findings_of_paste

IMP = """| workload | tok/s | draft acceptance | emitted per verify |
|---|---:|---:|---:|
| ordinary prose, no speculation | 89.1 | — | — |
| ordinary prose, n-gram default | 89.4 | {rate} % | — |
| ordinary prose, MTP k=2 | 87.9 | 58 % | 2.3 |
"""


def test_a_low_rate_in_a_table_row_is_low_acceptance(tmp_path) -> None:
    found = findings_of_paste(tmp_path, IMP.format(rate="11.2"))
    (low,) = [f for f in found if f.kind == "low_acceptance"]
    assert low.lines[0] == 4  # the n-gram row
    assert low.confidence is not None and low.confidence.level == "suggestive"


def test_rates_a_drafter_reaches_are_no_finding(tmp_path) -> None:
    found = findings_of_paste(tmp_path, IMP.format(rate="61.2"))
    assert not {f.kind for f in found} & {"low_acceptance", "zero_acceptance"}
