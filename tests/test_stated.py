"""Speed compared by an author (a sentence, two lines, a table) or by two launches in one
log: read as the author's claim, kept apart from telemetry, judged by no_speedup."""

from __future__ import annotations

import json

import pytest

import specscope
from specscope.logs.definitions import load_definitions
from specscope.logs.derive import stated_comparison
from specscope.logs.parser import parse_text

from .helpers import findings_of_paste

STATED = [d for d in load_definitions() if d.name.startswith("stated_")]


_findings = findings_of_paste


def _slow(found: list[specscope.Finding]) -> list[specscope.Finding]:
    return [f for f in found if f.kind == "no_speedup"]


@pytest.mark.parametrize(
    ("defn", "text"),
    [
        pytest.param(d, s.text, id=f"{d.name}-{i}")
        for d in STATED
        for i, s in enumerate(d.samples)
        if not s.records
    ],
)
def test_shapes_that_are_no_comparison_give_no_record(defn, text) -> None:
    # A sample without records is a shape the definition must not read (tests/test_definitions
    # checks only the samples that give records).
    result = parse_text(text)
    rows = [r for t in result.tables.values() for r in t if r.get("format") == defn.name]
    assert rows == []


def test_every_stated_definition_has_a_negative_sample() -> None:
    # stated_speedup, _changes, _pairs, _ratio, _settings, _table, _table_bare,
    # _tables_joined, _words;
    # stated_acceptance, _bullets, _heading, _inline, _positions; stated_claims, _claims_acceptance
    assert sorted(d.name for d in STATED) == [
        "stated_acceptance",
        "stated_acceptance_bullets",
        "stated_acceptance_heading",
        "stated_acceptance_inline",
        "stated_acceptance_positions",
        "stated_claims",
        "stated_claims_acceptance",
        "stated_speedup",
        "stated_speedup_changes",
        "stated_speedup_pairs",
        "stated_speedup_ratio",
        "stated_speedup_settings",
        "stated_speedup_table",
        "stated_speedup_table_bare",
        "stated_speedup_tables_joined",
        "stated_speedup_words",
    ]
    assert all(any(not s.records for s in d.samples) for d in STATED)


def test_a_stated_slowdown_is_suggestive_and_quotes_the_line(tmp_path) -> None:
    text = "notes\nConsequence measured: decode 25 tps with spec vs 42.6 without.\n"
    (slow,) = _slow(_findings(tmp_path, text))
    assert slow.lines == (2, 2)
    assert "25 tps with spec vs 42.6 without" in slow.explanation
    assert slow.measured["speedup"] == pytest.approx(25 / 42.6)
    assert slow.confidence is not None
    assert slow.confidence.level == "suggestive"
    assert any("author" in a for a in slow.confidence.assumptions)


def test_a_stated_speedup_is_no_finding(tmp_path) -> None:
    assert _slow(_findings(tmp_path, "We got 42.6 tps with MTP vs 25 without it.\n")) == []


def test_seconds_for_the_same_work_divide_the_other_way(tmp_path) -> None:
    slower = "The job takes 460 s with SD off, 1,800 s with SD on.\n"
    (slow,) = _slow(_findings(tmp_path / "a", slower))
    assert slow.measured["speedup"] == pytest.approx(460 / 1800)
    assert (
        _slow(_findings(tmp_path / "b", "It takes 1,800 s with SD off, 460 s with SD on.\n")) == []
    )


def test_stated_rows_are_not_paired_with_a_benchmark(tmp_path) -> None:
    # A baseline benchmark block and a stated speculative speed far below it: the stated
    # row is the author's, compared only with its own baseline (here: faster).
    block = (
        "============ Serving Benchmark Result ============\n"
        "Successful requests:                     100\n"
        "Maximum request concurrency:             1\n"
        "Output token throughput (tok/s):         900.0\n"
        "==================================================\n"
    )
    found = _findings(tmp_path, block + "Then 50 tok/s with MTP against 40 tok/s without.\n")
    assert _slow(found) == []


