"""A tiny paste of zero acceptance, in every shape people paste it (issue 16).

A user quotes one to three lines of what their engine printed: a whole record, the part of
it that alarmed them, a counter or two from /metrics, one JSON key. The held-out threads
had five such pastes specscope did not call zero acceptance, each a known engine shape
carried by what the paste went through: a container runtime's prefix, a terminal's colours
or its wrapping, markdown (a quote, a fence, a bullet), Windows line ends, gzip, a blank
line between the lines. This matrix crosses every shape with every carrier: the zero one
must give ``zero_acceptance`` (at any confidence), the same shape at a healthy 60% must
give no acceptance finding.

The shapes are the wording engines print (parsers/*.toml samples, the format research);
the zero numbers are those of seed 003 (vLLM 0.19.0, 0 of 1692 drafted, k=4) and of the
held-out fragments ('0 of 402 drafted').
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pytest

import specscope
from specscope.store import durable

# What blames the acceptance: a healthy paste must get none of them.
ACCEPTANCE = {"zero_acceptance", "low_acceptance", "position_cliff"}

# Each shape: its lines at zero acceptance and at 60% (the same counts of drafts).
SHAPES: dict[str, tuple[list[str], list[str]]] = {
    "vllm_v1_line": (
        [
            "(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] SpecDecoding metrics: "
            "Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted "
            "throughput: 169.20 tokens/s, Accepted: 0 tokens, Drafted: 1692 tokens, "
            "Per-position acceptance rate: 0.000, 0.000, 0.000, 0.000, Avg Draft acceptance "
            "rate: 0.0%"
        ],
        [
            "(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] SpecDecoding metrics: "
            "Mean acceptance length: 3.40, Accepted throughput: 101.50 tokens/s, Drafted "
            "throughput: 169.20 tokens/s, Accepted: 1015 tokens, Drafted: 1692 tokens, "
            "Per-position acceptance rate: 0.780, 0.630, 0.540, 0.450, Avg Draft acceptance "
            "rate: 60.0%"
        ],
    ),
    "vllm_v1_tail": (
        [
            "Accepted: 0 tokens, Drafted: 1692 tokens, Per-position acceptance rate: 0.000, "
            "0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.0%"
        ],
        [
            "Accepted: 1015 tokens, Drafted: 1692 tokens, Per-position acceptance rate: 0.780, "
            "0.630, 0.540, 0.450, Avg Draft acceptance rate: 60.0%"
        ],
    ),
    "vllm_v1_counts": (
        ["Accepted: 0 tokens, Drafted: 402 tokens"],
        ["Accepted: 241 tokens, Drafted: 402 tokens"],
    ),
    "vllm_v1_head": (
        [
            "(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] SpecDecoding metrics: "
            "Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted "
            "throughput: 169.20 tokens/s"
        ],
        [
            "(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] SpecDecoding metrics: "
            "Mean acceptance length: 3.40, Accepted throughput: 101.50 tokens/s, Drafted "
            "throughput: 169.20 tokens/s"
        ],
    ),
    "vllm_v1_per_position": (
        ["Per-position acceptance rate: 0.000, 0.000, 0.000, 0.000"],
        ["Per-position acceptance rate: 0.780, 0.630, 0.540, 0.450"],
    ),
    "vllm_v0_line": (
        [
            "INFO 10-16 19:05:47 [metrics.py:439] Speculative metrics: Draft acceptance rate: "
            "0.000, System efficiency: 0.200, Number of speculative tokens: 4, Number of "
            "accepted tokens: 0, Number of draft tokens: 13312, Number of emitted tokens: 3328."
        ],
        [
            "INFO 10-16 19:05:47 [metrics.py:439] Speculative metrics: Draft acceptance rate: "
            "0.600, System efficiency: 0.680, Number of speculative tokens: 4, Number of "
            "accepted tokens: 7987, Number of draft tokens: 13312, Number of emitted tokens: "
            "11315."
        ],
    ),
    "vllm_v0_line_old_envelope": (
        [
            "INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: "
            "0.000, System efficiency: 0.200, Number of speculative tokens: 4, Number of "
            "accepted tokens: 0, Number of draft tokens: 13312, Number of emitted tokens: 3328."
        ],
        [
            "INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: "
            "0.600, System efficiency: 0.680, Number of speculative tokens: 4, Number of "
            "accepted tokens: 7987, Number of draft tokens: 13312, Number of emitted tokens: "
            "11315."
        ],
    ),
    "vllm_bench_spec_section": (
        [
            "---------------Speculative Decoding---------------",
            "Acceptance rate (%):                     0.00      ",
            "Acceptance length:                       1.00      ",
            "Drafts:                                  11043     ",
            "Draft tokens:                            44172     ",
            "Accepted tokens:                         0         ",
            "Per-position acceptance (%):",
            "  Position 0:                            0.00      ",
            "  Position 1:                            0.00      ",
            "  Position 2:                            0.00      ",
            "  Position 3:                            0.00      ",
            "==================================================",
        ],
        [
            "---------------Speculative Decoding---------------",
            "Acceptance rate (%):                     60.00     ",
            "Acceptance length:                       3.40      ",
            "Drafts:                                  11043     ",
            "Draft tokens:                            44172     ",
            "Accepted tokens:                         26503     ",
            "Per-position acceptance (%):",
            "  Position 0:                            78.00     ",
            "  Position 1:                            63.00     ",
            "  Position 2:                            54.00     ",
            "  Position 3:                            45.00     ",
            "==================================================",
        ],
    ),
    "vllm_prom_three": (
        [
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen3.5-27B-AWQ"} 423.0',
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="Qwen/Qwen3.5-27B-AWQ"}'
            " 1692.0",
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen3.5-27B-AWQ"}'
            " 0.0",
        ],
        [
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen3.5-27B-AWQ"} 423.0',
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="Qwen/Qwen3.5-27B-AWQ"}'
            " 1692.0",
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen3.5-27B-AWQ"}'
            " 1015.0",
        ],
    ),
    "vllm_prom_two_bare": (
        [
            "vllm:spec_decode_num_draft_tokens_total 1692",
            "vllm:spec_decode_num_accepted_tokens_total 0",
        ],
        [
            "vllm:spec_decode_num_draft_tokens_total 1692",
            "vllm:spec_decode_num_accepted_tokens_total 1015",
        ],
    ),
    "vllm_prom_two_labelled": (
        [
            'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 0.0',
            'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 402.0',
        ],
        [
            'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 241.0',
            'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 402.0',
        ],
    ),
    "sglang_decode_batch": (
        [
            "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 108, token usage: "
            "0.00, accept len: 1.00, accept rate: 0.00, cuda graph: True, gen throughput "
            "(token/s): 12.39, #queue-req: 0, "
        ],
        [
            "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 108, token usage: "
            "0.00, accept len: 3.40, accept rate: 0.60, cuda graph: True, gen throughput "
            "(token/s): 42.11, #queue-req: 0, "
        ],
    ),
    "sglang_accept_fragment": (
        ["accept len: 1.00, accept rate: 0.00"],
        ["accept len: 3.40, accept rate: 0.60"],
    ),
    "sglang_prom_length": (
        ['sglang:spec_accept_length{model_name="Qwen/Qwen3-8B"} 1.0'],
        ['sglang:spec_accept_length{model_name="Qwen/Qwen3-8B"} 3.4'],
    ),
    "sglang_prom_length_rate": (
        [
            "sglang:spec_accept_length 1.0",
            "sglang:spec_accept_rate 0.0",
        ],
        [
            "sglang:spec_accept_length 3.4",
            "sglang:spec_accept_rate 0.6",
        ],
    ),
    "sglang_json_key": (
        ['"spec_accept_length": 1.0'],
        ['"spec_accept_length": 3.4'],
    ),
    "sglang_meta_info": (
        [
            '{"meta_info": {"completion_tokens": 128, "spec_accept_length": 1.0, '
            '"spec_verify_ct": 128}}'
        ],
        [
            '{"meta_info": {"completion_tokens": 128, "spec_accept_length": 3.4, '
            '"spec_verify_ct": 38}}'
        ],
    ),
    "llamacpp_request": (
        ["draft acceptance rate = 0.00000 (    0 accepted /   402 generated)"],
        ["draft acceptance rate = 0.59950 (  241 accepted /   402 generated)"],
    ),
    "llamacpp_slot": (
        [
            "[49965] 3.07.590.854 I slot print_timing: id  2 | task 495 | draft acceptance = "
            "0.00000 (    0 accepted /  4077 generated)"
        ],
        [
            "[49965] 3.07.590.854 I slot print_timing: id  2 | task 495 | draft acceptance = "
            "0.60000 ( 2446 accepted /  4077 generated)"
        ],
    ),
    "trtllm_iteration_stats": (
        [
            '{"iter": 1532, "iterLatencyMS": 14.7, "numActiveRequests": 64, '
            '"specDecodingStats": {"numDraftTokens": 192, "numAcceptedTokens": 0, '
            '"numRequestsWithDraftTokens": 64, "acceptanceLength": 1.0, "iterLatencyMS": 3.1, '
            '"draftOverhead": 0.21}}'
        ],
        [
            '{"iter": 1532, "iterLatencyMS": 14.7, "numActiveRequests": 64, '
            '"specDecodingStats": {"numDraftTokens": 192, "numAcceptedTokens": 115, '
            '"numRequestsWithDraftTokens": 64, "acceptanceLength": 2.8, "iterLatencyMS": 3.1, '
            '"draftOverhead": 0.21}}'
        ],
    ),
    "trtllm_request": (
        [
            '{"index": 0, "finish_reason": "stop", "avg_decoded_tokens_per_iter": 1.0, '
            '"speculative_decoding": {"acceptance_rate": 0.0, "total_accepted_draft_tokens": 0, '
            '"total_draft_tokens": 360, "num_spec_steps": 120, "num_spec_tokens": 3}}'
        ],
        [
            '{"index": 0, "finish_reason": "stop", "avg_decoded_tokens_per_iter": 2.8, '
            '"speculative_decoding": {"acceptance_rate": 0.6, "total_accepted_draft_tokens": '
            '216, "total_draft_tokens": 360, "num_spec_steps": 120, "num_spec_tokens": 3}}'
        ],
    ),
    "trtllm_prom": (
        [
            'trtllm_spec_decode_num_draft_tokens_total{model_name="m",engine_type="trtllm"} 262.0',
            'trtllm_spec_decode_num_accepted_tokens_total{model_name="m",engine_type="trtllm"} 0.0',
        ],
        [
            'trtllm_spec_decode_num_draft_tokens_total{model_name="m",engine_type="trtllm"} 262.0',
            'trtllm_spec_decode_num_accepted_tokens_total{model_name="m",engine_type="trtllm"}'
            " 157.0",
        ],
    ),
}


def _wrap(width: int) -> Callable[[list[str]], str]:
    # A terminal breaks at the column, mid-word and mid-number; copied, each row is a line.
    def wrap(lines: list[str]) -> str:
        rows = [line[i : i + width] for line in lines for i in range(0, max(len(line), 1), width)]
        return "\n".join(rows) + "\n"

    return wrap


def _each(prefix: str = "", suffix: str = "") -> Callable[[list[str]], str]:
    return lambda lines: "".join(f"{prefix}{line}{suffix}\n" for line in lines)


CARRIERS: dict[str, Callable[[list[str]], str]] = {
    "plain": _each(),
    "compose": _each("vllm-server-1  | "),
    "kubectl": _each("2026-11-24T10:15:02.123456789Z "),
    "ansi": _each("\x1b[0;36m", "\x1b[0m"),
    "quote": _each("> "),
    "fence": lambda lines: "```\n" + "".join(f"{line}\n" for line in lines) + "```\n",
    "bullet": _each("- "),
    "crlf": _each(suffix="\r"),
    "trailing_spaces": _each(suffix="   "),
    "wrapped_80": _wrap(80),
    "wrapped_120": _wrap(120),
    "gzip": _each(),
    "blank_between": lambda lines: "\n\n".join(lines) + "\n",
}


@pytest.fixture(autouse=True)
def _no_disk_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    # What is read, not how durably it is stored: a store synced to disk 600 times costs
    # minutes on a busy machine and tells nothing here.
    monkeypatch.setattr(durable, "sync_file", lambda path: None)
    monkeypatch.setattr(durable, "sync_dir", lambda path: None)


def found(tmp_path: Path, text: str, *, gz: bool = False) -> set[str]:
    """The kinds ``detect`` finds in ``text`` pasted into a file and ingested as a user would."""
    log = tmp_path / ("paste.log.gz" if gz else "paste.log")
    data = text.encode("utf-8")
    log.write_bytes(gzip.compress(data) if gz else data)
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026)
    if not (store / "specscope.json").exists():
        return set()
    return {f.kind for f in specscope.detect(specscope.open_store(store))}


MATRIX = [
    pytest.param(shape, carrier, id=f"{shape}-{carrier}")
    for shape in SHAPES
    for carrier in CARRIERS
]
# What the readers do not read yet, said where it fails (strict: once it is read, the test
# fails until the mark goes).
GAPS = {
    ("vllm_bench_spec_section", "bullet"): "a bench block's lines each made a list item "
    "('- Acceptance rate (%): 0.00'): bench_serving reads its labels from a line's start",
}
ZERO_MATRIX = [
    pytest.param(
        *p.values,
        id=p.id,
        marks=[pytest.mark.xfail(reason=GAPS[p.values], strict=True)] if p.values in GAPS else [],
    )
    for p in MATRIX
]


@pytest.mark.parametrize(("shape", "carrier"), ZERO_MATRIX)
def test_zero_acceptance_in_every_carrier(tmp_path: Path, shape: str, carrier: str) -> None:
    text = CARRIERS[carrier](SHAPES[shape][0])
    kinds = found(tmp_path, text, gz=carrier == "gzip")
    assert "zero_acceptance" in kinds, f"{sorted(kinds)} from:\n{text}"


@pytest.mark.parametrize(("shape", "carrier"), MATRIX)
def test_healthy_acceptance_in_every_carrier(tmp_path: Path, shape: str, carrier: str) -> None:
    text = CARRIERS[carrier](SHAPES[shape][1])
    kinds = found(tmp_path, text, gz=carrier == "gzip")
    assert not kinds & ACCEPTANCE, f"{sorted(kinds)} from:\n{text}"


# -- what one line alone says ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "accepted"),
    [
        ("vllm:spec_decode_num_accepted_tokens_total 0.0", 0),
        ('vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 0', 0),
        ("vllm-server-1  | vllm:spec_decode_num_accepted_tokens_total 52.0", 52),
    ],
)
def test_an_accepted_counter_alone_is_kept_and_blames_nothing(
    tmp_path: Path, line: str, accepted: int
) -> None:
    """Accepted tokens with no drafted counter beside them: 0 of drafts nobody counted is
    no 0% (a server that never drafted prints 0 too), so the row is kept as printed,
    partial, with no rate and no k, and no acceptance finding comes of it."""
    (row,) = specscope.parse_text(line + "\n").tables["spec_decode"]
    assert (row["accepted_tokens"], row["partial"]) == (accepted, True)
    assert row.get("acceptance_rate") is None and row.get("k") is None
    assert not found(tmp_path, line + "\n") & ACCEPTANCE


@pytest.mark.parametrize(
    "text",
    [
        '"spec_accept_length": 1.0',
        '- "avg_spec_accept_length": **1.0**,',
        '{"meta_info": {"completion_tokens": 96, "spec_accept_length": 1.0}}',
    ],
)
def test_a_mean_length_of_one_alone_is_suggestive_zero_acceptance(
    tmp_path: Path, text: str
) -> None:
    """A mean accepted length of exactly 1.0: nothing accepted, on steps nobody counted."""
    (row,) = specscope.parse_text(text + "\n").tables["spec_decode"]
    assert row["mean_acceptance_length"] == 1.0 and row["partial"]
    kinds = {f.kind: f.confidence.level for f in findings(tmp_path, text + "\n")}
    assert kinds.get("zero_acceptance") == "suggestive", kinds


@pytest.mark.parametrize(
    "text",
    [
        'We got "spec_accept_length": 1.0 on every request.',
        '"spec_accept_length": 1.0 is what we expected before the fix',
        '  "spec_accept_length": 2.0, "spec_verify_ct": 2',
    ],
)
def test_a_key_in_a_sentence_is_no_record(text: str) -> None:
    assert not specscope.parse_text(text + "\n").tables.get("spec_decode")


def findings(tmp_path: Path, text: str) -> list:
    log = tmp_path / "paste.log"
    log.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026)
    return specscope.detect(specscope.open_store(store))


# -- a blank line ends a table ---------------------------------------------------------------

TABLE = """| Variant | Output tok/s | Acceptance | Accepted / Drafted |
|---|---:|---:|---:|
| greedy | 113.40 | 10.28% | 1393 / 13548 |
| probability | 168.71 | 49.38% | 4062 / 8226 |"""
SECOND = """| Run | Acceptance | Accepted / Drafted |
|---|---:|---:|
| k=3 | 0.00% | 0 / 402 |"""


@pytest.mark.parametrize("blanks", [1, 2, 5000])
def test_two_tables_a_blank_line_apart_are_two(tmp_path: Path, blanks: int) -> None:
    """Markdown ends a table at a blank line: the second table is read under its own
    header, its row on the line it is on (the line parser and the bulk reader alike)."""
    from .test_bulk import _same

    text = TABLE + "\n" * (blanks + 1) + SECOND + "\n"
    rows = specscope.parse_text(text).tables["spec_decode"]
    row_line = 4 + blanks + 3
    assert [(r["line"], r["accepted_tokens"], r["draft_tokens"]) for r in rows] == [
        (3, 1393, 13548),
        (4, 4062, 8226),
        (row_line, 0, 402),
    ]
    log = tmp_path / "tables.md"
    log.write_text(text, encoding="utf-8")
    _same(log, 4096)
