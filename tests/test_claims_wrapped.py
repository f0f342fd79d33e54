"""A sentence wrapped at a terminal's or markdown's width (issue 16): the claim reader joins the
lines of one paragraph where a line ends mid-sentence and the next goes on it, reads the
claim across the break at its first line, and joins no table row, code, item or log record;
a line's own claim is read as before, whatever the next line holds."""

from __future__ import annotations

import json

import pytest

from specscope.logs.parser import parse_text

# fixtures/claims Crow#182/1 and colibri#8/3, as their threads wrap them.
CROW = (
    "`draft_n` absent again in all six runs — **zero draft tokens**. The arm is 3 %\n"
    "*slower*: the flag costs something and produces nothing.\n"
)
COLIBRI = (
    "The int4 MTP head is too lossy to predict accurately: drafts almost always miss, so\n"
    "speculation never engages.\n"
)
# A vLLM interval (world case 06) under a line of prose that ends mid-sentence.
RECORD = (
    "(APIServer pid=95669) INFO 07-20 18:11:49 [metrics.py:101] SpecDecoding metrics: Mean "
    "acceptance length: 2.87, Accepted throughput: 9.40 tokens/s, Drafted throughput: 15.10 "
    "tokens/s, Accepted: 282 tokens, Drafted: 453 tokens, Per-position acceptance rate: "
    "0.821, 0.609, 0.437, Avg Draft acceptance rate: 62.3%\n"
)


def _claims(text: str) -> list[tuple[str, int, dict]]:
    tables = parse_text(text).tables
    return [
        (table, row["line"], json.loads(row["extra"]))
        for table in ("bench", "spec_decode")
        for row in tables.get(table, [])
        if str(row.get("format", "")).startswith("stated_claims")
    ]


def test_a_claim_across_a_break_is_read_at_its_first_line() -> None:
    ((table, line, said),) = _claims(CROW)
    assert (table, line) == ("bench", 1)
    assert said == {"stated": "The arm is 3 % slower", "claim": "slower", "speedup": 0.97}
    ((table, line, said),) = _claims(COLIBRI)
    assert (table, line, said["claim"]) == ("spec_decode", 1, "low")


def test_a_break_after_a_full_stop_or_before_a_capital_is_no_wrap() -> None:
    assert _claims("The arm with MTP on is 3 %.\n*slower* runs were dropped.\n") == []
    # (a capital opens a sentence as often as it goes on one)
    assert _claims("The throughput with MTP on my 4090\nDropped compared to the baseline.\n") == []


def test_a_log_record_a_table_row_or_code_is_never_joined() -> None:
    prose = "With the draft model on my 4090 the decode throughput\n"
    assert _claims(prose + RECORD) == []
    assert _claims(prose + "| dropped | compared to the baseline without it |\n") == []
    fenced = "```\n" + prose + "dropped compared to the baseline without it\n```\n"
    assert _claims(fenced) == []


def test_a_lines_own_claim_survives_what_the_next_line_says() -> None:
    # world 223's shape: a rate against the base, then a hedge in small letters
    text = (
        "i'm getting about 16 t/s with the draft, knowing that base is 22.5 t/s\n"
        "my guess is that model and draft aren't vibing together\n"
    )
    ((table, line, said),) = _claims(text)
    assert (table, line, said["baseline"]) == ("bench", 1, 22.5)


# A record behind `docker logs -t` stamps, wrapped at the field, each part behind its own stamp
# (bench/generate.py --prefix docker): 768 such rests in 100 MB (bench/README.md, issue 17).
STAMP = "2026-11-24T10:01:21.000081887Z "
HEAD = (
    STAMP + "(APIServer pid=1001) INFO 10-28 15:31:09 [metrics.py:96] SpecDecoding metrics: "
    "Mean acceptance length: 1.00, Accepted th\n"
)
REST = (
    STAMP + "roughput: 0.00 tokens/s, Drafted throughput: 5117.04 tokens/s, Accepted: 0 tokens, "
    "Drafted: 50869 tokens, Per-position acceptance rate: 0.000, 0.000, Avg Draft acceptance "
    "rate: 0.0%\n"
)