def test_a_bench_row_keeps_where_it_came_from(tmp_path) -> None:
    log = tmp_path / "paste.log"
    log.write_text(
        "x\n| context | no speculation | MTP | change |\n|---|---|---|---|\n"
        "| 1K | 40.0 | 50.0 | +25.0 % |\n| 32K | 30.0 | 9.0 | -70.0 % |\n"
    )
    specscope.ingest([log], store=tmp_path / "s", year=2026)
    (row,) = specscope.open_store(tmp_path / "s").bench.collect().to_dicts()
    said = json.loads(row["extra"])
    assert row["format"] == "stated_speedup_table"
    assert (row["line"], said["offset"]) == (2, 3)  # the header's line, the 32K row 3 below
    assert row["output_throughput"] == 9.0 and said["baseline"] == 30.0
    assert [p["row"] for p in said["rows"]] == ["1K", "32K"]


def test_units_of_two_kinds_do_not_compare() -> None:
    row = stated_comparison(
        {
            "stated": "x",
            "stated_spec": "20",
            "stated_unit": "tok/s",
            "stated_base": "30",
            "stated_unit2": "s",
        }
    )
    assert row.get("output_throughput") is None and row.get("duration_s") is None
    assert "do not compare" in row["problems"]


_ENGINE = (
    "(APIServer pid={pid}) INFO 04-09 {t} [loggers.py:259] Engine 000: Avg prompt throughput: "
    "9.0 tokens/s, Avg generation throughput: {gen} tokens/s, Running: {run} reqs, Waiting: "
    "{wait} reqs, GPU KV cache usage: 0.2%, Prefix cache hit rate: 0.0%\n"
)
_SPEC = (
    "(APIServer pid=2) INFO 04-09 12:00:00 [metrics.py:101] SpecDecoding metrics: Mean "
    "acceptance length: 1.97, Accepted throughput: 63.00 tokens/s, Drafted throughput: 65.20 "
    "tokens/s, Accepted: 630 tokens, Drafted: 652 tokens, Per-position acceptance rate: 0.966, "
    "Avg Draft acceptance rate: 96.6%\n"
)


def test_a_launch_without_speculation_at_the_same_load(tmp_path) -> None:
    text = (
        _ENGINE.format(pid=1, t="11:00:00", gen=342.2, run=1, wait=0)
        + _ENGINE.format(pid=2, t="12:00:00", gen=128.3, run=1, wait=0)
        + _SPEC
    )
    (slow,) = _slow(_findings(tmp_path, text))
    assert slow.measured["speedup"] == pytest.approx(128.3 / 342.2)
    assert slow.confidence is not None and slow.confidence.level == "suggestive"


@pytest.mark.parametrize(("run", "wait"), [(4, 0), (1, 6)])
def test_launches_at_another_load_or_queued_do_not_compare(tmp_path, run, wait) -> None:
    # Another number running, or requests waiting (admission-bound: world case 56), is no
    # like-for-like comparison.
    text = (
        _ENGINE.format(pid=1, t="11:00:00", gen=342.2, run=run, wait=wait)
        + _ENGINE.format(pid=2, t="12:00:00", gen=128.3, run=1, wait=0)
        + _SPEC
    )
    assert _slow(_findings(tmp_path, text)) == []


def test_the_finding_says_why_when_the_paste_shows_it(tmp_path) -> None:
    # SGLang issue 4759's decode line: 32 running, 68 queued, the KV cache 1% used.
    text = (
        "[2025-03-24 02:56:41 TP0] Decode batch. #running-req: 32, #token: 7352, token usage: "
        "0.01, accept len: 2.54, gen throughput (token/s): 39.33, largest-len: 0, "
        "#queue-req: 68, \n"
        "The throughput drops from 1039 to 321 tok/s with speculative decoding on.\n"
    )
    (slow,) = _slow(_findings(tmp_path, text))
    assert "up to 68" in slow.explanation and "capped" in slow.explanation
    assert slow.measured["speedup"] == pytest.approx(321 / 1039)


_SWEEP = (
    "| DRAFT | decode tok/s | acceptance |\n|---|---|---|\n"
    "| 0 | 5.89 | — |\n| 1 | 5.96 | 88% |\n| 2 | {deeper} | 55% |\n"
)


def test_a_deeper_draft_clearly_slower_in_a_stated_sweep_is_k_too_large(tmp_path) -> None:
    found = _findings(tmp_path, "CUDA:\n" + _SWEEP.format(deeper="4.52"))
    (deep,) = [f for f in found if f.kind == "k_too_large"]
    assert deep.expected["k at most"] == 1 and deep.measured["k"] == 2
    assert deep.lines == (6, 6)  # the depth-2 row
    assert deep.confidence is not None and deep.confidence.level == "suggestive"
    assert _slow(found) == []  # depth 1 is (just) faster than no drafting


