"""Acceptance request by request (issue 21): the distribution over a run's requests, the
least accepted and what they share, and single requests at about 0 or 1 (garbled output,
repetition loops), from real request lines and generated captures."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import polars as pl
import pytest

import specscope
from specscope.analysis.requests import histogram, median_interval, quantile, requests_of
from specscope.report.build import build_report
from specscope.report.markdown import render_markdown
from specscope.report.requests import requests_html, requests_markdown, sparkline
from specscope.thresholds import load_config

ROOT = Path(__file__).resolve().parent.parent
WORLD = ROOT / "fixtures" / "world"


def _sample(name: str, i: int) -> str:
    text = (ROOT / "parsers" / f"{name}.toml").read_text(encoding="utf-8")
    return str(tomllib.loads(text)["samples"][i]["text"])


def _meta(steps: int, k: int, accepted: int, prompt: int = 500, cached: int = 0) -> str:
    """One SGLang /generate response (meta_info) as a capture of responses holds it."""
    return json.dumps(
        {
            "text": "...",
            "meta_info": {
                "prompt_tokens": prompt,
                "completion_tokens": steps + accepted,
                "cached_tokens": cached,
                "spec_verify_ct": steps,
                "spec_accept_token_num": accepted,
                "spec_draft_token_num": steps * k,
            },
        }
    )


def _detect(tmp_path: Path, lines: list[str], name: str = "capture.jsonl") -> list:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([path], store=store, year=2026)
    return specscope.detect(specscope.open_store(store))


def _kinds(findings: list, kind: str) -> list:
    return [f for f in findings if f.kind == kind]


# -- the numbers, against a hand count ---------------------------------------------------


def test_quantiles_are_nearest_rank_as_counted_by_hand() -> None:
    rates = sorted([0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 1.0, 0.05, 0.95])
    # 12 rates: p10 is the 2nd (ceil 1.2), p50 the 6th, p90 the 11th (ceil 10.8).
    assert quantile(rates, 0.1) == 0.1
    assert quantile(rates, 0.5) == 0.5
    assert quantile(rates, 0.9) == 0.95
    assert quantile([0.4], 0.1) == quantile([0.4], 0.9) == 0.4
    # Tenths, 1.0 in the last bin, 0.1 in the second (not the first).
    assert histogram(rates) == [1, 1, 1, 1, 1, 1, 1, 1, 1, 3]
    # 25 requests: ranks 12.5 -+ 1.96 * 5 / 2 = 7.6 .. 17.4 -> the 7th and 19th.
    values = [i / 100 for i in range(1, 26)]
    assert median_interval(values, 1.96) == (0.07, 0.19)
    assert median_interval(values[:4], 1.96) is None


def test_trials_come_from_verify_steps_else_k_else_the_largest_k() -> None:
    rows = pl.DataFrame(
        {
            "line": [1, 2, 3, 4],
            "k": [None, 3, None, None],
            "drafts": [40, None, None, None],
            "draft_tokens": [160, 90, 160, 0],
            "accepted_tokens": [80, 45, 80, 0],
            "per_position_rate": [None, None, None, None],
            "extra": [None, None, '{"prompt_uncached": 4, "cached_tokens": 804}', None],
        }
    )
    got = requests_of(rows, 16)
    assert [r.trials for r in got] == [40.0, 30.0, 10.0]  # nothing drafted: no request
    assert [r.k_known for r in got] == [True, True, False]
    assert got[2].traits == {"cached_tokens": 804, "prompt_tokens": 808}


# -- the findings ------------------------------------------------------------------------


def test_the_distribution_keeps_few_draft_requests_out_of_the_tails(tmp_path) -> None:
    healthy = [_meta(40, 4, 80 + 4 * i) for i in range(9)]  # 50.0% .. 70.0%
    few = [_meta(2, 4, 0)]  # 8 drafted tokens, none accepted: counted, not a tail
    slow = [_meta(50, 4, 30, prompt=9000)]  # 15%, with the longest prompt
    found = _detect(tmp_path, healthy + few + slow)
    (dist,) = _kinds(found, "request_acceptance")
    m = dist.measured
    assert m["requests"] == 10 and m["few_drafts"] == 1
    rates = sorted([(80 + 4 * i) / 160 for i in range(9)] + [30 / 200])
    assert m["quantiles"] == {"p10": rates[0], "p50": rates[4], "p90": rates[8]}
    assert sum(m["histogram"]) == 10 and m["histogram"][1] == 1
    assert m["lowest"][0]["line"] == 11 and m["lowest"][0]["prompt_tokens"] == 9000
    assert m["shared"]["prompt_tokens"] == {"lowest": 9000, "rest": 500}
    assert dist.severity == specscope.Severity.INFO
    assert "order statistics of 10 requests" in dist.confidence.test
    assert not _kinds(found, "request_outlier")  # 15% is low, not about 0


@pytest.mark.parametrize(("steps", "flagged"), [(12, False), (30, False), (60, True)])
def test_a_request_near_zero_is_flagged_only_with_enough_drafts(tmp_path, steps, flagged) -> None:
    healthy = [_meta(40, 4, 100) for _ in range(6)]
    found = _detect(tmp_path, [*healthy, _meta(steps, 4, 0)])
    outliers = _kinds(found, "request_outlier")
    assert bool(outliers) is flagged
    if flagged:
        (f,) = outliers
        assert f.measured["side"] == "zero" and f.lines == (7, 7)
        assert f.severity == specscope.Severity.WARNING
        # 0 of 60 drafts: the one-sided 95% Wilson bound is 1.645^2 / (60 + 1.645^2) = 4.3%.
        assert f.confidence.level == "likely" and "4.3% < 5%" in f.confidence.test


def test_a_repetition_loop_is_flagged_near_one(tmp_path) -> None:
    healthy = [_meta(40, 4, 100) for _ in range(6)]
    found = _detect(tmp_path, [*healthy, _meta(400, 4, 1600), _meta(30, 4, 120)])
    (f,) = _kinds(found, "request_outlier")
    assert f.measured["side"] == "one"
    # 400 drafts all accepted clears 95% even at 99.9%; 30 of 30 does not clear it at all.
    assert [r["line"] for r in f.measured["requests"]] == [7]
    assert f.confidence.level == "certain"


def test_a_run_that_accepts_nothing_is_zero_acceptance_not_a_request_outlier(tmp_path) -> None:
    found = _detect(tmp_path, [_meta(60, 4, 0) for _ in range(6)])
    assert _kinds(found, "zero_acceptance")
    assert not _kinds(found, "request_outlier")


def test_real_sglang_finish_line_near_zero_among_healthy_requests(tmp_path) -> None:
    # sglang#13754's request (11 of 940 draft tokens over 188 verify steps) logged as the
    # request logger prints it, among requests that accept half their drafts.
    real = _sample("sglang_request_finish", 0)
    other = _sample("sglang_request_finish", 1)  # sglang#33518's DSpark request, 63 of 215
    found = _detect(tmp_path, [other] * 5 + [real], name="server.log")
    (f,) = _kinds(found, "request_outlier")
    assert f.measured["requests"] == [{"line": 6, "drafted": 940, "accepted": 11, "rate": 11 / 940}]
    (dist,) = _kinds(found, "request_acceptance")
    assert dist.measured["lowest"][0] == {
        "line": 6,
        "drafted": 940,
        "accepted": 11,
        "rate": 11 / 940,
        "prompt_tokens": 171,
        "output_tokens": 200,
        "cached_tokens": 0,
    }


def _vllm(steps: int, accepted: int, prompt: int, cached: int) -> str:
    """One vLLM response with --per-request-spec-decode-metrics, shaped as llama-swap#1032's
    capture: its usage (prompt, cached, output tokens) beside the metrics, under 'data'."""
    body = {
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": steps + accepted,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
        "metrics": {
            "speculative_decoding": {
                "num_spec_steps": steps,
                "num_accepted_draft_tokens": accepted,
                "num_draft_tokens": 3 * steps,
                "num_spec_tokens": 3,
            }
        },
    }
    return json.dumps({"data": body})


def test_vllm_responses_say_what_the_least_accepted_requests_share(tmp_path) -> None:
    # Six requests with short, cached prompts accept 60 of 120; two with 11,742 uncached
    # prompt tokens (llama-swap#1032's) accept 10 of 129 and 12 of 129.
    lines = [_vllm(40, 60, 300, 256) for _ in range(6)]
    lines += [_vllm(43, 10, 11742, 0), _vllm(43, 12, 11742, 0)]
    (dist,) = _kinds(_detect(tmp_path, lines), "request_acceptance")
    (low,) = dist.measured["lowest"]
    assert low == {
        "line": 7,
        "drafted": 129,
        "accepted": 10,
        "rate": 10 / 129,
        "prompt_tokens": 11742,
        "output_tokens": 53,
        "cached_tokens": 0,
    }
    # The least accepted are those at or under p10 (line 7): they are compared with the rest.
    assert dist.measured["shared"] == {
        "prompt_tokens": {"lowest": 11742, "rest": 300},
        "output_tokens": {"lowest": 53, "rest": 100},
        "cached_tokens": {"lowest": 0, "rest": 256},
    }
    assert "median prompt tokens 11,742 among them against 300 for the rest" in dist.explanation


def test_one_healthy_request_is_no_distribution_and_no_outlier(tmp_path) -> None:
    store = tmp_path / "store"
    specscope.ingest([WORLD / "97_llamacpp_eagle3_request_and_statistics.log"], store=store)
    kinds = {f.kind for f in specscope.detect(specscope.open_store(store))}
    assert "llamacpp_request" in set(
        specscope.open_store(store).spec_decode.collect()["format"].to_list()
    )
    assert not kinds & {"request_acceptance", "request_outlier"}


def test_a_finish_line_cut_before_its_counts_is_no_request(tmp_path) -> None:
    # World case 105 (sglang#11144's example, cut before the speculative fields) among
    # five complete requests: the distribution is of the five, nothing made up for it.
    cut = (WORLD / "105_sglang_finish_line_cut_before_spec.log").read_text(encoding="utf-8")
    whole = _sample("sglang_request_finish", 1)
    found = _detect(tmp_path, [whole] * 3 + cut.splitlines() + [whole] * 2, name="server.log")
    (dist,) = _kinds(found, "request_acceptance")
    assert dist.measured["requests"] == 5 and dist.measured["few_drafts"] == 0
    assert dist.measured["quantiles"]["p50"] == 63 / 215


def test_detect_json_and_the_report_show_the_distribution(tmp_path) -> None:
    lines = [_meta(40, 4, 60 + 10 * i, prompt=400 + i) for i in range(8)]
    _detect(tmp_path, lines)
    store = specscope.open_store(tmp_path / "store")
    found = [f.to_dict() for f in specscope.detect(store)]
    (d,) = [f for f in found if f["kind"] == "request_acceptance"]
    json.dumps(d)  # plain JSON
    assert d["measured"]["quantiles"]["p50"] == 90 / 160
    parts = "\n".join(requests_markdown(found))
    assert "## Acceptance request by request" in parts and "| 1 | 60 / 160 | 37.5% |" in parts
    assert "<td>60 / 160</td>" in requests_html(found)
    assert requests_markdown([]) == [] and requests_html([]) == ""
    out = tmp_path / "report.md"
    text = render_markdown(build_report(store), out)
    assert "## Acceptance request by request" in text


def test_sparkline_bars_scale_to_the_largest_bin() -> None:
    assert sparkline([0, 4, 2, 8]) == " ▄▂█"
    assert sparkline([0, 0]) == ""


def test_thresholds_are_configurable() -> None:
    cfg = load_config()["request_acceptance"]
    assert cfg["near_zero"] < cfg["near_one"] and cfg["min_draft_tokens"] > 0


def test_a_fleets_detect_reads_the_requests_as_over_every_row(tmp_path) -> None:
    from specscope.analysis.detectors import findings_of
    from specscope.analysis.detectors.needed import gather_needed
    from specscope.analysis.evidence import gather

    # A capture of responses alone: a store without engine stats (the screens still
    # compare their columns, typed as the table types them).
    _detect(tmp_path, [_meta(40, 4, 100)] * 6 + [_meta(80, 4, 0)])
    store = specscope.open_store(tmp_path / "store")
    assert store.sums_cover_rows()
    every = [f.to_dict() for f in findings_of(gather(store))]
    needed = [f.to_dict() for f in findings_of(gather_needed(store))]
    kinds = {"request_acceptance", "request_outlier"}
    assert {f["kind"] for f in every} >= kinds
    assert [f for f in every if f["kind"] in kinds] == [f for f in needed if f["kind"] in kinds]


def test_since_leaves_out_requests_stamped_before_it(tmp_path) -> None:
    from datetime import datetime, timedelta

    from specscope.analysis.evidence import gather

    log = [
        f"[2026-03-0{day} 10:00:00] " + _sample("sglang_request_finish", 1).split("] ", 1)[1]
        for day in (1, 1, 1, 1, 1, 5, 5)
    ]
    _detect(tmp_path, log, name="server.log")
    store = specscope.open_store(tmp_path / "store")
    assert gather(store).requests.height == 7
    late = gather(store, since=timedelta(days=2), now=datetime(2026, 3, 6))
    assert late.requests is not None and late.requests.height == 2


def test_a_capture_of_requests_is_no_series_in_time(tmp_path) -> None:
    # Six requests at 60 of 120 then one at 10 of 129: the one is the least accepted
    # request, not a change of level mid-run (acceptance_drift judges intervals in time).
    found = _detect(
        tmp_path, [_vllm(40, 60, 300, 256) for _ in range(6)] + [_vllm(43, 10, 11742, 0)]
    )
    assert {f.kind for f in found} == {"request_acceptance"}


def test_the_streamed_report_shows_the_requests_as_the_whole_one(tmp_path, monkeypatch) -> None:
    """Over 20 captures the report groups its runs; past NEEDED_OVER_ROWS it reads only the
    rows its questions need and sums the rest a batch of sources at a time (fleet): its
    request findings and section are those of the report that holds every row."""
    import specscope.report.build as build

    paths = []
    for i in range(24):
        path = tmp_path / f"capture{i}.jsonl"
        lines = [_vllm(40, 60 + i, 300, 256) for _ in range(6)] + [_vllm(43, 10, 11742, 0)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    specscope.ingest(paths, store=tmp_path / "store", year=2026)
    store = specscope.open_store(tmp_path / "store")
    texts, findings, batched = [], [], []
    real = build.streamed
    monkeypatch.setattr(build, "streamed", lambda *a, **k: batched.append(1) or real(*a, **k))
    for over in (10**9, 0):
        monkeypatch.setattr(build, "NEEDED_OVER_ROWS", over)
        report = build.build_report(store, with_charts=False)
        assert report.grouped
        kinds = {"request_acceptance", "request_outlier"}
        findings.append([f for f in report.findings if f["kind"] in kinds])
        left = {e["kind"]: e["findings"] for e in report.findings_left}
        assert left == {"request_acceptance": 21}
        texts.append("\n".join(requests_markdown(report.findings)))
    assert batched == [1]  # the second report took the fleet's way
    assert findings[0] == findings[1] and len(findings[0]) == 3
    assert texts[0] == texts[1] and "## Acceptance request by request" in texts[0]


def test_vllm_histograms_give_a_capture_its_curve_per_position(tmp_path) -> None:
    """Each response's acceptance_histogram (steps by draft tokens accepted) gives its counts
    per position: 100 steps accepting none, 150 one, 250 two and none three is 400, 250 and
    0 accepted at positions 0-2 of 500 steps. Eight such responses are a run whose third
    position is dead, which the position detectors and advise see (k' = 2)."""
    from specscope.analysis.advise import advise

    def response(hist: list[int]) -> str:
        steps, accepted = sum(hist), sum(j * n for j, n in enumerate(hist))
        spec = {
            "acceptance_histogram": hist,
            "num_spec_steps": steps,
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": 3 * steps,
            "num_spec_tokens": 3,
        }
        return json.dumps({"metrics": {"speculative_decoding": spec}})

    found = _detect(tmp_path, [response([100, 150, 250, 0]) for _ in range(8)])
    store = specscope.open_store(tmp_path / "store")
    rows = store.spec_decode.collect()
    assert rows["accepted_per_pos"].to_list() == [[400, 250, 0]] * 8
    assert {"position_cliff", "k_too_large"} <= {f.kind for f in found}
    (a,) = advise(store)
    assert a.curve_from == "counts" and a.best_k == 2 and a.drafts == 4000
    # A histogram that is not the response's counts gives no positions, and says so.
    bad = json.loads(response([100, 150, 250, 0]))
    bad["metrics"]["speculative_decoding"]["num_accepted_draft_tokens"] = 649
    (tmp_path / "bad").mkdir()
    _detect(tmp_path / "bad", [json.dumps(bad)])
    (row,) = specscope.open_store(tmp_path / "bad" / "store").spec_decode.collect().to_dicts()
    assert row["accepted_per_pos"] is None and "not its counts" in row["problems"]


def test_trtllm_choices_are_requests_of_a_run_of_their_own(tmp_path) -> None:
    """TensorRT-LLM's per-request counts sit on each choice (aiperf#1433's: 30 of 60 over 20
    steps, histogram [8, 0, 6, 6]); five such responses and one that accepts 1 of 600 over
    200 steps are a tensorrt-llm run of requests, the last flagged near zero."""
    real = _sample("trtllm_request_spec_decode", 0)

    def response(choice: str) -> str:
        return json.dumps({"id": "cmpl", "choices": [json.loads(choice)]})

    low = json.loads(real)
    low["speculative_decoding"].update(
        total_accepted_draft_tokens=1,
        total_draft_tokens=600,
        num_spec_steps=200,
        acceptance_rate=1 / 600,
        acceptance_histogram=[199, 1, 0, 0],
    )
    found = _detect(tmp_path, [response(real)] * 5 + [response(json.dumps(low))])
    (outlier,) = _kinds(found, "request_outlier")
    assert outlier.measured["requests"] == [
        {"line": 6, "drafted": 600, "accepted": 1, "rate": 1 / 600}
    ]
    assert _kinds(found, "request_acceptance")
    store = specscope.open_store(tmp_path / "store")
    (run,) = store.runs.collect().to_dicts()
    assert run["server"] == "tensorrt-llm"
    rows = store.spec_decode.collect()
    assert rows["format"].unique().to_list() == ["trtllm_request_spec_decode"]
    assert rows["accepted_per_pos"].to_list() == [[12, 12, 6]] * 5 + [[1, 0, 0]]


OMLX_1097 = (  # jundot/omlx#1097 (description by s-n-t, 2026-05-06): the depth-1 build
    "2026-05-06 20:12:45,019 - omlx.patches.mlx_lm_mtp.batch_generator - INFO - MTP[1] "
    "finish=length tokens=128 cycles=68 accept=58/68 (85.3%) emits[init=2,draft=58,bonus=58,"
    "verify=10] timing[backbone=1305.3ms mtp=324.7ms sample=6296.6ms cache=17.4ms]"
)


def test_omlx_mtp_summaries_are_requests_of_the_mtp_run(tmp_path) -> None:
    # Real oMLX request summaries (parsers/omlx_mtp_summary.toml's samples: omlx#1496's two,
    # #3704's depth-k request, #1337's) and #1097's twice: six requests of one MTP run, the
    # least accepted omlx#1496's 111 of 175 with its output tokens.
    lines = [_sample("omlx_mtp_summary", 0), _sample("omlx_mtp_summary", 1)]
    lines += [_sample("omlx_mtp_summary", 3).strip("`\n"), OMLX_1097, OMLX_1097]
    found = _detect(tmp_path, lines, name="server.log")
    (dist,) = _kinds(found, "request_acceptance")
    assert dist.measured["requests"] == 6
    assert dist.measured["lowest"][0] == {
        "line": 2,
        "drafted": 175,
        "accepted": 111,
        "rate": 111 / 175,
        "output_tokens": 287,
    }
    assert not _kinds(found, "request_outlier")
