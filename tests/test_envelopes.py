"""Records wrapped in what the world puts around log lines still read the same."""

from __future__ import annotations

import json

import pytest

from specscope.logs.clean import clean_line
from specscope.logs.parser import parse_text

SPEC = (
    "(APIServer pid=5069) INFO 04-07 17:30:34 [metrics.py:101] SpecDecoding metrics: "
    "Mean acceptance length: 5.29, Accepted throughput: 50.60 tokens/s, Drafted throughput: "
    "59.00 tokens/s, Accepted: 506 tokens, Drafted: 590 tokens, Per-position acceptance rate: "
    "0.966, 0.898, 0.864, 0.822, 0.737, Avg Draft acceptance rate: 85.8%"
)
STATS = (
    "(APIServer pid=5069) INFO 04-07 17:30:34 [loggers.py:259] Engine 000: Avg prompt "
    "throughput: 0.0 tokens/s, Avg generation throughput: 62.4 tokens/s, Running: 1 reqs, "
    "Waiting: 0 reqs, GPU KV cache usage: 34.9%, Prefix cache hit rate: 0.0%"
)

WRAPPINGS = {
    "plain": lambda s: s,
    "compose": lambda s: f"vllm-qwen-1  | {s}",
    "docker -t": lambda s: f"2026-04-07T17:30:34.123456789Z {s}",
    "compose -t": lambda s: f"vllm-1  | 2026-04-07T17:30:34.123456789Z {s}",
    "kubectl --prefix": lambda s: f"[pod/vllm-0/vllm] {s}",
    "kubectl --timestamps": lambda s: f"2026-04-07T17:30:34.123+02:00 {s}",
    "CRI file": lambda s: f"2026-04-07T17:30:34.123456789Z stdout F {s}",
    "collector": lambda s: f"2026-04-07 17:30:34.353 | {s}",
    "ansi": lambda s: s.replace(
        "(APIServer pid=5069) ", "\x1b[1;36m(APIServer pid=5069)\x1b[0;0m "
    ),
    "ansi without ESC": lambda s: s.replace("(APIServer", "[0;36m(APIServer").replace(
        ") INFO", ")[0;0m INFO"
    ),
    "crlf": lambda s: s + "\r",
    "docker json": lambda s: json.dumps(
        {"log": s + "\n", "stream": "stdout", "time": "2026-04-07T17:30:34.1Z"}
    ),
    "markdown quote": lambda s: f"> {s}",
    "markdown bold": lambda s: f"**{s}**",
    "backticks": lambda s: f"`{s}`",
    "bullet": lambda s: f"- {s}",
}


@pytest.mark.parametrize("name", WRAPPINGS)
def test_wrapped_lines_read_the_same(name):
    wrap = WRAPPINGS[name]
    result = parse_text("\n".join(wrap(line) for line in (STATS, SPEC)))
    (spec,) = result.tables["spec_decode"]
    (stats,) = result.tables["engine_stats"]
    assert spec["accepted_tokens"] == 506
    assert spec["accepted_per_pos"] == [114, 106, 102, 97, 87]
    assert spec["engine"] == 0 and spec["stats_line"] == 1
    assert stats["kv_cache_usage"] == pytest.approx(0.349)
    assert spec["_ts"][1:] == (4, 7, "17:30:34")
    assert [r.procs for r in result.runs] == [{"APIServer": 5069}]


def test_markdown_fence_around_records():
    text = "Here is my log:\n```log\n" + STATS + "\n" + SPEC + "\n```\nAny idea?"
    result = parse_text(text)
    assert len(result.tables["spec_decode"]) == 1
    assert result.tables["spec_decode"][0]["line"] == 4


def test_container_timestamp_gives_the_year():
    assert clean_line(f"2025-12-31T23:59:59Z {SPEC}").year == 2025
    assert clean_line(SPEC).year is None


def test_vllm_json_formatter_line():
    record = {
        "asctime": "2026-04-07 17:30:34,101",
        "levelname": "INFO",
        "name": "vllm.metrics",
        "processName": "APIServer",
        "process": 5069,
        "message": SPEC.split("[metrics.py:101] ", 1)[1],
    }
    result = parse_text(json.dumps(record))
    (spec,) = result.tables["spec_decode"]
    assert spec["accepted_tokens"] == 506
    assert spec["_ts"] == (2026, 4, 7, "17:30:34")
    assert result.runs[0].procs == {"APIServer": 5069}