def test_a_deeper_draft_within_noise_is_no_finding(tmp_path) -> None:
    found = _findings(tmp_path, "CUDA:\n" + _SWEEP.format(deeper="5.70"))
    assert [f for f in found if f.kind == "k_too_large"] == []


# TheTom/llama-cpp-turboquant #249: two builds' n-max sweeps side by side, a column each,
# the baseline row '0 (no MTP)'. Each build's depths are its own sweep.
_BUILDS = (
    "| n-max | mainline decode | fork decode | mainline acc | fork acc |\n|---|---|---|---|---|\n"
    "| 0 (no MTP) | 14.2 tok/s | ~14 tok/s | — | — |\n"
    "| 1 | 16.7 (1.18x) | 18.5 (1.31x) | 82.7% | 88.6% |\n"
    "| 2 | 38.3 (2.71x) | — | 79.8% | — |\n"
    "| 3 | 44.1 (3.0x) | {fork3} | 78% | 77.6% |\n"
)


def test_two_builds_sweeps_are_each_judged_against_their_own_depths(tmp_path) -> None:
    # mainline's k = 2 at 2.7x against the fork's k = 3 at 1.47x is no deeper draft slower
    found = _findings(tmp_path / "a", _BUILDS.format(fork3="20.6 (1.45x)"))
    assert [f.kind for f in found if f.kind in ("k_too_large", "no_speedup")] == []
    (deep,) = [
        f
        for f in _findings(tmp_path / "b", _BUILDS.format(fork3="12.0 (0.86x)"))
        if f.kind == "k_too_large"
    ]
    assert (deep.expected["k at most"], deep.measured["k"], deep.lines) == (1, 3, (6, 6))


# fixtures/world/273's shape (vllm-project/recipes #839): one drafter at two depths beside
# another drafter, no row without drafting, 'mean / median / max' named in the header.
_ALONE = (
    "| Spec | `num_speculative_tokens` | Decode gen tok/s (mean / median / max) | Avg draft "
    "accept. rate |\n|---|---:|---|---:|\n"
    "| MTP | 3 | **264.8 / 278.0 / 320.6** | ~61–66% |\n"
    "| DFlash2 | {k1} | **234.7 / {deep} / 322.6** | ~22–24% |\n"
    "| DFlash2 | {k2} | **290.6 / 304.1 / 346.5** | ~33–34% |\n"
)


@pytest.mark.parametrize(("k1", "k2"), [(7, 5), (5, 7)])  # the rows in either order
def test_one_drafters_deeper_draft_clearly_slower_without_a_baseline(tmp_path, k1, k2) -> None:
    deep = 255.5 if k1 == 7 else 304.1  # the k=7 row is the slow one either way
    shallow = 304.1 if k1 == 7 else 255.5
    text = _ALONE.format(k1=k1, k2=k2, deep=deep).replace("304.1 / 346.5", f"{shallow} / 346.5")
    found = _findings(tmp_path, text)
    deeper = [f for f in found if f.kind == "k_too_large"]
    # The rates column is read too (mean lengths 2.68 at k=7 against 2.70 at k=5): its
    # sibling finding says the same of k=7 from acceptance; the speeds' finding is one.
    assert {f.measured["k"] for f in deeper} == {7}
    (k,) = [f for f in deeper if "k at most" in f.expected]
    assert (k.expected["k at most"], k.measured["k"]) == (5, 7)
    assert k.measured["share of the best k's speed"] == pytest.approx(255.5 / 304.1)
    assert "DFlash2" in k.explanation and "median" not in k.explanation
    assert _slow(found) == []  # no baseline: nothing said against decoding without drafting


@pytest.mark.parametrize(
    "rows",
    [
        # the deeper draft within noise of the shallower one
        "| EAGLE-3 | 4 | 118.0 | 1 |\n| EAGLE-3 | 2 | 121.0 | 1 |\n",
        # deeper and faster
        "| EAGLE-3 | 4 | 140.0 | 1 |\n| EAGLE-3 | 2 | 121.0 | 1 |\n",
        # two drafters, one depth each: methods compared, not depths
        "| MTP | 3 | 90.0 | 1 |\n| EAGLE-3 | 6 | 60.0 | 1 |\n",
        # one drafter's depths, each at another load: the load, not the depth, differs
        "| EAGLE-3 | 2 | 100.0 | 1 |\n| EAGLE-3 | 4 | 50.0 | 64 |\n",
    ],
)
def test_depths_side_by_side_that_do_not_say_k_too_large(tmp_path, rows) -> None:
    text = "| Method | k | Output tok/s | conc |\n|---|---|---|---|\n" + rows
    if not parse_text(text).tables.get("bench"):  # (nothing read: nothing to judge)
        assert "MTP" in rows or "64" in rows
        return
    found = _findings(tmp_path, text)
    assert [f.kind for f in found if f.kind in ("k_too_large", "no_speedup")] == []


