"""Verdicts that compare the sides of one paste (issue 16): two launches at different k, a
benchmark at each, the same setup with one change set side by side in a table. Generated
logs (the V1 lines of ``test_launches``, benchmark blocks as ``vllm bench serve`` prints
them, markdown tables of accept lengths) healthy and faulty, and the guard that a log of
one run is judged as before."""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope
from specscope.analysis.detectors import findings_of
from specscope.analysis.evidence import gather
from tests.test_launches import spec_line


def _decaying(k: int, first: float, keep: float) -> list[float]:
    return [round(first * keep**i, 3) for i in range(k)]


def _bench(output: float, requests: int = 1024) -> str:
    """A ``benchmark_serving`` result block (no speculative section, as 0.6-0.13 print)."""
    rows = [
        ("Successful requests:", f"{requests}"),
        ("Benchmark duration (s):", f"{requests * 190 / output:.2f}"),
        ("Total input tokens:", "220902"),
        ("Total generated tokens:", "192104"),
        ("Request throughput (req/s):", f"{output / 190:.2f}"),
        ("Output token throughput (tok/s):", f"{output:.2f}"),
        ("Total Token throughput (tok/s):", f"{output * 2.1:.2f}"),
    ]
    body = "\n".join(f"{name:<41}{value}" for name, value in rows)
    return (
        "============ Serving Benchmark Result ============\n"
        f"{body}\n"
        "---------------Time to First Token----------------\n"
        "Mean TTFT (ms):                          447.49    \n"
        "Median TTFT (ms):                        229.31    \n"
        "==================================================\n"
    )


def _findings(tmp_path: Path, text: str, name: str = "paste.log") -> list[specscope.Finding]:
    log = tmp_path / name
    log.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026)
    return specscope.detect(specscope.open_store(store))


def _compared(findings: list[specscope.Finding], kind: str) -> list[specscope.Finding]:
    """The findings of ``kind`` that set a side against a sibling."""
    return [
        f
        for f in findings
        if f.kind == kind and any(key.startswith("sibling") for key in f.measured)
    ]


def _launches(*parts: tuple[int, list[float]], per: int = 6) -> str:
    """Launches of one process pasted one after the other (a change of k, no restart)."""
    lines, t = [], 0
    for k, rates in parts:
        for _ in range(per):
            lines.append(spec_line(k, t, rates=rates, drafts=400))
            t += 10
    return "\n".join(lines) + "\n"


# -- k across launches -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "sweep",
    [
        [(3, _decaying(3, 0.8, 0.85)), (5, _decaying(5, 0.8, 0.85))],
        [(5, _decaying(5, 0.75, 0.8)), (7, _decaying(7, 0.75, 0.8)), (3, _decaying(3, 0.75, 0.8))],
        [(2, _decaying(2, 0.6, 0.7)), (4, _decaying(4, 0.6, 0.7))],
    ],
)
def test_a_k_sweep_whose_mean_length_rises_is_not_blamed(tmp_path: Path, sweep) -> None:
    findings = _findings(tmp_path, _launches(*sweep))
    assert not _compared(findings, "k_too_large")
    assert not _compared(findings, "low_acceptance")


def test_a_larger_k_that_drags_every_position_down_is_too_large(tmp_path: Path) -> None:
    faulty = [0.18, 0.07, 0.04, 0.014, 0.009, 0.0, 0.0]
    findings = _findings(tmp_path, _launches((5, _decaying(5, 0.6, 0.78)), (7, faulty)))
    [found] = _compared(findings, "k_too_large")
    assert found.measured["k"] == 7 and found.measured["sibling_k"] == 5
    assert found.expected["k"] == 5
    assert "k=7" in found.explanation and "k=5" in found.explanation
    # Counted on both sides: an interval test, not numbers taken as printed.
    assert found.confidence is not None and found.confidence.level in ("certain", "likely")
    assert found.confidence.sample["drafts"] == 6 * 400


def test_extra_positions_at_zero_with_no_more_tokens_a_step_are_too_large(tmp_path: Path) -> None:
    rates = _decaying(4, 0.7, 0.8)
    findings = _findings(tmp_path, _launches((4, rates), (6, [*rates, 0.0, 0.0])))
    [found] = _compared(findings, "k_too_large")
    assert found.measured["k"] == 6 and "positions 5-6" in found.explanation


def test_printed_lines_without_counts_give_a_suggestive_comparison(tmp_path: Path) -> None:
    """World case 220's shape written by another hand: two fenced lines trimmed to their
    mean length and per-position list, k=6 then k=4, a sentence between."""
    text = (
        "```\nSpecDecoding metrics: Mean acceptance length: 1.40, Per-position acceptance "
        "rate: 0.250, 0.100, 0.050, 0.000, 0.000, 0.000, Avg Draft acceptance rate: 6.7%\n```\n"
        "\nWith `num_speculative_tokens: 4` instead:\n\n"
        "```\nSpecDecoding metrics: Mean acceptance length: 2.50, Per-position acceptance "
        "rate: 0.600, 0.420, 0.290, 0.190, Avg Draft acceptance rate: 37.5%\n```\n"
    )
    [found] = _compared(_findings(tmp_path, text), "k_too_large")
    assert found.measured["k"] == 6 and found.measured["sibling_k"] == 4
    assert found.confidence is not None and found.confidence.level == "suggestive"
    assert any("printed values" in a for a in found.confidence.assumptions)