def test_three_records_glued_on_one_line():
    text = STATS + SPEC + STATS.replace("Engine 000", "Engine 001")
    result = parse_text(text)
    assert len(result.tables["spec_decode"]) == 1
    assert [r["engine"] for r in result.tables["engine_stats"]] == [0, 1]


def test_glued_without_envelope():
    spec_body = SPEC.split("] ", 1)[1]
    result = parse_text(STATS + spec_body)
    assert result.tables["spec_decode"][0]["accepted_tokens"] == 506


@pytest.mark.parametrize("width", [37, 50, 80, 100, 120, 160])
def test_hard_wrapped_at_any_width(width):
    text = STATS + "\n" + SPEC
    wrapped = "\n".join(
        line[i : i + width] for line in text.split("\n") for i in range(0, len(line), width)
    )
    result = parse_text(wrapped)
    (spec,) = result.tables["spec_decode"]
    assert spec["accepted_tokens"] == 506 and spec["draft_tokens"] == 590
    assert spec["per_position_rate"] == [0.966, 0.898, 0.864, 0.822, 0.737]
    assert spec["acceptance_rate"] == pytest.approx(0.858)
    (stats,) = result.tables["engine_stats"]
    assert stats["running_reqs"] == 1 and stats["prefix_cache_hit_rate"] == 0.0


# A paste's tables under their captions (fixtures/world/221, cut to two rows each: a baseline's
# table and speculation's), as tests/test_paste_variants.py pastes it.
TABLES = """The base model speed:

bs | throughput
-- | --
1 | 222.47
4 | 566.21

And the results of EAGLE3 combined:

bs | steps | topk | num_draft | throughput | acc len
-- | -- | -- | -- | -- | --
1 | 3 | 1 | 4 | 159.78 | 1.86
4 | 3 | 1 | 4 | 447.90 | 1.86"""


@pytest.mark.parametrize(
    "paste",
    [
        pytest.param(lambda t: t.replace("\n", "\r\n"), id="crlf"),
        pytest.param(lambda t: "\n".join(f"> {s}".rstrip() for s in t.split("\n")), id="quote"),
    ],
)
def test_a_pasted_table_reads_as_the_plain_one(paste):
    """A CRLF line end is no blank line after each row (which ended the table), and a
    reply's quote is no part of a row's first cell."""
    plain = parse_text(TABLES).tables["bench"]
    assert len(plain) == 1
    assert parse_text(paste(TABLES)).tables.get("bench") == plain


@pytest.mark.parametrize("width", [60, 80, 100])
def test_an_event_cut_by_a_terminal_is_joined(width):
    """'EngineCore encountere' / 'd a fatal error.': the crash is found across the wrap."""
    line = (
        "(EngineCore_0 pid=2651) ERROR 06-11 11:46:39 [core.py:517] EngineCore encountered "
        "a fatal error."
    )
    wrapped = "\n".join(line[i : i + width] for i in range(0, len(line), width))
    (event,) = parse_text(STATS + "\n" + wrapped).tables["events"]
    assert event["code"] == "engine_core_fatal" and event["line"] == 2


def test_data_parallel_engines_by_adjacency():
    lines = []
    for engine, accepted in ((0, 10), (1, 20), (0, 30), (1, 40)):
        lines.append(STATS.replace("Engine 000", f"Engine {engine:03d}"))
        lines.append(SPEC.replace("Accepted: 506", f"Accepted: {accepted}"))
    result = parse_text("\n".join(lines))
    assert [(r["engine"], r["accepted_tokens"]) for r in result.tables["spec_decode"]] == [
        (0, 10),
        (1, 20),
        (0, 30),
        (1, 40),
    ]


def test_a_spec_line_with_no_stats_line_before_has_no_engine():
    result = parse_text(SPEC + "\n" + SPEC)
    assert [r.get("engine") for r in result.tables["spec_decode"]] == [None, None]


