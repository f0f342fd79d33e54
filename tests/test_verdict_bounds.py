"""What a finding suggests follows from the bound that decided it (issue 16).

A claim is made at a one-sided bound (``z_claim`` or ``z_certain``); what the finding then
tells the reader to do, and the numbers it shows for it, must be read at that same bound.
Read at the wider two-sided display bound, a dead tail the claim dropped can come back and
the advice contradicts the claim (world case 120: 0 of 65 drafts at positions 6-15 of a
k = 15 DFlash block said "use num_speculative_tokens=15").
"""

from __future__ import annotations

import pytest

import specscope
from specscope.analysis.detectors import detect

from .loglines import spec, stats


def _detect(tmp_path, lines: list[str]) -> list[specscope.Finding]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026).raise_for_errors()
    return detect(specscope.open_store(store))


@pytest.mark.parametrize("drafts", [40, 52, 58, 65, 72, 90, 164, 400])
def test_k_too_large_suggests_a_smaller_k_than_the_run_used(tmp_path, drafts):
    """Positions 6-15 of a k = 15 block never accepted, at sample sizes either side of
    where 0 of n drafts crosses the 5% floor at one bound and not at the other: whenever
    the finding is made, it names a k under 15, a tail of zeros, and a saving above zero."""
    head = [round(drafts * r) for r in (0.6, 0.385, 0.215, 0.108, 0.062)]
    found = _detect(tmp_path, [stats(1), spec(1, drafts, head + [0] * 10)])
    for f in (f for f in found if f.kind == "k_too_large"):
        assert f.expected["k"] < f.measured["k"] == 15, f.explanation
        assert f.measured["tail"] and all(x == 0.0 for x in f.measured["tail"])
        assert f.expected["draft_work_saved"] > 0
        assert f"Positions {f.expected['k'] + 1}-15 accept" in f.explanation
        assert f"num_speculative_tokens={f.expected['k']}:" in f.next_step


def test_k_too_large_on_world_case_120(tmp_path):
    """The real line: the claim is made (likely: 0 of 65 at a one-sided 95% bound is under
    5%) and its advice drops positions 6-15. Low acceptance beside it is at most
    suggestive: the method is not on the line, and the bound on tau - 1 comes from the
    spread its 65 drafts' per-position counts give (session 16; world 05 and 120, the same
    line, are both labelled low and too deep)."""
    line = (
        "(APIServer pid=1) INFO 05-01 14:24:50 [metrics.py:101] SpecDecoding metrics: Mean "
        "acceptance length: 2.37, Accepted throughput: 8.90 tokens/s, Drafted throughput: "
        "97.50 tokens/s, Accepted: 89 tokens, Drafted: 975 tokens, Per-position acceptance "
        "rate: 0.600, 0.385, 0.215, 0.108, 0.062, 0.000, 0.000, 0.000, 0.000, 0.000, 0.000, "
        "0.000, 0.000, 0.000, 0.000, Avg Draft acceptance rate: 9.1%"
    )
    (tail,) = [f for f in _detect(tmp_path, [line]) if f.kind == "k_too_large"]
    assert tail.expected["k"] == 5
    assert tail.confidence is not None and tail.confidence.level == "likely"
    (low,) = [f for f in _detect(tmp_path / "again", [line]) if f.kind == "low_acceptance"]
    assert low.confidence is not None and low.confidence.level == "suggestive"


def _sglang(accept_len: float) -> str:
    return (
        "[2026-07-04 05:01:33 TP0] Decode batch, #running-req: 4, #token: 3505, token usage: "
        f"0.04, accept len: {accept_len:.2f}, accept rate: 0.80, cuda graph: True, gen "
        "throughput (token/s): 155.34, #queue-req: 0"
    )


@pytest.mark.parametrize(("accept_len", "least_k"), [(2.5, None), (4.0, None), (5.86, 5)])
def test_a_mean_length_over_the_assumed_k_raises_it(tmp_path, accept_len, least_k):
    """A lone printed mean length says neither k nor counts: k = 3 is assumed, unless the
    mean itself shows more tokens were accepted a step than 3 (5.86 needs k >= 5). The rate
    shown is then a share (never 162%), and the assumption says why it is what it is."""
    found = _detect(tmp_path / "a", [_sglang(accept_len)])
    assert found
    for f in found:
        rate = f.measured.get("acceptance_rate")
        assert rate is None or 0.0 <= rate <= 1.0, (f.kind, rate)
        said = " ".join(f.confidence.assumptions) if f.confidence else ""
        if least_k is None:
            assert "the least a mean length" not in said
        elif "k not stated" in said:
            assert f"k not stated: {least_k} assumed, the least a mean length" in said


# -- data parallel: each engine is a series of its own ----------------------------------------


def _dp(engine_counts: list[list[list[int]]], drafts: int = 200) -> list[str]:
    """A DP log: every interval, each engine's stats line then its SpecDecoding line
    (as vLLM's one API server prints them); ``engine_counts[e][i]`` is engine e's
    per-position accepted counts in interval i."""
    lines = []
    for i in range(len(engine_counts[0])):
        for e, counts in enumerate(engine_counts):
            lines += [stats(i + 1, running=2, engine=e), spec(i + 1, drafts, counts[i])]
    return lines