def test_one_drafters_depths_are_compared_at_the_same_load_only(tmp_path) -> None:
    rows = [(2, 1, 100.0), (4, 1, 50.0), (2, 64, 40.0), (4, 64, 45.0)]
    text = "| Method | k | conc | Output tok/s |\n|---|---|---|---|\n" + "".join(
        f"| EAGLE-3 | {k} | {c} | {v} |\n" for k, c, v in rows
    )
    (k,) = [f for f in _findings(tmp_path, text) if f.kind == "k_too_large"]
    assert (k.measured["k"], k.lines) == (4, (4, 4)) and "conc 1" in k.explanation


# The time of a token as the speed of a sweep without a rate of tokens (world 338's columns:
# 'TTFT | TPOT | Accept', milliseconds glued to the cells), the longer the slower.
_TIMED = "| Method | K | TTFT | {head} | Accept |\n|---|---|---|---|---|\n" + "".join(
    f"| EAGLE3 | {k} | {ttft}ms | {tpot}{{unit}} | {acc}% |\n"
    for k, ttft, tpot, acc in [(3, 38, 2.91, 53.5), (5, 41, 3.20, 38.5), (8, 44, 3.86, 25.7)]
)


def test_a_deeper_draft_with_a_clearly_longer_time_a_token_is_k_too_large(tmp_path) -> None:
    (k,) = [
        f
        for f in _findings(tmp_path, _TIMED.format(head="TPOT", unit="ms"))
        if f.kind == "k_too_large"
    ]
    assert (k.expected["k at most"], k.measured["k"]) == (3, 8)
    assert k.measured["share of the best k's speed"] == pytest.approx(2.91 / 3.86)
    assert "3.86 ms" in k.explanation and k.lines == (5, 5)


def test_a_sweep_whose_depth_is_the_first_column_is_one_configurations(tmp_path) -> None:
    # world 338's table: '| K | C=1 | ... | TTFT | TPOT | Accept |' under its summary line
    text = _TIMED.format(head="TPOT", unit="ms").replace("| Method ", "").replace("| EAGLE3 ", "")
    (k,) = [f for f in _findings(tmp_path, text) if f.kind == "k_too_large"]
    assert (k.expected["k at most"], k.measured["k"]) == (3, 8)


@pytest.mark.parametrize(
    ("head", "unit"),
    [
        ("TTFT (ms)", "ms"),  # a time to the first token is no decode speed
        ("TPOT", ""),  # no milliseconds anywhere: which unit, which way?
        ("TPOT", "s"),
    ],
)
def test_times_that_are_no_time_a_token_in_ms_give_no_sweep(tmp_path, head, unit) -> None:
    text = _TIMED.format(head=head, unit=unit).replace("| TTFT |", "| first |")
    rows = parse_text(text).tables.get("bench") or []
    assert [r for r in rows if "sweep" in (r.get("extra") or "")] == []


def test_the_authors_word_alone_is_a_suggestive_slowdown_without_numbers(tmp_path) -> None:
    said = "Note: speculative decoding was slower than plain decoding for every k we tried.\n"
    (slow,) = _slow(_findings(tmp_path / "a", said))
    assert slow.measured == {"stated": "slower"}  # no ratio: none was stated
    assert slow.confidence is not None and slow.confidence.level == "suggestive"
    hedged = "Speculative decoding can be slower than plain decoding when acceptance is low.\n"
    assert parse_text(hedged).tables.get("bench", []) == []


def test_a_tpot_pair_after_slower_than_divides_as_a_time(tmp_path) -> None:
    said = "dp4+MTP is *slower* than dp4 without MTP (36.1ms vs 32ms TPOT).\n"
    (slow,) = _slow(_findings(tmp_path, said))
    assert slow.measured["speedup"] == pytest.approx(32 / 36.1)
    assert slow.expected["baseline_mean_tpot_ms"] == 32.0