def test_new_pid_is_a_new_run_and_startup_lines_configure_it():
    start = (
        "(APIServer pid=1) INFO 04-07 17:00:00 [api_server.py:1] vLLM API server version 0.10.1\n"
        "(APIServer pid=1) INFO 04-07 17:00:00 [utils.py:1] non-default args: {'model': 'm', "
        "'speculative_config': {'method': 'deepseek_mtp', 'num_speculative_tokens': 5}}\n"
    )
    text = start + STATS.replace("5069", "1") + "\n" + SPEC.replace("5069", "1") + "\n"
    later = "17:33:34"  # a restart takes at least a model load
    text += STATS.replace("17:30:34", later) + "\n" + SPEC.replace("17:30:34", later)
    result = parse_text(text)
    assert len(result.runs) == 2
    first, second = result.runs
    assert first.config["spec_method"] == "mtp" and first.config["k"] == 5
    assert first.config["vllm_version"] == "0.10.1"
    assert "k" not in second.config
    assert [r["_run"] for r in result.tables["spec_decode"]] == [1, 2]


def test_a_second_server_start_without_pids_is_a_new_run():
    text = "\n".join(
        [
            "INFO 04-07 17:00:00 [api_server.py:1] vLLM API server version 0.9.2",
            STATS.split(") ", 1)[1],
            SPEC.split(") ", 1)[1],
            "INFO 04-07 18:00:00 [api_server.py:1] vLLM API server version 0.9.2",
            STATS.split(") ", 1)[1],
            SPEC.split(") ", 1)[1],
        ]
    )
    result = parse_text(text)
    assert len(result.runs) == 2
    assert [r.counts["spec_decode"] for r in result.runs] == [1, 1]


def test_api_servers_side_by_side_are_one_run():
    """`--api-server-count N`: N API server processes log at once, each for its engines
    (the shape of vllm-project/vllm-ascend#12521); a new pid within seconds is a sibling."""
    lines = []
    for minute in range(3):
        for pid, engine in ((95669, 2), (95673, 4), (95665, 0)):
            at = f"17:3{minute}:{34 + engine}"
            lines.append(
                STATS.replace("5069", str(pid))
                .replace("17:30:34", at)
                .replace("Engine 000", f"Engine {engine:03d}")
            )
            lines.append(SPEC.replace("5069", str(pid)).replace("17:30:34", at))
    result = parse_text("\n".join(lines) + "\n")
    assert len(result.runs) == 1
    assert result.runs[0].side_pids == {"APIServer": [95673, 95665]}
    assert [r["engine"] for r in result.tables["spec_decode"]] == [2, 4, 0] * 3
    # the same process names two minutes after the last line are a restart
    restart = [line.replace("pid=95669", "pid=7").replace("17:3", "17:4") for line in lines[:2]]
    result = parse_text("\n".join(lines + restart) + "\n")
    assert len(result.runs) == 2


@pytest.mark.parametrize("header", ["[metrics.py:96]", "[model_runner.py:1204]", "[m.py:1]"])
def test_a_colour_reset_without_its_escape_leaves_a_header_that_starts_with_m(
    header: str,
) -> None:
    """'[m' alone is a reset whose ESC was lost only where no name goes on after it: H10
    found '[metrics.py:96]' read as 'etrics.py:96]' on every line the line parser cleaned."""
    line = f"[0;36m(APIServer pid=1)[m INFO 04-07 17:19:59 {header} x"
    assert clean_line(line).text == f"(APIServer pid=1) INFO 04-07 17:19:59 {header} x"


def test_a_bullet_is_peeled_before_a_records_label_not_before_an_authors_words():
    """'- SpecDecoding metrics: ...' is a record pasted as a list item; '- Speculative
    accept rate: 48.5%' is the author's bullet, which the bullets definition reads (world
    350's rate, H7): peeling its '- ' left a line no definition reads."""
    assert clean_line("- SpecDecoding metrics: Mean acceptance length: 1.00").text.startswith(
        "SpecDecoding"
    )
    assert clean_line("1. Speculative metrics: Draft acceptance rate: 0.5").text.startswith(
        "Speculative metrics"
    )
    rows = parse_text("Results on chat:\n- Speculative accept rate: 48.5%\n").tables["spec_decode"]
    assert [(r["format"], r["reported_rate"]) for r in rows] == [
        ("stated_acceptance_bullets", 0.485)
    ]
