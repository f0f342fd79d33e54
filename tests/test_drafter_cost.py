"""The drafter's measured cost feeds `advise` (issue 21): llama.cpp's `dur(b,g,a)` against
the request's `eval time`, TensorRT-LLM's draft overhead, instead of the method's default;
and `advise` says when speculation should be off at the load the run saw."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

import specscope
from specscope.analysis.advise import advice_text, advise

ROOT = Path(__file__).resolve().parent.parent
WORLD = ROOT / "fixtures" / "world"


def _store(tmp_path: Path, name: str, text: str) -> specscope.Store:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([path], store=store, year=2026)
    return specscope.open_store(store)


def _iterations(n: int, accepted: int, overhead: float | None, requests: int = 32) -> str:
    """TensorRT-LLM iteration stats, one a line: each request drafts 3 tokens."""
    out = []
    for i in range(n):
        stats = {
            "numDraftTokens": 3 * requests,
            "numAcceptedTokens": accepted,
            "numRequestsWithDraftTokens": requests,
            "acceptanceLength": 1 + accepted / requests,
            "iterLatencyMS": 12.0,
        }
        if overhead is not None:
            stats["draftOverhead"] = overhead
        out.append(json.dumps({"iter": i, "iterLatencyMS": 20.0, "specDecodingStats": stats}))
    return "\n".join(out) + "\n"


# -- llama.cpp ---------------------------------------------------------------------------


def test_llamacpp_dur_against_the_requests_eval_time(tmp_path) -> None:
    text = (WORLD / "97_llamacpp_eagle3_request_and_statistics.log").read_text(encoding="utf-8")
    store = _store(tmp_path, "97.log", text)
    by_method = {a.method: a for a in advise(store)}
    a = by_method["eagle3"]  # the draft-eagle3 statistics run
    # dur g 325.555 ms over 87 draft calls; eval time 2296.72 ms over 256 tokens, 167 of
    # them accepted drafts: 89 verify steps; k as drafted 259 / 87.
    draft = 325.555 / 87
    target = 2296.72 / 89 - draft
    assert a.measured is not None
    assert a.measured["draft_ms_per_step"] == pytest.approx(draft)
    assert a.measured["target_ms_per_step"] == pytest.approx(target)
    assert a.cost_ratio == round(draft / target / (259 / 87), 4) == 0.057
    assert a.cost_source.startswith("measured: llama.cpp drafter 3.74 ms a step")
    assert a.curve_from == "printed" and [p["tau"] for p in a.curve] == pytest.approx(
        [1.805, 2.437, 2.92]
    )
    assert a.pays and not a.off
    lo, hi = a.speedup_interval or (0, 0)
    assert lo < a.curve[-1]["speedup"] < hi
    # The request run beside it is costed by the one implementation that drafted.
    assert by_method[None].cost_source == a.cost_source


@pytest.mark.parametrize(
    ("calls", "dur"),
    [
        ("#calls = 87", "dur(b,g,a) = 0.005, 325.555, 0.114 ms"),  # docs/speculative.md 067318e
        ("#calls = 87", "dur = 325.555 ms"),  # the earlier single generation time
    ],
)
def test_llamacpp_earlier_statistics_forms_give_the_same_cost(tmp_path, calls, dur) -> None:
    """'#calls = N' counts the draft calls alone: with either duration the drafter's time a
    step is the same 325.555 ms over 87 calls as the '#calls(b,g,a)' form gives."""
    text = (WORLD / "97_llamacpp_eagle3_request_and_statistics.log").read_text(encoding="utf-8")
    old = text.replace("#calls(b,g,a) =    1     87     87", calls)
    old = old.replace("dur(b,g,a) = 0.005, 325.555, 0.114 ms", dur)
    assert old.count(calls) == 1 and old.count(dur) == 1
    a = {a.method: a for a in advise(_store(tmp_path, "97.log", old))}["eagle3"]
    assert a.measured is not None and a.measured["draft_calls"] == 87
    assert a.measured["draft_ms_per_step"] == pytest.approx(325.555 / 87)
    assert a.cost_ratio == 0.057 and a.cost_source.startswith("measured: llama.cpp drafter")


def test_llamacpp_without_the_eval_time_line_keeps_the_default(tmp_path) -> None:
    text = (WORLD / "97_llamacpp_eagle3_request_and_statistics.log").read_text(encoding="utf-8")
    cut = "\n".join(line for line in text.splitlines() if "        eval time" not in line)
    by_method = {a.method: a for a in advise(_store(tmp_path, "97.log", cut))}
    a = by_method["eagle3"]
    assert a.measured is None and a.cost_source == "default for eagle3" and a.cost_ratio == 0.05


def test_llamacpp_chain_own_k_from_counts_and_no_lookup_advice(tmp_path) -> None:
    text = (WORLD / "100_llamacpp_mtp_ngram_chain_statistics.log").read_text(encoding="utf-8")
    items = advise(_store(tmp_path, "100.log", text))
    (a,) = items  # draft-mtp; the n-gram lookups draft in 7 of 1,315 steps: no advice
    assert a.method == "mtp" and a.curve_from == "mean" and a.k == 2
    draft = 54825.426 / 1308
    # ngram-map-k's and ngram-mod's time since the start (b, g and a) over draft-mtp's calls:
    # drafting's, not the target's.
    chained = (2.912 + 2.660 + 0.000 + 0.548 + 3.454 + 2.238) / 1308
    target = 15965.32 / (192 - 111) - draft - chained
    assert a.measured is not None
    assert a.measured["chained_ms_per_step"] == pytest.approx(chained)
    assert a.measured["target_ms_per_step"] == pytest.approx(target)
    assert a.cost_ratio == round((draft + chained) / target / (2602 / 1308), 4)
    assert "0.009 ms of the implementations chained with it" in a.cost_source
    assert a.curve[0]["tau"] == pytest.approx(1 + 2031 / 1308)
    assert "the run's own k only" in advice_text(items)


def test_llamacpp_a_costly_implementation_in_the_chain_is_drafting_time(tmp_path) -> None:
    # Case 100 with ngram-mod's generate time made 20 s (a lookup over a huge context):
    # 15.3 ms a step taken from the target's time and added to the drafter's.
    text = (WORLD / "100_llamacpp_mtp_ngram_chain_statistics.log").read_text(encoding="utf-8")
    slow = text.replace(
        "dur(b,g,a) = 0.548, 3.454, 2.238 ms", "dur(b,g,a) = 0.548, 20000.0, 2.238 ms"
    )
    (a,) = advise(_store(tmp_path, "100.log", slow))
    draft = 54825.426 / 1308
    chained = (2.912 + 2.660 + 0.548 + 20000.0 + 2.238) / 1308
    target = 15965.32 / (192 - 111) - draft - chained
    assert a.measured is not None and a.measured["chained_ms_per_step"] == pytest.approx(chained)
    assert a.cost_ratio == round((draft + chained) / target / (2602 / 1308), 4)
    before = round(draft / (15965.32 / 81 - draft) / (2602 / 1308), 4)
    assert a.cost_ratio > before + 0.05


# -- TensorRT-LLM ------------------------------------------------------------------------


def test_trtllm_overhead_switches_the_cost_and_says_off(tmp_path) -> None:
    store = _store(tmp_path, "iter.jsonl", _iterations(200, 21, 0.6))
    (a,) = advise(store)
    assert a.cost_ratio == round(0.6 / 0.4 / 3, 4) == 0.5
    assert a.cost_source.startswith("measured: TensorRT-LLM draft overhead 0.600")
    assert a.curve_from == "mean" and a.curve[0]["tau"] == pytest.approx(1 + 21 / 32)
    assert a.off and not a.pays
    assert a.speedup_interval is not None and a.speedup_interval[1] <= 1
    assert "speculation should be off at the load this run saw" in advice_text([a])
    # --cost-ratio wins over what was measured.
    (b,) = advise(store, cost=0.01)
    assert b.cost_source == "--cost-ratio" and b.pays and not b.off


def test_the_report_says_off_for_a_run_costed_on_its_own_k(tmp_path) -> None:
    """TensorRT-LLM at 60% draft overhead has no per-position curve, yet the report's advice
    says what `advise` says: off at this load."""
    from specscope.report.build import build_report
    from specscope.report.markdown import render_markdown

    report = build_report(
        _store(tmp_path, "iter.jsonl", _iterations(200, 21, 0.6)), with_charts=False
    )
    (a,) = report.advice
    assert a["off"] and not report.per_position
    text = render_markdown(report, tmp_path / "r.md", images=False)
    assert f"- **run {a['run_id']}** (k=3): **Speculation should be off" in text


def test_trtllm_without_overhead_has_no_cost_to_judge_its_own_k(tmp_path) -> None:
    assert advise(_store(tmp_path, "iter.jsonl", _iterations(200, 21, None))) == []


def test_a_speedup_under_one_whose_interval_reaches_one_is_not_off(tmp_path) -> None:
    # 2 iterations of 4 requests: tau 1.75 against 1 + 0.45 / 0.55 = 1.82, 0.96x; 8 drafts
    # are too few to say it is under 1.
    store = _store(tmp_path, "iter.jsonl", _iterations(2, 3, 0.45, requests=4))
    (a,) = advise(store)
    assert not a.pays
    lo, hi = a.speedup_interval or (0, 0)
    assert lo < 1 < hi and not a.off
    assert "should be off" not in advice_text([a])


def test_trtllm_pasted_metrics_overhead_with_per_position_counts(tmp_path) -> None:
    spec = tomllib.loads((ROOT / "parsers" / "prometheus_text_trtllm.toml").read_text())
    text = spec["samples"][0]["text"]
    (a,) = advise(_store(tmp_path, "metrics.txt", text + "\n"))
    # draft_overhead 0.12; 260 draft tokens over 100 drafts.
    assert a.cost_ratio == round(0.12 / 0.88 / 2.6, 4)
    assert a.curve_from == "counts" and a.k == 3
