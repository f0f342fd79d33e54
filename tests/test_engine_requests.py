"""Other engines' per-request lines and pasted documents (issue 21): SGLang's request log
(``Finish: obj=..., out=...``, a Python repr), JSON documents pretty-printed over lines in
a paste (a ```json fence, a quote), and iterations or intervals that drafted nothing."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from specscope.logs.ingest import ingest
from specscope.logs.parser import parse_text
from specscope.store.reading import Store

REQUEST = (
    "Finish: obj=GenerateReqInput(rid='{rid}', stream=False, text='a, b), out={{x'), "
    "out={{'meta_info': {{'id': '{rid}', 'finish_reason': {{'type': 'length', 'length': 200}}, "
    "'prompt_tokens': 171, 'completion_tokens': {completion}, 'cached_tokens': 0, {spec}"
    "'e2e_latency': 1.75}}}}"
)


def _finish(rid: str, completion: int, spec: str) -> str:
    return "[2025-11-26 10:00:00] " + REQUEST.format(rid=rid, completion=completion, spec=spec)


def _decode(accept_len: float) -> str:
    return (
        "[2025-11-26 10:00:01 TP0] Decode batch, #running-req: 2, #token: 4000, "
        f"token usage: 0.05, accept len: {accept_len:.2f}, accept rate: 0.40, cuda graph: True, "
        "gen throughput (token/s): 120.00, #queue-req: 0"
    )


def _rows(text: str) -> list[dict]:
    return parse_text(text).tables.get("spec_decode", [])


def test_finish_lines_are_requests_beside_the_decode_lines() -> None:
    text = "\n".join(
        [
            _decode(2.10),
            _finish(
                "a",
                200,
                "'spec_verify_ct': 188, 'spec_accept_token_num': 11, "
                "'spec_draft_token_num': 940, 'spec_accept_length': 1.0638, ",
            ),
            _decode(1.30),
            _finish(
                "b",
                106,
                "'spec_num_correct_drafts': 63, 'spec_num_proposed_drafts': 215, "
                "'spec_verify_ct': 43, 'spec_accepted_drafts': 63, 'spec_proposed_drafts': 215, ",
            ),
            _finish(
                "c",
                50,
                "'spec_verify_ct': 20, 'spec_accepted_drafts': 29, 'spec_proposed_drafts': 60, ",
            ),
        ]
    )
    result = parse_text(text)
    assert not result.skipped
    rows = result.tables["spec_decode"]
    requests = [r for r in rows if r["format"] == "sglang_request_finish"]
    decode = [r for r in rows if r["format"] != "sglang_request_finish"]
    got = [(r["line"], r["drafts"], r["draft_tokens"], r["accepted_tokens"]) for r in requests]
    assert got == [(2, 188, 940, 11), (4, 43, 215, 63), (5, 20, 60, 29)]
    assert [r["mean_acceptance_length"] for r in decode] == [2.10, 1.30]
    # Per-request counts are a run of their own, never added to the decode lines' run.
    assert {r["_run"] for r in requests}.isdisjoint({r["_run"] for r in decode})
    assert len({r["_run"] for r in requests}) == 1


def test_finish_lines_that_say_nothing_of_acceptance() -> None:
    text = "\n".join(
        [
            # A server that does not speculate: no record and nothing skipped.
            _finish("a", 128, ""),
            # Verify steps without an accepted count (older releases): no false zero.
            _finish("b", 128, "'spec_verify_ct': 30, "),
            # The request part alone (the line cut before its response).
            "[2025-11-26 10:00:02] Finish: obj=GenerateReqInput(rid='c', stream=True, log_m",
        ]
    )
    result = parse_text(text)
    assert result.tables.get("spec_decode", []) == []
    assert [(s.line, s.reason) for s in result.skipped] == [
        (2, "SGLang request log 'Finish: obj=..., out=...' line without 'spec_num_correct_drafts'")
    ]


def test_a_finish_line_cut_inside_its_response_keeps_what_is_whole() -> None:
    line = _finish(
        "a",
        200,
        "'spec_verify_ct': 188, 'spec_accept_token_num': 11, 'spec_draft_token_num': 940, ",
    )
    cut = line[: line.index("940") + 2]  # "... 'spec_draft_token_num': 94"
    (row,) = _rows(cut)
    assert (row["drafts"], row["accepted_tokens"], row.get("draft_tokens")) == (188, 11, None)
    assert row["partial"] is True


def test_a_finish_line_with_values_no_literal_holds() -> None:
    # nan and an object's repr make literal_eval refuse the dict: it is read item by item.
    (row,) = _rows(
        _finish(
            "a",
            200,
            "'spec_accept_rate': nan, 'weights': Version(v=2), 'spec_verify_ct': 188, "
            "'spec_accept_token_num': 11, 'spec_draft_token_num': 940, ",
        )
    )
    assert (row["drafts"], row["draft_tokens"], row["accepted_tokens"]) == (188, 940, 11)
    assert row.get("reported_rate") is None


def test_the_json_request_log_is_read_as_the_response() -> None:
    line = (
        '{"timestamp": "2026-08-07T10:12:03.123456", "event": "request.finished", "rid": "ab", '
        '"obj": {"rid": "ab", "stream": false}, "out": {"meta_info": {"id": "ab", '
        '"completion_tokens": 106, "spec_accept_length": 2.4651162790697674, '
        '"spec_num_correct_drafts": 63, "spec_num_proposed_drafts": 215, "spec_verify_ct": 43}}}'
    )
    (row,) = _rows(line)
    assert row["format"] == "sglang_request_meta_info"
    assert (row["drafts"], row["draft_tokens"], row["accepted_tokens"]) == (43, 215, 63)


PASTE = """The request's details:

