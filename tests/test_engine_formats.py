"""Other engines' telemetry on the one definition (issue 21): LMDeploy's stats line (vLLM's
SpecDecoding fields in LMDeploy's run), llama.cpp's per-response ``timings`` and
TensorRT-LLM's iteration ``specDecodingStats``, each a record of its own counts, and what
``triage`` says of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specscope.logs.parser import parse_text
from specscope.store.reading import Store

LMDEPLOY = (
    "[2026-03-02 10:15:41 DP0] Avg prompt throughput: 1532.4 tokens/s, Avg generation "
    "throughput: 412.7 tokens/s, Finished: 12 reqs, Unfinished: 4 reqs, Running: 4 reqs, "
    "Waiting: 0 reqs, GPU KV cache usage: 23.5%, Prefix cache hit rate: 0.0%, SpecDecoding "
    "metrics: Draft acceptance rate: 45.24%, Mean acceptance length: 2.36, Accepted: 1360 "
    "tokens, Drafted: 3006 tokens, Per-position acceptance rate: 0.610, 0.452, 0.295"
)
VLLM_0_9 = (
    "INFO 06-01 10:00:00 [metrics.py:82] SpecDecoding metrics: Draft acceptance rate: 45.2%, "
    "Mean acceptance length: 2.36, Accepted: 1360 tokens, Drafted: 3006 tokens, "
    "Per-position acceptance rate: 0.610, 0.452, 0.295"
)


def _iteration(i: int, drafted: int, accepted: int, requests: int) -> dict[str, object]:
    spec = {
        "numDraftTokens": drafted,
        "numAcceptedTokens": accepted,
        "numRequestsWithDraftTokens": requests,
        "acceptanceLength": 1 + accepted / requests if requests else 0.0,
        "iterLatencyMS": 3.1,
        "draftOverhead": 0.21,
    }
    return {"iter": i, "iterLatencyMS": 14.7, "specDecodingStats": spec}


def test_lmdeploys_line_is_lmdeploys_run() -> None:
    got = parse_text(LMDEPLOY)
    ((spec,), (stats,)) = got.tables["spec_decode"], got.tables["engine_stats"]
    assert (spec["drafts"], spec["draft_tokens"], spec["accepted_tokens"]) == (1002, 3006, 1360)
    assert spec["k"] == 3 and stats["format"] == "lmdeploy_stats"
    assert [r.config.get("server") for r in got.runs] == ["lmdeploy"]


def test_vllms_own_line_stays_vllms() -> None:
    got = parse_text(VLLM_0_9)
    assert got.tables["spec_decode"][0]["accepted_tokens"] == 1360
    assert [r.config.get("server") for r in got.runs] == ["vllm"]


def test_trtllm_iterations_are_records_of_their_batch() -> None:
    iterations = [_iteration(1, 24, 13, 8), _iteration(2, 12, 2, 4)]
    for text in (json.dumps(iterations), "\n".join(json.dumps(i) for i in iterations)):
        got = parse_text(text)
        rows = got.tables["spec_decode"]
        assert [(r["drafts"], r["draft_tokens"], r["accepted_tokens"]) for r in rows] == [
            (8, 24, 13),
            (4, 12, 2),
        ]
        assert rows[0]["acceptance_rate"] == pytest.approx(13 / 24)
        assert {r.config.get("server") for r in got.runs if r.counts} == {"tensorrt-llm"}


def test_llamacpp_timings_hold_no_made_up_drafts() -> None:
    responses = [
        {"choices": [], "timings": {"predicted_n": 200, "draft_n": 347, "draft_n_accepted": 65}},
        {"choices": [], "timings": {"predicted_n": 120, "draft_n": 100, "draft_n_accepted": 80}},
    ]
    got = parse_text("\n".join(json.dumps(r) for r in responses))
    rows = got.tables["spec_decode"]
    assert [(r["draft_tokens"], r["accepted_tokens"]) for r in rows] == [(347, 65), (100, 80)]
    assert all(r.get("drafts") is None for r in rows)  # verify steps are not given


def test_zero_acceptance_in_trtllm_iterations(cli, tmp_path: Path) -> None:
    log = tmp_path / "iterations.jsonl"
    log.write_text(
        "\n".join(json.dumps(_iteration(i, 24, 0, 8)) for i in range(30)) + "\n",
        encoding="utf-8",
    )
    r = cli("triage", log, "--json", "--store", tmp_path / "s")
    findings = json.loads(r.out)["findings"]
    assert [f["kind"] for f in findings] == ["zero_acceptance"]
    assert findings[0]["sample"]["drafts"] == 240
    assert findings[0]["confidence"]["level"] == "certain"
    (run,) = Store(tmp_path / "s").runs.collect().to_dicts()
    assert run["server"] == "tensorrt-llm"


def test_healthy_llamacpp_responses_fire_nothing(cli, tmp_path: Path) -> None:
    log = tmp_path / "responses.jsonl"
    one = {"timings": {"predicted_n": 300, "draft_n": 300, "draft_n_accepted": 240}}
    log.write_text("\n".join(json.dumps(one) for _ in range(20)) + "\n", encoding="utf-8")
    r = cli("triage", log, "--json")
    kinds = {f["kind"] for f in json.loads(r.out)["findings"]}
    assert not kinds & {"zero_acceptance", "low_acceptance"}


def test_formats_lists_each_engines_formats_and_metrics(cli) -> None:
    r = cli("formats")
    assert r.status == 0, r.err
    sections = {}
    for line in r.out.splitlines():
        if not line.startswith(" "):
            sections[line.rstrip(":")] = []
        else:
            sections[list(sections)[-1]].append(line.strip())
    assert {"vllm", "sglang", "llama.cpp", "tensorrt-llm", "lmdeploy"} <= set(sections)
    assert any(s.startswith("trtllm_iteration_stats ") for s in sections["tensorrt-llm"])
    assert any(s.startswith("lmdeploy_stats ") for s in sections["lmdeploy"])
    metrics = [s for s in sections["sglang"] if s.startswith("/metrics")]
    assert metrics and "sglang:spec_verify_calls" in metrics[0]


def test_compare_states_two_engines_on_one_definition(cli, tmp_path: Path) -> None:
    engines = Path(__file__).parent.parent / "fixtures" / "engines"
    store = tmp_path / "s"
    for paste in ("vllm_metrics_two_pastes.md", "llamacpp_metrics_mtp.txt"):
        assert cli("ingest", engines / paste, "--store", store).status == 0
    runs = {r["server"]: r["run_id"] for r in Store(store).runs.collect().to_dicts()}
    r = cli("compare", runs["vllm"], runs["llama.cpp"], "--store", store, "--json")
    assert r.status == 0, r.err
    got = json.loads(r.out)
    assert {"field": "server", "a": "vllm", "b": "llama.cpp"} in got["config"]
    rate = next(m for m in got["measures"] if m["name"] == "acceptance_rate")
    assert rate["b"] == pytest.approx(4367 / 4973)


@pytest.mark.parametrize(
    ("drafted", "accepted", "low"),
    [(347, 65, False), (5000, 300, True)],
    ids=["low-only-at-the-k-assumed", "low-at-any-k"],
)
def test_responses_without_verify_steps_are_low_only_at_any_k(
    cli, tmp_path: Path, drafted: int, accepted: int, low: bool
) -> None:
    # llama.cpp#12603's response: 65 of 347 drafted, no verify steps. At the k assumed (3)
    # that is about half of a learned drafter's gain; at 16 tokens a step (the PR's
    # --draft-max) it is not low. 300 of 5,000 is low whatever k was.
    log = tmp_path / "response.json"
    timings = {"predicted_n": 200, "draft_n": drafted, "draft_n_accepted": accepted}
    log.write_text(json.dumps({"timings": timings}) + "\n", encoding="utf-8")
    r = cli("triage", log, "--json")
    kinds = {f["kind"] for f in json.loads(r.out)["findings"]}
    assert ("low_acceptance" in kinds) is low
    assert "zero_acceptance" not in kinds