def _screened_and_not(tmp_path, lines: list[str]) -> tuple[list, list]:
    from specscope.analysis.detectors import findings_of
    from specscope.analysis.evidence import gather

    _detect(tmp_path, lines)
    ev = gather(specscope.open_store(tmp_path / "store"))
    return findings_of(ev), findings_of(ev, screened=False)


def test_engines_at_two_steady_levels_are_no_drift(tmp_path):
    """Engine 0 at 62% and engine 1 at 2%, each steady: their lines taken together in time
    order read as a level before the first interval and another after (the finding this
    replaced said '61.7% before 17:00:10, 28.5% after')."""
    lines = _dp([[[160, 120, 90]] * 5, [[10, 2, 0]] * 5])
    found, everything = _screened_and_not(tmp_path, lines)
    assert "acceptance_drift" not in {f.kind for f in everything}
    assert [f.to_dict() for f in found] == [f.to_dict() for f in everything]


def test_one_engine_that_drifts_is_named(tmp_path):
    """Engine 1 falls from 60% to 10% halfway; engine 0 stays: the drift is engine 1's,
    with its own levels, and the screen keeps it."""
    steady = [[150, 120, 90]] * 8
    falls = [[150, 120, 90]] * 4 + [[40, 15, 5]] * 4
    found, everything = _screened_and_not(tmp_path, _dp([steady, falls]))
    (drift,) = [f for f in everything if f.kind == "acceptance_drift"]
    assert drift.measured["engine"] == 1
    assert drift.measured["rate_before"] == pytest.approx(0.6)
    assert drift.measured["rate_after"] == pytest.approx(0.1)
    assert "of engine 1" in drift.explanation
    assert [f.to_dict() for f in found] == [f.to_dict() for f in everything]


def test_one_engine_that_accepts_nothing_is_named(tmp_path):
    """Engine 0 accepts 62%, engine 1 2%: the run's sum (32%) hides engine 1 from every
    test of the run, but engine 1's own 1,000 drafts prove it accepts next to nothing."""
    found = _detect(tmp_path, _dp([[[160, 120, 90]] * 5, [[10, 2, 0]] * 5]))
    (zero,) = [f for f in found if f.kind == "zero_acceptance"]
    assert zero.measured["engine"] == 1
    assert zero.measured["draft_tokens"] == 3000 and zero.measured["accepted_tokens"] == 60
    assert zero.explanation.startswith("Engine 1 of this data-parallel run:")
    assert zero.confidence is not None and zero.confidence.level == "certain"
    assert zero.confidence.sample == {"drafts": 1000}


def test_healthy_engines_of_a_dp_run_are_not_blamed(tmp_path):
    """Two engines at 62% and 45% (different prompts land on different engines): nothing
    that blames speculation, neither for the run nor for an engine."""
    found = _detect(tmp_path, _dp([[[160, 120, 90]] * 5, [[140, 80, 50]] * 5]))
    blame = {"zero_acceptance", "low_acceptance", "position_cliff", "concurrency_collapse"}
    assert not blame & {f.kind for f in found}, [f.explanation for f in found]


def test_engines_at_two_loads_are_not_a_concurrency_collapse(tmp_path):
    """Engine 0 always at one request (62%), engine 1 always at three (25%): no engine was
    measured at two loads, so nothing says concurrency is the cause (the run taken whole
    said 'collapse, certain'); engine 1's own low acceptance is what the data shows."""
    lines = []
    for i in range(1, 9):
        lines += [stats(i, running=1, engine=0), spec(i, 200, [160, 120, 90])]
        lines += [stats(i, running=3, engine=1), spec(i, 200, [70, 50, 30])]
    found, everything = _screened_and_not(tmp_path, lines)
    assert "concurrency_collapse" not in {f.kind for f in everything}
    assert [f.to_dict() for f in found] == [f.to_dict() for f in everything]


def test_an_engine_that_collapses_under_load_is_named(tmp_path):
    """Engine 0 at 60% with one request and 15% with three; engine 1 always at three and
    60%: the run's sum (60% against 37%) hides it, engine 0's own two loads show it."""
    lines = []
    for i in range(1, 9):
        busy = i > 4
        lines += [stats(i, running=3 if busy else 1, engine=0)]
        lines += [spec(i, 200, [50, 25, 15] if busy else [150, 120, 90])]
        lines += [stats(i, running=3, engine=1), spec(i, 200, [150, 120, 90])]
    found, everything = _screened_and_not(tmp_path, lines)
    (collapse,) = [f for f in everything if f.kind == "concurrency_collapse"]
    assert collapse.measured["engine"] == 0
    assert collapse.measured["rate_one_running"] == pytest.approx(0.6)
    assert collapse.measured["rate_two_or_more"] == pytest.approx(0.15)
    assert "on engine 0 of this data-parallel run" in collapse.explanation
    assert [f.to_dict() for f in found] == [f.to_dict() for f in everything]


def test_the_verdict_sentence_ends_once(tmp_path):
    """A one-sentence explanation ending in a full stop is quoted with one, not two."""
    from specscope.analysis.evidence import gather
    from specscope.analysis.verdict import verdict_of

    lines = []
    for i in range(1, 9):
        lines += [stats(i, running=1, engine=0), spec(i, 200, [160, 120, 90])]
        lines += [stats(i, running=3, engine=1), spec(i, 200, [70, 50, 30])]
    found, _ = _screened_and_not(tmp_path, lines)
    said = verdict_of(gather(specscope.open_store(tmp_path / "store")), found)
    assert ".." not in said and said.endswith(".")