@pytest.mark.parametrize(
    ("said", "speedup"),
    [
        # a time a token named before the pair, the baseline named after it
        ("With EAGLE-3 on, TPOT is 14.2 ms vs 11.8 ms without speculative decoding.", 11.8 / 14.2),
        # the change of a time a token, the baseline labelled in parentheses
        ("Mean TPOT went from 11.8 ms (no spec) to 14.2 ms with MTP enabled.", 11.8 / 14.2),
        # the change of a rate when the author turns speculation on
        ("Output throughput drops from 1200 tok/s to 950 tok/s when I enable ngram.", 950 / 1200),
    ],
)
def test_a_slowdown_in_a_time_a_token_or_on_turning_speculation_on(tmp_path, said, speedup) -> None:
    (slow,) = _slow(_findings(tmp_path, said + "\n"))
    assert slow.measured["speedup"] == pytest.approx(speedup)


@pytest.mark.parametrize(
    "said",
    [
        "Mean TPOT went from 14.2 ms to 11.8 ms with MTP enabled.",  # a time that fell: faster
        "Latency went from 11 ms to 14 ms with MTP on.",  # a latency of what? no time a token
        "TTFT went from 11 ms to 14 ms with MTP on.",  # the first token: prefill's
        "Throughput went from 950 tok/s to 1200 tok/s when I enable ngram.",
    ],
)
def test_times_that_fell_or_are_no_decode_time_are_no_slowdown(tmp_path, said) -> None:
    if not parse_text(said).tables.get("bench"):  # (nothing read: nothing to judge)
        assert said.startswith("TTFT")
        return
    assert _slow(_findings(tmp_path, said + "\n")) == []


@pytest.mark.parametrize(
    ("table", "speedup"),
    [
        # configurations as rows, a time a token in milliseconds the only measure of decode
        (
            "| Setting | ITL (ms) |\n|---|---|\n| no spec | 9.1 |\n| EAGLE3 k=3 | 12.4 |\n",
            9.1 / 12.4,
        ),
        # conditions as rows, the baseline a column: the slowest condition decides
        (
            "| context | no spec TPOT (ms) | MTP TPOT (ms) |\n|---|---|---|\n"
            "| 4K | 20.1 | 15.0 |\n| 32K | 25.0 | 31.0 |\n",
            25.0 / 31.0,
        ),
        # a time that fell is a speedup: no finding
        ("| Setting | ITL (ms) |\n|---|---|\n| no spec | 9.1 |\n| EAGLE3 k=3 | 7.4 |\n", None),
    ],
)
def test_a_table_of_times_a_token_in_ms_compares_as_times(tmp_path, table, speedup) -> None:
    found = _slow(_findings(tmp_path, table))
    if speedup is None:
        assert found == []
        return
    (slow,) = found
    assert slow.measured["speedup"] == pytest.approx(speedup)
    assert "mean_tpot_ms" in slow.measured


def test_a_time_among_rates_in_a_metric_table_is_not_read_as_a_rate(tmp_path) -> None:
    # vllm #38182 (thc1006): TPOT fell 21.6% with MTP, a speedup its change column agrees
    # with as it would with a rate that fell
    table = (
        "| Metric | no-MTP | MTP k=1 | Δ |\n|---|---:|---:|---:|\n"
        "| **decode TPOT (ms / output token)** | **7.620 ± 0.022** | **5.976 ± 0.456** | "
        "**\u221221.6 %** |\n| total throughput tok/s (incl prefill) | 113.4 ± 12.9 | 149.3 ± 17.3 "
        "| +31.7 % |\n| TTFT (ms) | 78.6 ± 4.4 | 53.9 ± 15.0 | \u221231.4 % |\n"
    )
    assert _slow(_findings(tmp_path, table)) == []


def test_a_configuration_slower_than_the_baseline_is_named_when_another_helps(tmp_path) -> None:
    table = (
        "| config | out tok/s |\n|---|---|\n| baseline | 16.51 |\n"
        "| DFlash K=7 | 19.70 |\n| DFlash K=5 | {slow} |\n"
    )
    (slow,) = _slow(_findings(tmp_path / "a", table.format(slow="12.96")))
    assert slow.measured["speedup"] == pytest.approx(12.96 / 16.51)
    assert slow.lines == (5, 5)  # the slower configuration's row
    assert _slow(_findings(tmp_path / "b", table.format(slow="17.00"))) == []