def test_the_rest_of_a_servers_record_is_not_read_as_prose(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from specscope.logs import claims

    read: list[str] = []
    original = claims.read_claims

    def counted(lex, text, *args, **kwargs):  # type: ignore[no-untyped-def]
        read.append(text)
        return original(lex, text, *args, **kwargs)

    monkeypatch.setattr(claims, "read_claims", counted)
    tables = parse_text(HEAD + REST).tables
    ((row,),) = [tables["spec_decode"]]
    assert (row["end_line"], row["accepted_tokens"], row["draft_tokens"]) == (2, 0, 50869)
    assert read == []
    # An author's sentence after a record cut short is no rest of it: it is read.
    said = "with the draft on it is 3 % slower than without it\n"
    parse_text(HEAD + said)
    assert read == [said.strip()]
    ((_, line, claim),) = _claims(HEAD + said)
    assert (line, claim["claim"]) == (2, "slower")


# World 230 (SafeAILab/EAGLE #298) as an author who wraps at 80 pastes it: the break falls
# before a name in capitals, the next word too long for the line.
PARALLEL = (
    "I found that eagle slows down extremely compared to the baseline if  the\n"
    "NUM_PARALLEL is larger than one\n"
    "Is it normal?\n"
)
CHAT = "We serve Qwen3 with an EAGLE3 drafter on two H100 GPUs for our chat traffic.\n\n"


def test_a_capital_after_a_full_line_goes_on_its_sentence() -> None:
    ((table, line, said),) = _claims(PARALLEL)
    assert (table, line, said["claim"]) == ("bench", 1, "slower")
    assert said["condition"] == "if the NUM_PARALLEL is larger than one"
    # After a paragraph 76 wide: a capital that would have fit on the line
    # before opens a sentence (the author ended the line), one that would not goes on it.
    rest = "Lower than the baseline without it.\n"
    fit = "With the draft model on my 4090 GPU the decode throughput was\n"
    assert _claims(CHAT + fit + rest) == []
    full = "With the draft model on my 4090 GPU the decode throughput over the run was\n"
    ((_, line, said),) = _claims(CHAT + full + rest)
    assert (line, said["claim"]) == (3, "slower")


# World 189's paragraph wrapped at 80, and behind the envelopes a paste puts it in.
PARAGRAPH = (
    "In a high-concurrency scenario (max-concurrency > 20) using suffix decoding, we\n"
    "observed a degradation in performance. The output token throughput in the vLLM\n"
    "benchmark_serving was lower compared to when speculative decoding was not\n"
    "enabled.\n"
)
ENVELOPES = {
    "plain": "{}",
    "quote": "> {}",
    "compose": "vllm-1  | {}",
    "kubectl": "[pod/vllm-0/vllm] {}",
    "docker": "2026-11-24T10:01:21.000081887Z {}",
    "ansi": "\x1b[32m{}\x1b[0m",
}


@pytest.mark.parametrize("envelope", ENVELOPES)
def test_a_file_is_read_as_the_line_parser_reads_its_paste(tmp_path, envelope) -> None:  # type: ignore[no-untyped-def]
    """The bulk reader of a file passes over lines of no literal: a wrapped sentence's first
    line and its rest are fed all the same, behind any envelope."""
    import specscope

    text = "".join(ENVELOPES[envelope].format(s) + "\n" for s in PARAGRAPH.splitlines())
    ((_, line, said),) = _claims(PARAGRAPH)
    assert _claims(text) == [("bench", line, said)]
    path = tmp_path / "paste.log"
    path.write_text(text)
    specscope.ingest([path], store=tmp_path / "store", year=2026)
    (row,) = specscope.open_store(tmp_path / "store").table("bench").collect().to_dicts()
    assert (row["line"], json.loads(row["extra"])) == (line, said)


def test_a_wrapped_paragraph_holds_one_record_a_table_as_its_line_does() -> None:
    """World 189 wrapped at 120: the claim reader's sentence on line 1 and the numbered
    reader's (stated_speedup) on line 2, a break after a full stop between; unwrapped, the
    one line keeps one bench record, and so does the paragraph."""
    text = (
        "In a high-concurrency scenario (max-concurrency > 20) using suffix decoding, we "
        "observed a degradation in performance.\n"
        "The output token throughput in the vLLM benchmark_serving was lower compared to when "
        "speculative decoding was not\nenabled.\n"
    )
    ((row,),) = [parse_text(text).tables["bench"]]
    assert (row["line"], row["format"]) == (2, "stated_speedup")
    assert [r["format"] for r in parse_text(text.replace("\n", " ", 1)).tables["bench"]] == [
        "stated_speedup"
    ]


def test_a_line_whose_claim_lacks_its_subject_is_read_with_its_paragraph() -> None:
    """World 253's shape: the slowdown on the second line, speculation named on the first;
    the line alone gives a claim with no subject, which is let go, so the paragraph is read."""
    text = (
        "I am testing EAGLE3 heads for Llama 3.3 70B with max_position_embeddings=2048 on\n"
        "8 GPUs. I observed that when input is > 2k, the performance is worse than the "
        "baseline.\n"
    )
    ((table, line, said),) = _claims(text)
    assert (table, line, said["claim"]) == ("bench", 1, "slower")
    assert _claims(text.replace("EAGLE3 heads", "the model")) == []