@pytest.mark.parametrize(
    ("small", "large", "blamed"), [(1650.0, 1350.0, True), (1500.0, 1580.0, False)]
)
def test_benchmarks_at_two_k(tmp_path: Path, small: float, large: float, blamed: bool) -> None:
    """A launch at each k with its benchmark after it (world case 63's notes): the larger
    k blamed only when its output throughput is lower beyond noise."""
    text = (
        _launches((3, _decaying(3, 0.8, 0.9)), per=1)
        + _bench(small)
        + "\n# num_speculative_tokens 6\n"
        + spec_line(6, 900, rates=_decaying(6, 0.8, 0.9), drafts=400, pid=5120)
        + "\n"
        + _bench(large)
    )
    found = _compared(_findings(tmp_path, text), "k_too_large")
    assert bool(found) is blamed
    if blamed:
        assert found[0].measured["output_throughput"] == large
        assert found[0].confidence is not None and found[0].confidence.level == "suggestive"


def test_benchmarks_of_different_workloads_are_not_compared(tmp_path: Path) -> None:
    text = (
        _launches((3, _decaying(3, 0.8, 0.9)), per=1)
        + _bench(1650.0, requests=1024)
        + spec_line(6, 900, rates=_decaying(6, 0.8, 0.9), drafts=400, pid=5120)
        + "\n"
        + _bench(1350.0, requests=200)
    )
    assert not _compared(_findings(tmp_path, text), "k_too_large")


# -- a sibling far below -------------------------------------------------------------------


def _restarts(*curves: list[float]) -> str:
    """The same server started again (a new pid) for each curve."""
    lines = []
    for n, rates in enumerate(curves):
        lines += [
            spec_line(len(rates), 100 * n + 10 * i, rates=rates, drafts=400, pid=4000 + n)
            for i in range(6)
        ]
    return "\n".join(lines) + "\n"


def test_a_restart_far_below_its_sibling_is_low(tmp_path: Path) -> None:
    findings = _findings(tmp_path, _restarts([0.8, 0.7, 0.6], [0.25, 0.15, 0.1]))
    [found] = _compared(findings, "low_acceptance")
    assert found.measured["tau_minus_1"] == pytest.approx(0.5, abs=0.01)
    assert found.measured["sibling_tau_minus_1"] == pytest.approx(2.1, abs=0.01)
    assert found.confidence is not None and found.confidence.level == "certain"


def test_an_unlabelled_drop_a_dataset_could_give_is_not_blamed(tmp_path: Path) -> None:
    """Acceptance varies by about this much between datasets (tau - 1 at 0.45 of the
    other's): with nothing said of what changed, no fault is called."""
    findings = _findings(tmp_path, _restarts([0.8, 0.7, 0.6], [0.45, 0.3, 0.2]))
    assert not _compared(findings, "low_acceptance")


TABLE = """{intro}

| {corner} | {a} | {b} |
|---|---|---|
| Accept length | {x} | {y} |
"""


@pytest.mark.parametrize(
    ("a", "b", "x", "y", "blamed"),
    [
        ("MTP only", "PD+MTP", "3.40", "2.10", True),  # disaggregation (world 233's shape)
        ("**Before restart**", "**After HiCache loadback**", "4.20", "1.90", True),
        ("v0.9.1", "v0.9.2", "3.10", "1.80", True),  # a regression between versions
        ("temperature 0", "temperature 1.0", "3.40", "2.10", False),
        ("ShareGPT", "HumanEval (code)", "3.40", "2.10", False),
        ("EAGLE-3", "MTP", "3.40", "2.10", False),  # two drafters compared
        ("4K context", "64K context", "3.40", "2.10", False),
        ("MTP only", "PD+MTP", "3.40", "2.90", False),  # within what a change may give
    ],
)
def test_a_table_of_two_setups(
    tmp_path: Path, a: str, b: str, x: str, y: str, blamed: bool
) -> None:
    text = TABLE.format(intro="Same model and benchmark:", corner=" ", a=a, b=b, x=x, y=y)
    found = _compared(_findings(tmp_path, text), "low_acceptance")
    assert bool(found) is blamed, [f.explanation for f in found]
    if blamed:
        assert b.strip("*") in found[0].explanation and a.strip("*") in found[0].explanation
        assert found[0].confidence is not None and found[0].confidence.level == "suggestive"


