"""One-line summaries that clients, benchmarks and other engines print (issue 16): SGLang's
speculative benchmark line, SpecForge's results, xinfer's MTP stats, colibri's speculation
line, Rapid-MLX's counters and an author's `Accpt Len`. The samples in their definitions
check the values; here are the rules around them: what the bulk reader sees between lines
it reads itself, totals that become deltas, what is never a record, and never-invented
counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_text
from tests.test_bulk import _same

GRAMMAR = Grammar(load_definitions())
SUMMARIES = [
    "#questions: 80, Throughput: 378.57 token/s, Acceptance length: 5.39",
    "vllm-rs-svc0  | 2026-07-21T20:37:35.883435Z  INFO xinfer::core::mtp: MTP Stats: "
    "proposed=1536, accepted=658, acceptance_rate=42.84%, avg_tokens/step=2.86",
    "speculation: 2.46 tokens/forward (26 forwards per 64 tokens) | MTP acceptance 49% (38/78)",
    "- Prometheus after the MTP runs: `spec_decode_attempts_total=1304`, `accepts_total=1111`",
    "* k=2: [01:34<00:00,  1.18s/it, output: 175.49 toks/s] **Accpt Len: 1.89**",
]
FORMATS = {
    "sglang_bench_speculative",
    "xinfer_mtp_stats",
    "colibri_speculation",
    "rapidmlx_counters_quoted",
    "author_accept_len_bold",
}


def _spec(text: str) -> list[dict]:
    return parse_text(text, GRAMMAR).tables.get("spec_decode", [])


@pytest.mark.parametrize("block_bytes", [600, 1 << 24])
def test_bulk_reader_reads_the_summaries_as_the_line_parser(
    tmp_path: Path, block_bytes: int
) -> None:
    """Between vLLM lines the bulk reader takes itself, the summaries give the same tables
    both ways, also in blocks cut anywhere."""
    head = "(APIServer pid=7) INFO 04-07 17:{:02d}:00 [metrics.py:101] "
    spec = (
        "SpecDecoding metrics: Mean acceptance length: 1.75, Accepted throughput: 7.50 "
        "tokens/s, Drafted throughput: 20.00 tokens/s, Accepted: 75 tokens, Drafted: 200 "
        "tokens, Per-position acceptance rate: 0.500, 0.250, Avg Draft acceptance rate: 37.5%"
    )
    lines = []
    for i in range(30):
        lines.append(head.format(i) + spec)
        if i % 6 == 2:
            lines += ["```", SUMMARIES[(i // 6) % len(SUMMARIES)], "```"]
    lines += ["Average Output throughput: 41.960 token/s", "Average Accept length: 1.037"]
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fast = _same(path, block_bytes)
    formats = set(fast["tables"]["spec_decode"]["format"].to_list())
    assert FORMATS | {"specforge_bench_results", "vllm_v1_spec_decode"} <= formats
    assert fast["bulk_rows"] > 0


def test_printed_means_get_no_counts() -> None:
    """A mean acceptance length alone is kept as printed: partial, with no drafts, tokens
    or k made up from it."""
    text = "\n".join([SUMMARIES[0], SUMMARIES[4], "Average Accept length: 1.037"])
    rows = _spec(text)
    assert [r["mean_acceptance_length"] for r in rows] == [5.39, 1.89, 1.037]
    for row in rows:
        assert row["partial"] is True
        assert all(row.get(c) is None for c in ("drafts", "draft_tokens", "accepted_tokens", "k"))


def test_totals_since_the_start_become_deltas() -> None:
    """xinfer's and Rapid-MLX's counts are totals since the server started: a second line
    is the change; a total that drops is a restart, kept as its new totals."""
    xinfer = "INFO xinfer::core::mtp: MTP Stats: proposed={}, accepted={}, acceptance_rate=1%"
    rows = _spec("\n".join(xinfer.format(p, a) for p, a in [(100, 60), (300, 150), (50, 10)]))
    assert [(r["draft_tokens"], r["accepted_tokens"], r["counts"]) for r in rows] == [
        (100, 60, "since_engine_start"),
        (200, 90, "delta"),
        (50, 10, "since_restart"),
    ]
    quoted = "`spec_decode_attempts_total={}`, `accepts_total={}`"
    rows = _spec("\n".join(quoted.format(p, a) for p, a in [(1304, 1111), (2000, 1700)]))
    assert [(r["draft_tokens"], r["accepted_tokens"]) for r in rows] == [(1304, 1111), (696, 589)]


def test_colibri_lines_are_the_drafters_run_and_drafting_off_is_no_record() -> None:
    line = "speculation: {} tokens/forward ({} forwards per 96 tokens) | MTP acceptance 0% ({}/{})"
    result = parse_text(
        "\n".join(
            [
                line.format("2.53", 38, 58, 114),
                line.format("1.00", 96, 0, 0),  # drafting off: nothing to judge
                line.format("1.01", 95, 0, 24),
            ]
        ),
        GRAMMAR,
    )
    rows = result.tables["spec_decode"]
    assert [(r["accepted_tokens"], r["draft_tokens"]) for r in rows] == [(58, 114), (0, 24)]
    assert all(r.get("drafts") is None for r in rows)  # forwards are not verify steps
    (run,) = [r for r in result.runs if r.ordinal == rows[0]["_run"]]
    assert run.config["spec_method"] == "mtp" and run.config["server"] == "colibri"


@pytest.mark.parametrize(
    "prose",
    [
        "We got #questions: 80 and an Acceptance length that is too low.",
        "The MTP Stats: proposed=1536 line is missing its accepted count.",
        "speculation: 2.46 tokens/forward on this box, MTP acceptance about half",
        "Today /metrics exposes only spec_decode_attempts_total and accepts_total.",
        "SGLang prints accept len: 2.73 there; our Acc Len is higher.",
        "The Average Accept length: 1.037 is what we saw.",
    ],
)
def test_prose_that_names_the_values_is_no_record(prose: str) -> None:
    result = parse_text(prose, GRAMMAR)
    assert not [r for r in result.tables.get("spec_decode", []) if r["format"] in FORMATS]
    assert not result.tables.get("bench")