```json
{"spec_accept_rate": 0.2930232558139535, "spec_accept_length": 2.4651162790697674,
 "spec_num_correct_drafts": 63, "spec_num_proposed_drafts": 215,
 "spec_verify_ct": 43, "spec_correct_drafts_histogram": [11, 14, 11, 4, 0, 3]}
```

and the iterations, as `/metrics` gave them, one a line:

```
[
{"iter": 7, "specDecodingStats": {"numDraftTokens": 24, "numAcceptedTokens": 13,  "numRequests\
WithDraftTokens": 8}},
{"iter": 8, "specDecodingStats": {"numDraftTokens": 12, "numAcceptedTokens": 3, "numRequests\
WithDraftTokens": 4}}
]
```

{
  "predicted_n": 200,

  "draft_n": 347,
  "draft_n_accepted": 65
}

A brace { in prose, a fence closed inside a document, and a log line after an open one:
```json
{"spec_verify_ct": 9,
 "spec_num_correct_drafts": 1,
```
{"spec_verify_ct": 9, "spec_num_correct_drafts": 1,
INFO 11-26 10:00:00 a log line, not more of it
 "spec_num_proposed_drafts": 27}
"""


def test_documents_pretty_printed_in_a_paste() -> None:
    result = parse_text(PASTE)
    assert not result.skipped
    got = [
        tuple(r.get(k) for k in ("format", "line", "end_line", "drafts", "draft_tokens"))
        for r in result.tables["spec_decode"]
    ]
    assert got == [
        ("sglang_request_meta_info", 4, 6, 43, 215),
        ("trtllm_iteration_stats", 13, 13, 8, 24),
        ("trtllm_iteration_stats", 14, 14, 4, 12),
        ("llamacpp_response_timings", 18, 23, None, 347),
    ]
    assert [r["accepted_tokens"] for r in result.tables["spec_decode"]] == [63, 13, 3, 65]


def test_bulk_and_line_reading_agree_on_pasted_documents(tmp_path: Path) -> None:
    log = tmp_path / "issue.md"
    server = "\n".join(
        f"(APIServer pid=7) INFO 11-26 10:00:{s:02d} [metrics.py:101] SpecDecoding metrics: "
        f"Mean acceptance length: 2.00, Accepted throughput: 1.00 tokens/s, Drafted throughput: "
        f"2.00 tokens/s, Accepted: {10 + s} tokens, Drafted: {20 + 2 * s} tokens, "
        "Per-position acceptance rate: 0.600, 0.400, Avg Draft acceptance rate: 50.0%"
        for s in range(0, 50, 10)
    )
    log.write_text(server + "\n" + PASTE + server + "\n", encoding="utf-8")

    def spec(bulk: bool) -> pl.DataFrame:
        store = tmp_path / f"store-{bulk}"
        ingest(str(log), store=store, bulk=bulk).raise_for_errors()
        return Store(store).spec_decode.collect().sort("line", "drafts")

    fast, slow = spec(True), spec(False)
    assert fast.drop("run_id", "source_id").equals(slow.drop("run_id", "source_id"))
    assert len(fast) == 10 + 4


# The same documents as people paste them in replies and lists: llama.cpp#12603's `jq
# .timings` quoted in a reply, sglang#33518's request (63 of 215 proposed drafts) in a
# fence inside a list item, TensorRT-LLM's iterations as `jq` prints /metrics' array (the
# fields of the executor's IterationStats); and what opens nothing: a SGLang log line's
# '[date]', an indented C block, a quote that ends before its document does.
OPENED = """> I get this from the server:
>
> ```json
> {
>   "prompt_n": 1,
>   "predicted_n": 200,
>   "predicted_ms": 11082.606,
>   "draft_n": 347,
>   "draft_n_accepted": 65
> }
> ```

1. the request:
   ```json
   {"meta_info": {"spec_verify_ct": 43, "spec_num_correct_drafts": 63,
     "spec_num_proposed_drafts": 215, "completion_tokens": 106}}
   ```
2. the iterations:
```
[
  {
    "iter": 7,
    "specDecodingStats": {
      "numDraftTokens": 24,
      "numAcceptedTokens": 13,
      "numRequestsWithDraftTokens": 8
    }
  },
  {
    "iter": 8,
    "specDecodingStats": {"numDraftTokens": 12, "numAcceptedTokens": 3,
      "numRequestsWithDraftTokens": 4}
  }
]
```
[2026-08-07 10:12:03 TP0] Prefill batch. #new-seq: 1, #new-token: 27
    {
      int draft_n = 347;
    }
> {
>   "draft_n": 9,
the quote ended here, "draft_n_accepted": 1}
   > {"draft_n": 40, "draft_n_accepted": 30}
"""


def test_documents_indented_quoted_or_opened_by_a_bracket() -> None:
    result = parse_text(OPENED)
    assert not result.skipped
    got = [
        tuple(r.get(k) for k in ("format", "line", "end_line", "draft_tokens", "accepted_tokens"))
        for r in result.tables["spec_decode"]
    ]
    assert got == [
        ("llamacpp_response_timings", 4, 10, 347, 65),
        ("sglang_request_meta_info", 15, 16, 215, 63),
        ("trtllm_iteration_stats", 20, 34, 24, 13),
        ("trtllm_iteration_stats", 20, 34, 12, 3),
        ("llamacpp_response_timings", 43, 43, 40, 30),
    ]


def test_bulk_and_line_reading_agree_on_opened_documents(tmp_path: Path) -> None:
    log = tmp_path / "issue.md"
    server = "\n".join(
        f"(APIServer pid=7) INFO 11-26 10:00:{s:02d} [metrics.py:101] SpecDecoding metrics: "
        f"Mean acceptance length: 2.00, Accepted throughput: 1.00 tokens/s, Drafted throughput: "
        f"2.00 tokens/s, Accepted: {10 + s} tokens, Drafted: {20 + 2 * s} tokens, "
        "Per-position acceptance rate: 0.600, 0.400, Avg Draft acceptance rate: 50.0%"
        for s in range(0, 50, 10)
    )
    log.write_text(server + "\n" + OPENED + server + "\n", encoding="utf-8")

    def spec(bulk: bool, core: str) -> pl.DataFrame:
        store = tmp_path / f"store-{bulk}-{core}"
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SPECSCOPE_CORE", core)
            result = ingest(str(log), store=store, bulk=bulk)
        result.raise_for_errors()
        return Store(store).spec_decode.collect().sort("line", "drafts", "draft_tokens")

    slow = spec(False, "1").drop("run_id", "source_id")
    for core in ("1", "0"):  # the compiled scanner, then polars
        fast = spec(True, core).drop("run_id", "source_id")
        assert fast.equals(slow), core
    assert len(slow) == 10 + 5


def test_nothing_drafted_is_stored_alike_in_every_engine() -> None:
    """An iteration (TensorRT-LLM) or an interval (vLLM) that drafted nothing is kept as
    what the engine printed: a row of zero counts with no rate and no length, which no
    sum, rate or verdict reads as 0% acceptance."""
    trt = _rows(
        '{"iter": 1, "specDecodingStats": {"numDraftTokens": 0, "numAcceptedTokens": 0, '
        '"numRequestsWithDraftTokens": 0, "acceptanceLength": 0, "draftOverhead": 0}}'
    )
    vllm = _rows(
        "(APIServer pid=1) INFO 05-01 14:24:50 [metrics.py:101] SpecDecoding metrics: "
        "Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted throughput: "
        "0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, Per-position acceptance rate: "
        "0.000, 0.000, Avg Draft acceptance rate: nan%"
    )
    keys = ("drafts", "draft_tokens", "accepted_tokens", "acceptance_rate")
    assert [tuple(r.get(k) for k in keys) for r in trt] == [(0, 0, 0, None)]
    assert [tuple(r.get(k) for k in keys) for r in vllm] == [(0, 0, 0, None)]
    assert trt[0].get("mean_acceptance_length") is None


def test_pasted_counters_without_a_denominator_are_nothing_to_judge() -> None:
    """Accepted tokens pasted without drafts or drafted tokens (a paste cut after its first
    position) have no rate; a row would make k the positions that happen to be there."""
    result = parse_text(
        'vllm:spec_decode_num_accepted_tokens_created{engine="0",model_name="m"} 1756736798.73\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",'
        'position="0"} 7\n'
    )
    assert result.tables.get("spec_decode", []) == []
    assert [s.line for s in result.skipped] == [2]
    assert "not what was drafted" in result.skipped[0].reason