def test_a_dead_side_is_left_to_zero_acceptance(tmp_path: Path) -> None:
    """World 140's shape: one backend dead, a flag on it barely better, the other healthy:
    zero acceptance is the verdict, the flag's side is not blamed apart."""
    findings = _findings(tmp_path, _restarts([0.8, 0.7, 0.6], [0.0, 0.0, 0.0], [0.12, 0.05, 0.01]))
    assert any(f.kind == "zero_acceptance" for f in findings)
    assert not _compared(findings, "low_acceptance")


# -- single runs are judged as before ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        _launches((5, _decaying(5, 0.7, 0.8)), per=8),
        _launches((7, [0.18, 0.07, 0.04, 0.014, 0.009, 0.0, 0.0]), per=3),
    ],
)
def test_one_run_has_no_sides(tmp_path: Path, text: str) -> None:
    log = tmp_path / "one.log"
    log.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026)
    ev = gather(specscope.open_store(store))
    assert ev.sides == []
    before = [f.to_dict() for f in findings_of(ev)]
    ev.sides = None
    assert [f.to_dict() for f in findings_of(ev)] == before


def _bench_spec(output: float, k: int, first: float = 0.85, keep: float = 0.8) -> str:
    """A ``vllm bench serve`` block of 0.14+ with its Speculative Decoding section."""
    drafts = 20000
    rates = [first * keep**i for i in range(k)]
    accepted = [round(r * drafts) for r in rates]
    positions = "\n".join(f"Position {i}: {100 * r:.2f}" for i, r in enumerate(rates))
    return (
        "============ Serving Benchmark Result ============\n"
        "Successful requests:                     80\n"
        "Maximum request concurrency:             8\n"
        "Benchmark duration (s):                  60.00\n"
        "Total input tokens:                      81920\n"
        "Total generated tokens:                  20480\n"
        f"Output token throughput (tok/s):        {output:.2f}\n"
        "---------------Speculative Decoding---------------\n"
        f"Acceptance rate (%): {100 * sum(accepted) / (k * drafts):.2f}\n"
        f"Acceptance length: {1 + sum(accepted) / drafts:.2f}\n"
        f"Drafts: {drafts}\n"
        f"Draft tokens: {k * drafts}\n"
        f"Accepted tokens: {sum(accepted)}\n"
        "Per-position acceptance (%):\n"
        f"{positions}\n"
        "==================================================\n"
    )


@pytest.mark.parametrize(("at_4", "at_8", "blamed"), [(900.0, 700.0, True), (700.0, 900.0, False)])
def test_benchmarks_with_their_speculative_sections(
    tmp_path: Path, at_4: float, at_8: float, blamed: bool
) -> None:
    """A depth sweep as ``vllm bench serve`` prints it: the mean length rises with k (no
    blame from acceptance), the throughput decides."""
    text = _bench_spec(at_4, 4) + "\nnum_speculative_tokens=8:\n\n" + _bench_spec(at_8, 8)
    found = _compared(_findings(tmp_path, text), "k_too_large")
    assert bool(found) is blamed
    if blamed:
        assert found[0].measured["k"] == 8 and found[0].measured["output_throughput"] == at_8


@pytest.mark.parametrize(
    ("a", "b", "blamed"), [("k=3", "k=5", True), ("k=3, chat", "k=5, code", False)]
)
def test_a_table_at_two_k(tmp_path: Path, a: str, b: str, blamed: bool) -> None:
    """Two depths side by side in a table, k in a steps row: the larger k accepting fewer
    tokens a step is too large, unless the workload changed with it."""
    text = (
        f"| | {a} | {b} |\n|---|---|---|\n| num_speculative_tokens | 3 | 5 |\n"
        "| Mean acceptance length | 2.60 | 2.10 |\n"
    )
    found = _compared(_findings(tmp_path, text), "k_too_large")
    assert bool(found) is blamed, [f.explanation for f in found]


def test_sides_found_from_the_rollups_as_from_the_rows(tmp_path: Path, monkeypatch) -> None:
    """The sources that may hold two sides are found from the runs and rollups (no scan of
    a fleet's rows); a store without rollups scans its rows: both give the same sides."""
    from specscope.analysis.siblings import side_rows
    from specscope.store.reading import Store

    logs = {
        "two_k.log": _launches((5, _decaying(5, 0.6, 0.78)), (7, [0.2, 0.07, 0.04, 0.01, 0, 0, 0])),
        "restarts.log": _restarts([0.8, 0.7, 0.6], [0.25, 0.15, 0.1]),
        "one.log": _launches((4, _decaying(4, 0.7, 0.8))),
    }
    for name, text in logs.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([tmp_path / n for n in logs], store=store, year=2026)
    opened = specscope.open_store(store)
    assert opened.sums_cover_rows()
    rolled = [(s.run_id, s.k, s.lines) for s in side_rows(opened)]
    monkeypatch.setattr(Store, "sums_cover_rows", lambda self: False)
    assert [(s.run_id, s.k, s.lines) for s in side_rows(opened)] == rolled
    assert {Path(s.source).name for s in side_rows(opened)} == {"two_k.log", "restarts.log"}
